"""The audit for another repository, through an adapter (``dspark-audit --adapter sglang``).

Rules (ci/audit/rules.py; the same ids as the project's own audit): dormant-suite,
unknown-suite, unresolved-step, disabled-without-reason, empty-suite, masked-step,
unreadable-registration, runner-mismatch, suite-name-typo. Severities: error = proven (no
triggered path can run the suite); warning = hangs on a run-time value (a job if: on change
detection, a computed matrix, an unresolved step) or runs only by workflow_dispatch, with
``why_unproven``; note = odd but harmless. Gate rules apply only where the adapter declares gates.
``github.repository`` comes from ``--repo OWNER/NAME``, else the tree's git remote, else unknown.
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import configparser
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.adapters import Adapter, get_adapter
from ci.adapters.sglang import SuiteCollection, SuiteRegistration, expected_runner, runner_mismatch
from ci.audit.report import FindingCollector, format_findings
from ci.audit.rules import FOREIGN_RULES
from ci.audit.findings import RULES as RULE_REGISTRY
from ci.audit.findings import Finding, Location
from ci.safe_files import UnreadableFile, read_inside
from ci.safe_yaml import short
from ci.table import format_table
from ci.github.scan import (MANUAL_TRIGGERS, StepRun, WorkflowScan, describe_steps, events_needed,
                              scan_workflows)

RULES = {rule_id: RULE_REGISTRY[rule_id].title for rule_id in FOREIGN_RULES}
UNDECIDED = "its if: is not definitely true on any trigger"
# another repository may require approval of every fork run in its settings, which its files cannot show
FORK_SETTINGS = ("unless the repository's settings require approval of every workflow run from outside "
                 "collaborators (Settings > Actions > fork pull request workflows), which its files cannot show")


@dataclass
class ForeignReport(FindingCollector):
    adapter: str = ""
    root: Path = None
    suites: SuiteCollection = None
    scan: WorkflowScan = None
    job_rows: list[tuple] = field(default_factory=list)
    disabled_rows: list[tuple] = field(default_factory=list)
    repository: str | None = None


def _by_job(regs: list[SuiteRegistration]) -> dict[str, list[SuiteRegistration]]:
    jobs: dict[str, list[SuiteRegistration]] = {}
    for reg in regs:
        jobs.setdefault(reg.job_id, []).append(reg)
    return dict(sorted(jobs.items(), key=lambda kv: (kv[0].split("/")[0] != "per-commit", kv[0])))


def _partitions_text(shards: set[tuple[int, int]]) -> tuple[bool, str]:
    if not shards:
        return False, "no partition"
    for n in sorted({n for _, n in shards}):
        if {i for i, m in shards if m == n} >= set(range(1, n + 1)):
            return True, f"{n}"
    n = max(m for _, m in shards)
    have = sorted(i - 1 for i, m in shards if m == n)
    missing = sorted(set(range(n)) - set(have))
    return False, f"runs --auto-partition-id {have} of --auto-partition-size {n}: partition(s) {missing} never run"


def repository_of(root: Path) -> str | None:
    """OWNER/NAME from the tree's git remote ``origin`` (None when it has none or it is not GitHub's)."""
    config = root / ".git" / "config"
    if not config.is_file():
        return None
    parser = configparser.ConfigParser(strict=False)
    try:
        parser.read_string(read_inside(root, config, 256 * 1024))   # a link to /dev/zero is not read
    except (configparser.Error, UnreadableFile):
        return None
    url = parser.get('remote "origin"', "url", fallback="")
    match = re.search(r"github\.com[:/]([\w.-]+/[\w.-]+?)(?:\.git)?/?$", url)
    return match.group(1) if match else None


def check_target(root: str | Path, adapter: Adapter | str = "sglang") -> str | None:
    """Why ``root`` is not a tree the adapter can audit (one line), or None. A wrong --root is a usage
    error (exit 2), never "0 test file(s) ... audit: OK"."""
    name = adapter if isinstance(adapter, str) else adapter.name
    root = Path(root)
    if not root.is_dir():
        return f"--root {root}: not a directory"
    registered = REGISTERED_DIRS.get(name, "registered")
    if not (root / registered).is_dir():
        other = [n for n, d in REGISTERED_DIRS.items() if n != name and (root / d).is_dir()]
        hint = f"this looks like an {other[0]} tree: add --adapter {other[0]}" if other else \
            f"is it a checkout? --adapter picks the layout: {sorted(REGISTERED_DIRS)}"
        return f"--root {root}: no {registered}/ ({hint})"
    workflows = root / ".github" / "workflows"
    if not workflows.is_dir() or not any(workflows.glob("*.y*ml")):
        return f"--root {root}: no .github/workflows/*.yml: nothing could run a suite, so nothing can be proven"
    return None


REGISTERED_DIRS = {"sglang": "test/registered", "dspark": "registered"}


def run_foreign_audit(root: str | Path, adapter: Adapter | str = "sglang", *,
                      repository: str | None = None) -> ForeignReport:
    adapter = get_adapter(adapter) if isinstance(adapter, str) else adapter
    root = Path(root).resolve()
    if not root.is_dir():
        raise ValueError(f"--root {root}: not a directory")
    repository = repository or repository_of(root)
    if repository:
        adapter.context = {**adapter.context, "github.repository": repository}
    suites = adapter.collect(root)
    scan = scan_workflows(root, adapter)
    report = ForeignReport(adapter=adapter.name, root=root, suites=suites, scan=scan, repository=repository)
    jobs = _by_job(suites.registrations)
    refs = [r for r in scan.refs if r.kind == "suite"]
    for problem in suites.problems:   # "file:line: ...": keyed by the registered file
        report.add("unreadable-registration", problem, suite=problem.split(":", 1)[0])
    report.add_input_findings(scan.input_findings, {"fork-on-self-hosted": FORK_SETTINGS})
    for masked in scan.masked:
        key = masked_key(masked, scan)   # the baseline key: what the step runs, never its job or step name
        if masked in scan.masked_unproven:
            report.add("masked-step", f"MASKED {masked}", severity="warning", locations=_step_location(masked, scan),
                       why_unproven="the condition is known only at run time", **key)
        else:
            report.add("masked-step", f"MASKED {masked}", locations=_step_location(masked, scan), **key)
    for step in scan.unresolved:
        known = dict(step.known)
        report.add("unresolved-step", f"{step.where}: {step.problem}", hardware=known.get("--hw", ""),
                   schedule="nightly" if "--nightly" in known else "", suite=step.problem,
                   locations=(Location(step.where.split(":")[0], step.line),),
                   why_unproven="the step's suite is computed at run time; the suites it could run are warnings")
    problems = [p for p in scan.problems if not any(p == f"{u.where}: {u.problem}" for u in scan.unresolved)]
    for problem in problems:
        report.add("unknown-suite", problem, **problem_key(problem, scan))
    direct: dict[str, list[StepRun]] = {}
    for ref in scan.refs:
        if ref.kind == "file":
            direct.setdefault(ref.target, []).append(ref)
    for job_id, regs in jobs.items():
        _audit_job(report, job_id, regs, [r for r in refs if r.target == job_id], direct)
    _check_runners(report, refs)
    _check_unknown_suites(report, refs, jobs)
    _check_typos(report, jobs)
    return report


def masked_key(masked: str, scan: WorkflowScan) -> dict[str, str]:
    """The key of a masked step: the target(s) it runs (one suite: its schedule, hardware and suite), so
    renaming the workflow file, the job or the step keeps it; "" when the step's target is unknown."""
    where = masked.split(": ", 1)[0]
    refs = [r for r in scan.refs if r.where == where]
    targets = sorted({r.target for r in refs})
    if len(targets) == 1 and refs[0].kind == "suite" and targets[0].count("/") >= 2:
        return _key(targets[0])
    return {"suite": ",".join(targets)}


