"""skip-debt: every skip reason that can skip unconditionally has an owner and an unexpired ``until`` (own audit only).

``own(report)``: the skip table's own problems (registered/skips.py, read by ``ci.registry.skip_reasons``)
and each unconditional reason's owner and date (``check_until``, shared with disabled-without-reason).
"""
from __future__ import annotations

from ci.audit.findings import Rule
from ci.audit.rules.disabled_without_reason import check_until

RULE = Rule(
    "skip-debt",
    "every skip reason that can skip unconditionally has an owner and an unexpired `until`",
    "a skip that outlives its reason",
    "SkipReason('x', skips_when='always') with no owner",
    "error   [skip-debt] registered/skips.py:12: skip reason 'x' can skip on any machine: no `owner`",
)


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport`` (``skip_table``, ``today``, ``horizon``)."""
    table = report.skip_table
    report.extend(RULE.id, table.problems)
    for reason in table.reasons.values():
        if not reason.unconditional:
            continue
        label = f"registered/skips.py:{reason.line}: skip reason {reason.key!r} can skip on any machine"
        if not str(reason.owner or "").strip():
            report.add(RULE.id, f"{label}: no `owner`", suite=f"{reason.key}: owner")
        problem = check_until(reason.until, report.today, report.horizon)
        if problem:
            report.add(RULE.id, f"{label}: {problem}", suite=f"{reason.key}: until")
