"""disabled-without-reason: every disabled registration says why (and, in the own audit, until when).

``own(report)``: each disabled registration of the own registry needs a reason and an ``until`` date
within the catalog's horizon (``check_until``, which skip-debt shares); it also fills the debt table.
``foreign_registrations(report, regs)``: a foreign suite's disabled registrations without a reason;
called from ``ci.audit.foreign``'s per-suite pass, which reads each suite once for three rules.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from ci.audit.findings import Rule
from ci.audit.keys import target_key
from ci.registry.catalog import CATALOG_PATH
from ci.safe_yaml import short

RULE = Rule(
    "disabled-without-reason",
    "every disabled registration says why (and, here, until when)",
    "a test switched off and forgotten",
    'register_cuda_ci(est_time=60, suite="s", disabled=True)',
    "error   [disabled-without-reason] test/registered/x.py:3: disabled=True in suite s: "
    "give the reason as a string",
)


def check_until(until: Any, today: dt.date, horizon: int) -> str | None:
    """Why an ``until`` date is not acceptable today, or None."""
    if not until:
        return "no `until` expiry date (YYYY-MM-DD)"
    try:
        expiry = dt.date.fromisoformat(str(until))
    except ValueError:
        return f"until={until!r} is not a YYYY-MM-DD date"
    if expiry < today:
        return f"expired on {until}"
    limit = today + dt.timedelta(days=horizon)
    if expiry > limit:
        return (f"until={until} is beyond the {horizon}-day horizon ({limit.isoformat()}; "
                f"{CATALOG_PATH} defaults.until_horizon_days)")
    return None


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport`` (``today``, ``horizon``)."""
    for reg in report.registry.disabled:
        info = reg.disabled or {}
        label = f"{reg.where}: {reg.node_id} disabled in {reg.schedule} {reg.suite}"
        if not str(info.get("reason", "")).strip():
            report.add(RULE.id, f"{label}: no reason", suite=f"{reg.node_id}: reason", schedule=reg.schedule)
        problem = check_until(info.get("until"), report.today, report.horizon)
        if problem:
            suffix = f" (reason: {info.get('reason', '')!r}); fix the test or renew the date" \
                if problem.startswith("expired") else ""
            report.add(RULE.id, f"{label}: {problem}{suffix}", suite=f"{reg.node_id}: until",
                       schedule=reg.schedule)
        report.debt_rows.append((reg.node_id, "disabled", info.get("reason", "") or "-", "-",
                                 info.get("until", "-"), reg.where))


def foreign_registrations(report, regs: list) -> None:
    """``regs``: one foreign suite's registrations (``ci.adapters.sglang.SuiteRegistration``)."""
    for reg in regs:
        if reg.disabled is not None:
            reason = reg.disabled if isinstance(reg.disabled, str) else ""
            if not reason.strip():
                report.add(RULE.id, f"{reg.where}: disabled={short(reg.disabled)} in suite {reg.suite}: "
                           "give the reason as a string", **target_key(reg.job_id))
