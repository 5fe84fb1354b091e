"""op-without-reference: every impl op has a pure-torch reference and a per-commit test (own audit only).

``own(report)``: each op ``impl`` exports (``ci.audit.ops``, read from syntax trees) against the names
``reference/`` exports and the names per-commit registered test files (or the op table they use) mention.
"""
from __future__ import annotations

from ci.audit.findings import Rule
from ci.audit.ops import OP_TABLE_PATHS, impl_ops, reference_names
from ci.registry.collect import names_mentioned
from ci.safe_files import MAX_SOURCE_BYTES, read_inside
from ci.safe_python import parse_source

RULE = Rule(
    "op-without-reference",
    "every impl op has a pure-torch reference and a per-commit test",
    "a kernel with no oracle, or tested only nightly",
    "impl exports foo, reference/ does not",
    "error   [op-without-reference] op foo: reference/__init__.py exports no 'foo'",
)


OP_TABLE_NAMES = {"op_table", "registered.op_table", "impl.testing.op_table"}


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    root = report.registry.root
    ops = impl_ops(root)
    refs = reference_names(root)
    collection = report.registry.collection
    per_commit_files = {r.file for r in collection.registrations
                        if r.schedule == "per-commit" and r.disabled is None}
    mentioned: set[str] = set()
    for rel in per_commit_files:
        mentioned |= collection.mentions.get(rel, frozenset())
    op_table_used = any(OP_TABLE_NAMES & collection.mentions.get(rel, frozenset()) for rel in per_commit_files)
    tables = [p for p in OP_TABLE_PATHS if (root / p).is_file()]
    if op_table_used:
        for table in tables:
            mentioned |= names_mentioned(parse_source(read_inside(root, root / table, MAX_SOURCE_BYTES), table))
    shown = " or ".join(OP_TABLE_PATHS)
    for op in ops:
        if op not in refs:
            report.add(RULE.id, f"op {op}: reference/__init__.py exports no {op!r}", suite=f"{op}: reference")
        if op not in mentioned:
            report.add(RULE.id,
                f"op {op}: no per-commit registered test file (nor the op table, {shown}, used by one) mentions it",
                suite=f"{op}: per-commit test")