def problem_key(problem: str, scan: WorkflowScan) -> dict[str, Any]:
    """A workflow-level problem: a broken workflow is keyed and located by its file and line."""
    broken = scan.broken.get(problem)
    if broken is None:
        return {}
    return {"suite": broken[0], "locations": (Location(*broken),)}


def _step_location(text: str, scan: WorkflowScan) -> tuple[Location, ...]:
    workflow, _, rest = text.partition(":")
    job = rest.partition(":")[0]
    return (Location(workflow, scan.job_lines.get((workflow, job), 0)),)


def _key(job_id: str) -> dict[str, str]:
    schedule, hardware, suite = job_id.split("/", 2)
    return {"schedule": schedule, "hardware": hardware, "suite": suite}


def _could_run(report: ForeignReport, job_id: str) -> list[str]:
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


def _audit_job(report: ForeignReport, job_id: str, regs: list[SuiteRegistration], mine: list[StepRun],
               direct: dict[str, list[StepRun]]) -> None:
    """dormant-suite, disabled-without-reason and empty-suite for one job, and its row of the job table.
    A suite whose every enabled file is run by path (python3 test/registered/x.py, pytest x.py) runs too."""
    enabled = [r for r in regs if r.disabled is None]
    enabled_files = sorted({r.file for r in enabled})
    by_path_refs = [ref for f in enabled_files for ref in direct.get(f, [])]
    if enabled_files and all(direct.get(f) for f in enabled_files):
        mine = mine + by_path_refs
    schedule = job_id.split("/")[0]
    need = events_needed(schedule)
    files = sorted({r.file for r in regs})
    # a masked run still runs: masked-step reports it; here only "does anything run it"
    live = [r for r in mine if r.events_for(files) & need]
    maybe = [r for r in mine if not r.never_runs
             and (r.maybe_events & need or (r.events_for(files) & need and r.shard_unknown))]
    manual = [r for r in mine if not r.never_runs and (r.events | r.maybe_events) & MANUAL_TRIGGERS]
    runners = sorted({lbl for r in mine for lbl in (r.runners or report.scan.runs_on.get((r.workflow, r.wf_job), ()))})
    expected = expected_runner(regs[0].backend, regs[0].suite)
    _note_disabled(report, regs)
    whole = any(r.shard is None and not r.shard_unknown for r in live)
    complete, parts = _partitions_text({r.shard for r in live if r.shard is not None})
    by_path = bool(enabled_files) and all(any(ref.events_for([f]) & need for ref in direct.get(f, []))
                                          for f in enabled_files)
    first = enabled[0] if enabled else regs[0]
    location = (Location(first.file, first.line),)
    if enabled and not (whole or complete or by_path):
        _dormant(report, job_id, enabled, mine, live, maybe, manual, parts, files, expected, location)
    elif enabled:
        key = _key(job_id)
        report.run_suites.add((key["hardware"], key["suite"], key["schedule"]))
    if mine and not enabled:
        report.add("empty-suite",
                   f"EMPTY {job_id}: {', '.join(sorted({r.where for r in mine}))} runs it, but all {len(regs)} "
                   "registration(s) are disabled: the runner finds nothing and the step passes",
                   locations=location + tuple(Location(r.workflow, r.line) for r in mine[:1]), **_key(job_id))
    workflows = sorted({r.workflow.rpartition("/")[2] for r in mine}) or ["-"]
    triggers = sorted({t for r in mine for t in r.events_for(files)}) or \
        sorted({f"{t}?" for r in mine for t in r.maybe_events}) or ["-"]
    shown_parts = "1" if whole else parts if complete else "?" if any(r.shard_unknown for r in mine) else "-"
    count = f"{len(enabled)}" + (f" (+{len(regs) - len(enabled)} disabled)" if len(regs) > len(enabled) else "")
    report.job_rows.append((job_id, count, f"{sum(r.est_time for r in enabled):.0f}", shown_parts,
                            ", ".join(workflows), ", ".join(triggers),
                            ", ".join(runners) or (f"({expected})" if expected else "-")))


