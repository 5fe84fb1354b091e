"""unknown-suite: every suite, job, group or shard a workflow step names is registered and planned.

``own(report)``: the workflow scan's broken workflows, and each --job / --group / --shard a step runs,
against the own registry's plan. ``foreign(report)``: the scan's problems (less the unresolved steps,
reported by unresolved-step), and each suite a step runs that nothing registers, with a hint.
"""
from __future__ import annotations

import difflib

from ci.audit.findings import Location, Rule
from ci.audit.keys import problem_key, target_key
from ci.registry.jobs import parse_job_id

RULE = Rule(
    "unknown-suite",
    "every suite, job, group or shard a workflow step names is registered and planned",
    "a workflow that runs a renamed suite: the runner finds nothing and the step passes",
    "run_suite.py --hw cuda --suite nightly-8-gpu-h20 --nightly where nothing registers it",
    "error   [unknown-suite] UNKNOWN ...: runs --hw cuda --suite nightly-8-gpu-h20 --nightly, "
    "which nothing registers",
)


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    plan = report.plan
    for problem in report.scan.problems:
        report.add(RULE.id, problem, **problem_key(problem, report.scan))
    for ref in report.scan.refs:
        place = f"{ref.workflow}:{ref.wf_job}"
        if ref.kind == "job":
            try:
                parse_job_id(ref.target)
            except ValueError as exc:
                report.add(RULE.id, f"{place}: {exc}", suite=ref.target)
                continue
            if ref.target not in report.registry.jobs:
                report.add(RULE.id,
                    f"{place}: --job {ref.target} is not a registered job "
                    "(renamed or removed suite? regenerate with nox -s workflows)", suite=ref.target)
        elif ref.kind == "group":
            if ref.target not in plan:
                report.add(RULE.id,
                    f"{place}: --group {ref.target} is not a registered group; groups: {sorted(plan)}",
                    suite=ref.target)
            elif ref.shard is not None and ref.shard[1] != plan[ref.target][0]:
                report.add(RULE.id,
                    f"{place}: --group {ref.target} --shard {ref.shard[0]}/{ref.shard[1]}, but the plan splits "
                    f"{ref.target} into {plan[ref.target][0]} shard(s) (regenerate with nox -s workflows)",
                    suite=f"{ref.target} --shard {ref.shard[0]}/{ref.shard[1]}")


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    scan = report.scan
    for problem in scan.problems:
        if not any(problem == f"{u.where}: {u.problem}" for u in scan.unresolved):
            report.add(RULE.id, problem, **problem_key(problem, scan))
    jobs = report.jobs
    for ref in report.refs:
        if ref.target in jobs:
            continue
        schedule, hw, suite = ref.target.split("/", 2)
        others = [j for j in jobs if j.split("/", 2)[2] == suite]
        hint = f"; registered as {others}" if others else ""
        if not others:
            close = difflib.get_close_matches(ref.target, list(jobs), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
        if any(j.startswith("nightly/") for j in others) and schedule == "per-commit":
            hint += " (add --nightly: run_suite.py only picks nightly=True registrations with it)"
        report.add(RULE.id, f"UNKNOWN {ref.where}: runs --hw {hw} --suite {suite}"
                   f"{' --nightly' if schedule == 'nightly' else ''}, which nothing registers{hint}",
                   locations=(Location(ref.workflow, ref.line),), **target_key(ref.target))
