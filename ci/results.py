"""Registered skip reasons: the keys a ``[registered:<key>]`` skip message may name.

Read from ``registered/skips.py``'s syntax tree (that module imports torch; this one does not).
The pytest plugin fails a job on any skip whose message does not start with a known key.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

SKIPS_FILE = "registered/skips.py"
REGISTERED_SKIP_RE = re.compile(r"^\[registered:(?P<key>[A-Za-z0-9_.-]+)\]")


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
