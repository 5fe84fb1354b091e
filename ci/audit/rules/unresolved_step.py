"""unresolved-step: every runner call's target can be read from the workflow (foreign audit only).

``foreign(report)``: each step the workflow scan could not resolve, a warning keyed by what is known of it.
"""
from __future__ import annotations

from ci.audit.findings import Location, Rule

RULE = Rule(
    "unresolved-step",
    "every runner call's target can be read from the workflow",
    "a step the audit cannot read hides whether a suite runs",
    "python3 run_suite.py --hw npu --suite ${{ needs.plan.outputs.suite }}",
    "warning [unresolved-step] ...: run_suite.py --suite known only at run time",
    "warning",
)


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    for step in report.scan.unresolved:
        known = dict(step.known)
        report.add(RULE.id, f"{step.where}: {step.problem}", hardware=known.get("--hw", ""),
                   schedule="nightly" if "--nightly" in known else "", suite=step.problem,
                   locations=(Location(step.where.split(":")[0], step.line),),
                   why_unproven="the step's suite is computed at run time; the suites it could run are warnings")
