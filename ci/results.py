"""Reading a pytest JUnit XML: outcomes, skip reasons, and which registered tests ran."""
from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from ci.partition import dotted

SKIPS_FILE = "registered/skips.py"
REGISTERED_SKIP_RE = re.compile(r"^\[registered:(?P<key>[A-Za-z0-9_.-]+)\]")
_PARAMS = re.compile(r"\[.*\]$", re.S)


@dataclass(frozen=True)
class CaseResult:
    classname: str
    name: str
    time: float
    outcome: str          # passed | failed | error | skipped | xfailed
    message: str = ""

    @property
    def test_name(self) -> str:
        """``classname::name`` as a person reads it (JUnit loses the file/class boundary)."""
        return f"{self.classname}::{self.name}"

    @property
    def dotted(self) -> str:
        return f"{self.classname}.{_PARAMS.sub('', self.name)}".lstrip(".")


def read_junit(path: str | Path) -> list[CaseResult]:
    out: list[CaseResult] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag == "failure":
                outcome, message = "failed", child.get("message", "")
            elif child.tag == "error":
                outcome, message = "error", child.get("message", "")
            elif child.tag == "skipped" and outcome == "passed":
                kind = child.get("type", "")
                outcome = "xfailed" if kind == "pytest.xfail" else "skipped"
                message = child.get("message", "")
        out.append(CaseResult(case.get("classname", ""), case.get("name", ""),
                              float(case.get("time") or 0.0), outcome, message))
    return out


def registered_skip_keys(root: str | Path) -> set[str]:
    """Keys of ``SKIP_REASONS`` in ``registered/skips.py``, read from its syntax tree."""
    path = Path(root) / SKIPS_FILE
    if not path.is_file():
        return set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=SKIPS_FILE)
    for node in tree.body:
        target = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id == "SKIP_REASONS" and value is not None:
            try:
                return {str(k) for k in ast.literal_eval(value)}
            except ValueError:
                raise ValueError(f"{SKIPS_FILE}: SKIP_REASONS must be a literal dict") from None
    return set()


def unregistered_skips(cases: list[CaseResult], keys: set[str]) -> list[CaseResult]:
    bad = []
    for case in cases:
        if case.outcome != "skipped":
            continue
        match = REGISTERED_SKIP_RE.match(case.message.strip())
        if not match or match["key"] not in keys:
            bad.append(case)
    return bad


def cases_for(node_id: str, cases: list[CaseResult]) -> list[CaseResult]:
    base = dotted(node_id)
    return [c for c in cases if c.dotted == base or c.dotted.startswith(base + ".")]


def durations_by_node(node_ids: list[str], cases: list[CaseResult]) -> dict[str, float]:
    return {n: round(sum(c.time for c in cases_for(n, cases)), 3) for n in node_ids}
