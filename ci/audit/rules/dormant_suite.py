"""dormant-suite: every registered suite is run, unmasked, by a triggered workflow step, every partition.

``own(report)``: the project's own jobs and groups against the workflow scan's runner calls.
``foreign_job(...)``: another repository's suite. The foreign audit reads each suite once for three
rules and its job table (dormant-suite, disabled-without-reason, empty-suite; ``ci.audit.foreign``'s
per-suite pass): that pass decides what runs the suite and calls this function when nothing is proven to.
"""
from __future__ import annotations

from ci.audit.findings import Location, Rule
from ci.audit.keys import group_id, job_key, target_key
from ci.github.scan import StepRun, describe_steps, events_needed

RULE = Rule(
    "dormant-suite",
    "every registered suite (job) is run, unmasked, by a triggered workflow step, every partition",
    "a suite registered with no job: its tests never run and nothing turns red (sglang #30964, the DSpark suite)",
    'register_amd_ci(est_time=60, suite="nightly-x", nightly=True) and no workflow step runs --suite nightly-x',
    "error   [dormant-suite] DORMANT nightly/amd/nightly-x: ... no workflow step runs it",
)


OWN_UNDECIDED = "its if: is not definitely true on any of them"  # a step that mentions a job, but may never run it
FOREIGN_UNDECIDED = "its if: is not definitely true on any trigger"


def _complete(shards: set[tuple[int, int]], count: int | None) -> tuple[bool, list[int], int | None]:
    """Whether shards cover 1..count (count None: any single complete count); the indices run."""
    counts = {n for _, n in shards}
    if count is None:
        for n in sorted(counts):
            if {i for i, m in shards if m == n} >= set(range(1, n + 1)):
                return True, list(range(1, n + 1)), n
        n = max(counts) if counts else None
        return False, sorted({i for i, m in shards if m == n}), n
    have = {i for i, n in shards if n == count}
    return have >= set(range(1, count + 1)), sorted(have), count


def own(report) -> None:
    """Each job of the own registry: run whole by a triggered, unmasked step (as --job or --group), else
    PARTIAL (some shards) or DORMANT. ``report``: ``ci.audit.own.AuditReport``."""
    refs, plan = report.scan.refs, report.plan
    partial_groups: set[str] = set()
    for job in report.registry.jobs.values():
        gid = group_id(job)
        need = events_needed(job.key.schedule)
        job_refs = [r for r in refs if r.kind == "job" and r.target == job.id]
        group_refs = [r for r in refs if r.kind == "group" and r.target == gid]
        files = sorted({t.node_id.split("::")[0] for t in job.tests})
        live_job = [r for r in job_refs if not r.masks and r.events_for(files) & need]
        live_group = [r for r in group_refs if not r.masks and r.events_for(files) & need]
        key = job_key(job)
        if any(r.shard is None for r in live_job + live_group):
            report.run_suites.add((key["hardware"], key["suite"], key["schedule"]))
            continue
        job_ok, job_have, job_n = _complete({r.shard for r in live_job}, getattr(job, "shards", None))
        group_ok, group_have, group_n = _complete({r.shard for r in live_group}, plan.get(gid, (1,))[0])
        if job_ok or group_ok:
            report.run_suites.add((key["hardware"], key["suite"], key["schedule"]))
            continue
        if live_group:
            if gid not in partial_groups:
                partial_groups.add(gid)
                missing = sorted(set(range(1, group_n + 1)) - set(group_have))
                places = sorted({f"{r.workflow}:{r.wf_job}" for r in live_group})
                report.add(RULE.id,
                           f"PARTIAL group {gid}: {', '.join(places)} run(s) shards {group_have} of {group_n}: "
                           f"shard(s) {missing} never run ({len(plan.get(gid, (0, []))[1])} job(s) affected)",
                           hardware=job.key.hardware, schedule=job.key.schedule, suite=f"group shards {missing}",
                           state="partial")
            continue
        if live_job:
            missing = sorted(set(range(1, (job_n or 1) + 1)) - set(job_have))
            places = sorted({f"{r.workflow}:{r.wf_job}" for r in live_job})
            verb = "runs" if len(places) == 1 else "run"
            report.add(RULE.id, f"PARTIAL {job.id}: {', '.join(places)} {verb} shards {job_have} of {job_n}: "
                       f"shard(s) {missing} never run", state="partial", **key)
            continue
        where = job.tests[0].where
        need_text = "a schedule" if job.key.schedule == "nightly" else "pull_request/push"
        seen = job_refs + group_refs
        detail = (f"only referenced by {describe_steps(seen, files, undecided=OWN_UNDECIDED)}" if seen else
                  f"no workflow job runs it (as --job {job.id} or --group {gid})")
        report.add(RULE.id, f"DORMANT {job.id} ({len(job.tests)} registration(s), first at {where}): "
                   f"needs a workflow triggered by {need_text}; {detail}", state="dormant", **key)


