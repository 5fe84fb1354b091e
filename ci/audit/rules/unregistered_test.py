"""unregistered-test: every test in registered/ belongs to a suite (own audit only).

``own(report)``: each test function the registry read without a ``@register(...)``.
"""
from __future__ import annotations

from ci.audit.findings import Rule

RULE = Rule(
    "unregistered-test",
    "every test in registered/ belongs to a suite",
    "a test no job runs",
    "def test_x(): ... without @register(...)",
    "error   [unregistered-test] registered/test_x.py:3: ...::test_x belongs to no suite",
)


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    for test in report.registry.collection.unregistered:
        report.add(RULE.id,
            f"{test.file}:{test.line}: {test.node_id} belongs to no suite (decorate it with @register(...))",
            suite=test.node_id)
