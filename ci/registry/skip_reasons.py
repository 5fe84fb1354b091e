"""Registered skip reasons, the one reader of ``registered/skips.py`` (its syntax tree: that module
imports torch, this one does not).

``registered/skips.py`` holds ``SKIP_REASONS = {key: {...}}``; each entry has ``text`` and
``skips_when``, a hardware condition the audit can evaluate against the catalog (``"gpus<1"``,
``"gpus<N"``, ``"vendor!=amd"``, ``"always"``). The pytest plugin fails a job on any skip whose
message does not start with a known key; the audit (``ci.audit.skips``) checks where tests use them.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ci.safe_files import MAX_SOURCE_BYTES, read_inside
from ci.safe_python import parse_source

REGISTERED_SKIP_RE = re.compile(r"^\[registered:(?P<key>[A-Za-z0-9_.-]+)\]")
SKIPS_FILE = "registered/skips.py"
CONDITION_RE = re.compile(r"^(?:always|gpus<(?:\d+|N)|vendor!=(?:cpu|nvidia|amd))$")
REASON_KEYS = ("text", "skips_when", "owner", "until")


@dataclass(frozen=True)
class SkipReason:
    key: str
    text: str
    skips_when: str          # "always", "gpus<1", "gpus<N", "vendor!=amd"
    owner: str | None
    until: str | None
    line: int

    @property
    def unconditional(self) -> bool:
        return self.skips_when == "always"


@dataclass
class SkipTable:
    reasons: dict[str, SkipReason] = field(default_factory=dict)
    helpers: dict[str, str] = field(default_factory=dict)      # helper function -> key
    problems: list[str] = field(default_factory=list)


def literal_assign(tree: ast.Module, name: str) -> tuple[Any, int] | None:
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return node.value, node.lineno
    return None


def keys_in(node: ast.AST, known: Iterable[str]) -> list[str]:
    known = set(known)
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value in known]


def load_skip_table(root: str | Path) -> SkipTable:
    table = SkipTable()
    path = Path(root) / SKIPS_FILE
    if not path.is_file():
        return table
    tree = parse_source(read_inside(root, path, MAX_SOURCE_BYTES), SKIPS_FILE)   # UnreadableFile: exit 2, named
    found = literal_assign(tree, "SKIP_REASONS")
    if found is None:
        table.problems.append(f"{SKIPS_FILE}:1: no SKIP_REASONS = {{...}} literal")
        return table
    node, line = found
    if not isinstance(node, ast.Dict):
        table.problems.append(f"{SKIPS_FILE}:{line}: SKIP_REASONS must be a literal dict")
        return table
    for key_node, value_node in zip(node.keys, node.values):
        try:
            key, value = ast.literal_eval(key_node), ast.literal_eval(value_node)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):   # {[]: 1}: TypeError
            table.problems.append(f"{SKIPS_FILE}:{value_node.lineno}: SKIP_REASONS entries must be literals")
            continue
        where = f"{SKIPS_FILE}:{key_node.lineno}"
        if isinstance(value, str):   # a bare text declares no condition: it may skip anywhere
            value = {"text": value, "skips_when": "always"}
        if not isinstance(value, dict) or not isinstance(value.get("text"), str):
            table.problems.append(f"{where}: skip reason {key!r} must be a dict with a 'text' string")
            continue
        unknown = set(value) - set(REASON_KEYS)
        if unknown:
            table.problems.append(f"{where}: skip reason {key!r}: unknown key(s) {sorted(unknown)}; "
                                  f"expected {list(REASON_KEYS)}")
        when = str(value.get("skips_when", "always"))
        if not CONDITION_RE.match(when):
            table.problems.append(f"{where}: skip reason {key!r}: skips_when={when!r}; expected 'always', "
                                  "'gpus<K', 'gpus<N' or 'vendor!=cpu|nvidia|amd'")
            when = "always"
        table.reasons[str(key)] = SkipReason(str(key), value["text"], when, value.get("owner"),
                                             value.get("until"), key_node.lineno)
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name not in ("skip_message", "registered_skip"):
            keys = sorted(set(keys_in(fn, table.reasons)))
            if len(keys) == 1:
                table.helpers[fn.name] = keys[0]
    return table


def registered_skip_keys(root: str | Path) -> set[str]:
    """Keys of ``SKIP_REASONS`` in ``registered/skips.py`` (the runner accepts a skip naming one)."""
    return set(load_skip_table(root).reasons)


def is_registered_skip(message: str, keys: set[str]) -> bool:
    match = REGISTERED_SKIP_RE.match(message.strip())
    return bool(match) and match["key"] in keys


def unregistered_skip_remedy(message: str) -> str:
    """What to do about a skip that is not registered: a ``[registered:<key>]`` message whose key
    SKIP_REASONS lacks needs the key added; any other skip has to go through registered/skips.py."""
    match = REGISTERED_SKIP_RE.match(message.strip())
    if match:
        return (f"skip key {match['key']!r} is not in SKIP_REASONS: add it to {SKIPS_FILE} "
                "(text and skips_when), or use an existing key")
    return f"skip only via {SKIPS_FILE}: registered_skip(key) / requires_gpu()"