def _could_run(report, job_id: str) -> list[str]:
    """Unresolved steps that could run this suite (their known --hw / --nightly do not rule it out)."""
    schedule, hw, _suite = job_id.split("/", 2)
    out = []
    for step in report.scan.unresolved:
        known = dict(step.known)
        if known.get("--hw", hw) != hw:
            continue
        if ("--nightly" in known) != (schedule == "nightly") and "--suite" not in known:
            continue
        out.append(f"{step.where} ({step.problem})")
    return out


def foreign_job(report, job_id: str, enabled: list, mine: list[StepRun], live: list[StepRun],
                maybe: list[StepRun], manual: list[StepRun], parts: str, files: list[str], expected: str | None,
                location: tuple[Location, ...]) -> None:
    """The finding of a foreign suite no triggered step is proven to run: an error when nothing could run
    it, a warning (with why) when a run-time value, a dispatch or an unresolved step could.
    ``report``: ``ci.audit.foreign.ForeignReport``; ``enabled``: the suite's enabled registrations."""
    schedule = job_id.split("/")[0]
    where = location + tuple(Location(r.workflow, r.line) for r in (live or maybe or mine)[:1])
    if live and not any(r.shard_unknown for r in live):
        places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in live}))
        report.add(RULE.id, f"PARTIAL {job_id}: {places} {parts}", locations=where, state="partial",
                   **target_key(job_id))
        return
    need = "a schedule" if schedule == "nightly" else "pull_request/push"
    hint = f" (runner {expected})" if expected else ""
    head = f"DORMANT {job_id}{hint}: {len(enabled)} registered file(s), first at {enabled[0].where}; "
    why: list[str] = []
    if maybe or live:
        for r in maybe + live:
            why += list(r.why_maybe) + ([r.shard_unknown] if r.shard_unknown else []) + [
                f"its exit may be masked ({m})" for m in r.masks]
        places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in maybe + live}))
        report.add(RULE.id, f"UNPROVEN {job_id}{hint}: may run in {places}", severity="warning",
                   locations=where, why_unproven="; ".join(dict.fromkeys(why)) or "a run-time value",
                   state="unproven", **target_key(job_id))
        return
    if manual:
        places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in manual}))
        report.add(RULE.id, head + f"runs only by workflow_dispatch ({places})", severity="warning",
                   locations=where, why_unproven="runs only when someone dispatches it by hand",
                   state="manual-only", **target_key(job_id))
        return
    could = _could_run(report, job_id)
    if could:
        report.add(RULE.id, head + f"needs a workflow triggered by {need}; no step is proven to run it",
                   severity="warning", locations=where,
                   why_unproven=f"unresolved step(s) could run it: {'; '.join(could[:3])}", state="unproven",
                   **target_key(job_id))
        return
    detail = (f"only referenced by {describe_steps(mine, files, undecided=FOREIGN_UNDECIDED)}" if mine
              else "no workflow step runs it")
    report.add(RULE.id, head + f"needs a workflow triggered by {need}; {detail}", locations=where,
               state="dormant", **target_key(job_id))
