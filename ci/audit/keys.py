"""A finding's baseline key and location, shared by the rules of both audits.

A key names what a finding is about (a job's hardware, suite and schedule; the target a step runs),
never a line, job or step name, so renames elsewhere keep a baseline (docs/audit-baseline.md).
Imports ``ci.audit.findings`` and ``ci.registry`` / ``ci.github`` types only: every rule module
(``ci/audit/rules/``) may import it, and it imports no rule, no audit and no report.
"""
from __future__ import annotations

from typing import Any

from ci.audit.findings import Location
from ci.github.scan import WorkflowScan
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


def masked_key(masked: str, scan: WorkflowScan) -> dict[str, str]:
    """The key of a masked step: the target(s) it runs (one suite: its schedule, hardware and suite), so
    renaming the workflow file, the job or the step keeps it; "" when the step's target is unknown."""
    where = masked.split(": ", 1)[0]
    refs = [r for r in scan.refs if r.where == where]
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


def step_location(text: str, scan: WorkflowScan) -> tuple[Location, ...]:
    """The workflow job a ``workflow:job:step: ...`` text names, at the job's line."""
    workflow, _, rest = text.partition(":")
    job = rest.partition(":")[0]
    return (Location(workflow, scan.job_lines.get((workflow, job), 0)),)
