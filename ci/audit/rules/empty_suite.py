"""empty-suite: no workflow runs a suite whose registrations are all disabled (foreign audit only).

``foreign_job(...)``: called from ``ci.audit.foreign``'s per-suite pass (which reads each suite once
for dormant-suite, disabled-without-reason and this rule) with the steps that run the suite.
"""
from __future__ import annotations

from ci.audit.findings import Location, Rule
from ci.audit.keys import target_key
from ci.github.scan import StepRun

RULE = Rule(
    "empty-suite",
    "no workflow runs a suite whose registrations are all disabled",
    "a step that runs nothing and passes",
    "every file of suite s carries disabled='flaky' and a workflow runs --suite s",
    "error   [empty-suite] EMPTY per-commit/cuda/s: ... runs it, but all 2 registration(s) are disabled",
)


def foreign_job(report, job_id: str, regs: list, mine: list[StepRun], location: tuple[Location, ...]) -> None:
    """``regs``: the suite's registrations; ``mine``: the steps that run it."""
    if mine and all(r.disabled is not None for r in regs):
        report.add(RULE.id,
                   f"EMPTY {job_id}: {', '.join(sorted({r.where for r in mine}))} runs it, but all {len(regs)} "
                   "registration(s) are disabled: the runner finds nothing and the step passes",
                   locations=location + tuple(Location(r.workflow, r.line) for r in mine[:1]), **target_key(job_id))
