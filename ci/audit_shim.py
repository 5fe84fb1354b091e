"""TEMPORARY SHIM (s6-audit-adopt): turns today's letter-rule violations into ``Finding``s.

Stands in for the s6-audit-core branch (``ci/audit_rules.py``, ``report.findings``,
``format_text``, ``check_target``) until it is merged; delete this file then.
"""
from __future__ import annotations

import re
from pathlib import Path

from ci.findings import RULES, Finding, Location, Rule

_FOREIGN = {"a": "dormant-suite", "b": "unknown-suite", "c": "disabled-without-reason", "d": "empty-suite",
            "e": "masked-step", "f": "unreadable-registration", "g": "wrong-runner"}
_OWN = {"a": "dormant-suite", "b": "unknown-suite", "c": "gate-uncovered", "d": "unregistered-test",
        "e": "op-untested", "f": "disabled-without-reason", "g": "masked-step", "h": "skip-without-expiry",
        "i": "impossible-test", "j": "collection-mismatch"}
_JOB = re.compile(r"^(?:DORMANT|PARTIAL|EMPTY) ((?:per-commit|nightly)/[^/\s]+/[^\s:]+)")
_RUNS = re.compile(r"runs (?:--hw (\S+) --suite (\S+)( --nightly)?|((?:per-commit|nightly)/\S+?)(?:,|$))")
_WHERE = re.compile(r"((?:\.github|test|registered|python|ci|impl)/[\w./-]+?)(?::(\d+))?(?=[:;,)\s]|$)")


def _register_rules() -> None:
    for rid in sorted(set(_FOREIGN.values()) | set(_OWN.values())):
        if rid not in RULES.rules:
            RULES.register(Rule(rid, f"(shim) {rid}", f"(shim) the incident {rid} prevents",
                                "(shim) example", "(shim) output"))


def _finding(rule: str, message: str, root: Path) -> Finding:
    schedule = hardware = suite = ""
    m = _JOB.match(message)
    if m:
        schedule, hardware, suite = m.group(1).split("/", 2)
    else:
        r = _RUNS.search(message)
        if r and r.group(4):
            schedule, hardware, suite = r.group(4).split("/", 2)
        elif r:
            hardware, suite, schedule = r.group(1), r.group(2), "nightly" if r.group(3) else "per-commit"
    locs = []
    for w in _WHERE.finditer(message):
        if (root / w.group(1)).is_file():
            locs.append(Location(w.group(1), int(w.group(2) or 0)))
    if not suite:                 # not about one suite: keep findings apart by where they are
        suite = locs[0].path if locs else message[:80]
    return Finding(rule, "error", message, hardware, suite, schedule, tuple(locs[:1]))


def collect(root: str, adapter: str, repository: str | None, today):
    """(report, findings) from today's audits."""
    _register_rules()
    if adapter == "dspark":
        from ci.audit import run_audit

        report = run_audit(root, today=today)
        names = _OWN
    else:
        from ci.audit_foreign import run_foreign_audit

        report = run_foreign_audit(root, adapter, repository=repository)
        names = _FOREIGN
    findings = [_finding(names[code], msg, Path(root))
                for code, found in report.violations.items() for msg in found]
    return report, findings


def format_text(report, findings) -> str:
    return "\n".join(f"[{f.rule}] {f.severity}: {f.message}" for f in findings)


def check_target(root: str, adapter: str) -> str | None:
    if not Path(root).is_dir():
        return f"--root {root}: not a directory"
    return None