def _dormant(report: ForeignReport, job_id: str, enabled: list[SuiteRegistration], mine: list[StepRun],
             live: list[StepRun], maybe: list[StepRun], manual: list[StepRun], parts: str, files: list[str],
             expected: str | None, location: tuple[Location, ...]) -> None:
    """The dormant-suite finding of a suite no triggered step is proven to run: an error when nothing
    could run it, a warning (with why) when a run-time value, a dispatch or an unresolved step could."""
    schedule = job_id.split("/")[0]
    where = location + tuple(Location(r.workflow, r.line) for r in (live or maybe or mine)[:1])
    if live and not any(r.shard_unknown for r in live):
        places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in live}))
        report.add("dormant-suite", f"PARTIAL {job_id}: {places} {parts}", locations=where, state="partial",
                   **_key(job_id))
        return
    need = "a schedule" if schedule == "nightly" else "pull_request/push"
    hint = f" (runner {expected})" if expected else ""
    head = f"DORMANT {job_id}{hint}: {len(enabled)} registered file(s), first at {enabled[0].where}; "
    why: list[str] = []
    if maybe or live:
        for r in maybe + live:
            why += list(r.why_maybe) + ([r.shard_unknown] if r.shard_unknown else [])
        places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in maybe + live}))
        report.add("dormant-suite", f"UNPROVEN {job_id}{hint}: may run in {places}", severity="warning",
                   locations=where, why_unproven="; ".join(dict.fromkeys(why)) or "a run-time value",
                   state="unproven", **_key(job_id))
        return
    if manual:
        places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in manual}))
        report.add("dormant-suite", head + f"runs only by workflow_dispatch ({places})", severity="warning",
                   locations=where, why_unproven="runs only when someone dispatches it by hand",
                   state="manual-only", **_key(job_id))
        return
    could = _could_run(report, job_id)
    if could:
        report.add("dormant-suite", head + f"needs a workflow triggered by {need}; no step is proven to run it",
                   severity="warning", locations=where,
                   why_unproven=f"unresolved step(s) could run it: {'; '.join(could[:3])}", state="unproven",
                   **_key(job_id))
        return
    detail = (f"only referenced by {describe_steps(mine, files, undecided=UNDECIDED)}" if mine
              else "no workflow step runs it")
    report.add("dormant-suite", head + f"needs a workflow triggered by {need}; {detail}", locations=where,
               state="dormant", **_key(job_id))


