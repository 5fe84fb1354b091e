"""collection-parity: pytest collects exactly the tests the registry knows, both directions (own audit only).

``own(report)``: pytest's node ids (``report.collected``, given with ``--pytest-collection``) against
the registrations (``ci.audit.parity.compare``); without them the rule is listed as not checked here.
"""
from __future__ import annotations

from ci.audit.findings import Rule
from ci.audit.parity import compare

RULE = Rule(
    "collection-parity",
    "pytest collects exactly the tests the registry knows (both directions)",
    "a test the registry counts that pytest never collects, or the reverse",
    "a test module that fails to import under pytest",
    "error   [collection-parity] ...: registered but not collected by pytest",
)


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport`` (``collected``; fills ``skipped_rules`` when it is None)."""
    if report.collected is None:
        report.skipped_rules[RULE.id] = ("not checked here (python -m ci.audit --pytest-collection; "
                                         "the per-commit ci job runs it)")
        return
    registered = {}
    for reg in report.registry.collection.registrations:
        registered.setdefault(reg.node_id, reg.where)
    report.extend(RULE.id, compare(report.collected, registered, report.registry.root))
