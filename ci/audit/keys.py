"""A finding's baseline key and location, shared by the rules of both audits.

A key names what a finding is about (a job's hardware, suite and schedule; the target a step runs),
never a line, job or step name, so renames elsewhere keep a baseline (docs/audit-baseline.md).
Imports ``ci.audit.findings`` and ``ci.registry`` / ``ci.github`` types only: every rule module
(``ci/audit/rules/``) may import it, and it imports no rule, no audit and no report.
"""
from __future__ import annotations

from typing import Any

from ci.audit.findings import Location
from ci.github.scan import StepRun, WorkflowScan
from ci.registry.jobs import Job


def job_key(job: Job) -> dict[str, str]:
    """The baseline key of a finding about one job: hardware, suite (with its variant), schedule."""
    suite = job.key.suite + (f"@{job.key.variant}" if job.key.variant else "")
    return {"hardware": job.key.hardware, "suite": suite, "schedule": job.key.schedule}


def target_key(job_id: str) -> dict[str, str]:
    """The key of a foreign suite ``schedule/hardware/suite``."""
    schedule, hardware, suite = job_id.split("/", 2)
    return {"schedule": schedule, "hardware": hardware, "suite": suite}


def group_id(job: Job) -> str:
    return f"{job.key.schedule}/{job.key.hardware}"


def masked_steps(scan: WorkflowScan) -> dict[str, list[StepRun]]:
    """Each masked-step text of ``scan.masked`` -> the runner calls of the step it is about, matched by the
    step's identity as data (``StepRun.where``: workflow, job, step) and the mask the scan recorded on it,
    never by reading the text back (a step name may hold ``": "``). A text no call matches is a step whose
    target the scan could not tell (an unresolved step)."""
    steps: dict[str, list[StepRun]] = {}
    for ref in scan.refs:
        for mask in ref.masks:
            steps.setdefault(f"{ref.where}: {mask}", []).append(ref)
    return steps


def masked_key(refs: list[StepRun]) -> dict[str, str]:
    """The key of a masked step, from its runner calls ``refs`` (``masked_steps``): the target(s) it runs (one
    suite: its schedule, hardware and suite), so renaming the workflow file, the job or the step keeps it;
    "" only when the step's target is unknown (no call)."""
    targets = sorted({r.target for r in refs})
    if len(targets) == 1 and refs[0].kind == "suite" and targets[0].count("/") >= 2:
        return target_key(targets[0])
    return {"suite": ",".join(targets)}


def problem_key(problem: str, scan: WorkflowScan) -> dict[str, Any]:
    """A workflow-level problem: a broken workflow is keyed and located by its file and line."""
    broken = scan.broken.get(problem)
    if broken is None:
        return {}
    return {"suite": broken[0], "locations": (Location(*broken),)}


def step_location(text: str, scan: WorkflowScan, refs: list[StepRun] = ()) -> tuple[Location, ...]:
    """The workflow job of a masked step, at the job's line: from its runner calls ``refs`` when it has any,
    else from the ``workflow:job:step: ...`` text (a step whose target is unknown)."""
    if refs:
        return (Location(refs[0].workflow, scan.job_lines.get((refs[0].workflow, refs[0].wf_job), 0)),)
    workflow, _, rest = text.partition(":")
    job = rest.partition(":")[0]
    return (Location(workflow, scan.job_lines.get((workflow, job), 0)),)