def _note_disabled(report: ForeignReport, regs: list[SuiteRegistration]) -> None:
    """The disabled registrations' table rows; disabled-without-reason for those that give no reason."""
    for reg in regs:
        if reg.disabled is not None:
            reason = reg.disabled if isinstance(reg.disabled, str) else ""
            report.disabled_rows.append((reg.file, reg.suite, reason.strip() or "-", reg.where))
            if not reason.strip():
                report.add("disabled-without-reason",
                           f"{reg.where}: disabled={short(reg.disabled)} in suite {reg.suite}: "
                           "give the reason as a string",
                           **_key(reg.job_id))


def _check_runners(report: ForeignReport, refs: list[StepRun]) -> None:
    """runner-mismatch: a step runs a suite on a runner the suite's name rules out."""
    for ref in refs:
        schedule, hw, suite = ref.target.split("/", 2)
        problem = runner_mismatch(suite, hw, ref.runners or report.scan.runs_on.get((ref.workflow, ref.wf_job), ()))
        if problem:
            wasteful = re.search(r"needs (\d+) GPU\(s\), runner \S+ has (\d+)", problem)
            note = bool(wasteful) and int(wasteful.group(2)) > int(wasteful.group(1))
            report.add("runner-mismatch", f"HARDWARE {ref.where}: runs {ref.target}, but {problem}"
                       + (" (more GPUs than it needs: wasteful, not wrong)" if note else ""),
                       severity="note" if note else None,
                       locations=(Location(ref.workflow, ref.line),), **_key(ref.target))


def _check_unknown_suites(report: ForeignReport, refs: list[StepRun], jobs: dict[str, list]) -> None:
    """unknown-suite: a step runs a suite nothing registers, with the nearest registered name as a hint."""
    for ref in refs:
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
        report.add("unknown-suite", f"UNKNOWN {ref.where}: runs --hw {hw} --suite {suite}"
                   f"{' --nightly' if schedule == 'nightly' else ''}, which nothing registers{hint}",
                   locations=(Location(ref.workflow, ref.line),), **_key(ref.target))


def _check_typos(report: ForeignReport, jobs: dict[str, list[SuiteRegistration]]) -> None:
    """suite-name-typo: a suite with one registered file whose name is within 2 edits of a bigger one."""
    from ci.registry.suite_names import near_names

    sizes = {job_id: len(regs) for job_id, regs in jobs.items()}
    run = {r.target for r in report.scan.refs}
    for job_id, other, distance in near_names(sizes):
        if job_id in run:   # a workflow names it: intended
            continue
        reg = jobs[job_id][0]
        report.add("suite-name-typo", f"{reg.where}: suite {job_id.split('/', 2)[2]!r} ({sizes[job_id]} file(s)) is "
                   f"{distance} edit(s) from {other.split('/', 2)[2]!r} ({sizes[other]} file(s)): a typo makes a new "
                   "suite", severity="warning", locations=(Location(reg.file, reg.line),),
                   why_unproven="a name this close may be intended", **_key(job_id))


def format_foreign(report: ForeignReport, findings: list[Finding] | None = None, **opts: Any) -> str:
    regs = report.suites.registrations
    disabled = sum(1 for r in regs if r.disabled is not None)
    try:
        shown = report.root.relative_to(Path.cwd())
    except ValueError:
        shown = report.root
    lines = [f"registry ({report.adapter} adapter): {len(report.suites.files)} test file(s), {len(regs)} "
             f"registration(s) ({disabled} disabled), {len(report.job_rows)} job(s) -- {shown}; "
             f"github.repository: {report.repository or 'unknown (--repo OWNER/NAME)'}", ""]
    lines.append(format_table(["job", "registrations", "est s", "partitions", "workflow", "trigger", "runner"],
                              report.job_rows, right=(1, 2)))
    if report.disabled_rows:
        lines += ["", "disabled registrations:",
                  format_table(["file", "suite", "reason", "where"], report.disabled_rows)]
    lines += format_findings(FOREIGN_RULES, report.findings if findings is None else findings, **opts)
    return "\n".join(lines)


def format_text(report: ForeignReport, findings: list[Finding] | None = None, **opts: Any) -> str:
    """The text report (tables, then ``severity [rule-id] message`` per finding of ``findings``)."""
    return format_foreign(report, findings, **opts)


def foreign_tables(report: ForeignReport) -> dict[str, list[dict[str, Any]]]:
    """The text report's tables as JSON (``tables`` in ``--format json``)."""
    return {
        "jobs": [{**dict(zip(("id", "registrations", "est_s", "partitions", "workflows", "triggers", "runner"), row)),
                  "registrations": int(str(row[1]).split()[0]),
                  "disabled": int(str(row[1]).split("+")[1].split()[0]) if "+" in str(row[1]) else 0}
                 for row in report.job_rows],
        "disabled": [dict(zip(("file", "suite", "reason", "where"), row)) for row in report.disabled_rows],
    }
