"""The audit for another repository, through an adapter (``python -m ci.audit --adapter sglang``).

Rules that make sense without this project's catalog and gates:
  (a) dormant: a suite with enabled registrations that no unmasked, triggered
      workflow step runs (per-commit: pull_request/push; nightly: schedule), or
      of which some partitions never run
  (b) a workflow step runs a suite nothing registers (for that hardware and
      schedule), or a step the scan cannot resolve
  (c) a disabled registration without a reason
  (d) an empty suite: a workflow runs it, but all its registrations are disabled
      (the runner finds nothing and exits 0)
  (e) a step that can turn the runner's failure green
  (f) a registration the repository's own runner cannot read
  (g) a suite run on a runner its name rules out (8-gpu on a 1-GPU label, MI35x on MI325)
Gate rules apply only where the adapter declares gates (sglang declares none).
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.adapters import Adapter, get_adapter
from ci.adapters.sglang import SuiteCollection, SuiteRegistration, expected_runner, runner_mismatch
from ci.table import format_rules, format_table, print_report
from ci.workflow_scan import StepRun, WorkflowScan, describe_steps, events_needed, scan_workflows

RULES = {
    "a": "every registered suite is run, unmasked, by a triggered workflow step (every partition)",
    "b": "every suite a workflow step runs is registered (for that hardware and schedule)",
    "c": "every disabled registration says why",
    "d": "no workflow runs an empty suite (all registrations disabled)",
    "e": "nothing between a workflow step and the runner can turn a failure green",
    "f": "every registration is readable by the repository's runner",
    "g": "every suite runs on the runner its name asks for (GPU count, MI35x)",
}
UNDECIDED = "its if: is not definitely true on any trigger"


@dataclass
class ForeignReport:
    adapter: str
    root: Path
    suites: SuiteCollection
    scan: WorkflowScan
    violations: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in RULES})
    job_rows: list[tuple] = field(default_factory=list)
    disabled_rows: list[tuple] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


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


def run_foreign_audit(root: str | Path, adapter: Adapter | str = "sglang", *,
                      repository: str | None = None) -> ForeignReport:
    adapter = get_adapter(adapter) if isinstance(adapter, str) else adapter
    if repository:
        adapter.context = {**adapter.context, "github.repository": repository}
    root = Path(root).resolve()
    if not root.is_dir():
        raise ValueError(f"--root {root}: not a directory")
    suites = adapter.collect(root)
    scan = scan_workflows(root, adapter)
    report = ForeignReport(adapter.name, root, suites, scan)
    jobs = _by_job(suites.registrations)
    refs = [r for r in scan.refs if r.kind == "suite"]
    report.violations["f"] += suites.problems
    report.violations["e"] += [f"MASKED {m}" for m in scan.masked]
    report.violations["b"] += scan.problems
    for job_id, regs in jobs.items():
        _audit_job(report, job_id, regs, [r for r in refs if r.target == job_id])
    _check_runners(report, refs)
    _check_unknown_suites(report, refs, jobs)
    return report


def _audit_job(report: ForeignReport, job_id: str, regs: list[SuiteRegistration], mine: list[StepRun]) -> None:
    """Rules a, c and d for one job, and its row of the job table (``mine``: the steps that run it)."""
    enabled = [r for r in regs if r.disabled is None]
    schedule = job_id.split("/")[0]
    files = sorted({r.file for r in regs})
    live = [r for r in mine if not r.masks and r.events_for(files) & events_needed(schedule)]
    runners = sorted({lbl for r in mine for lbl in report.scan.runs_on.get((r.workflow, r.wf_job), ())})
    expected = expected_runner(regs[0].backend, regs[0].suite)
    _note_disabled(report, regs)
    whole = any(r.shard is None for r in live)
    complete, parts = _partitions_text({r.shard for r in live if r.shard is not None})
    if enabled and not (whole or complete):
        if live:
            places = ", ".join(sorted({f"{r.workflow}:{r.wf_job}" for r in live}))
            report.violations["a"].append(f"PARTIAL {job_id}: {places} {parts}")
        else:
            need = "a schedule" if schedule == "nightly" else "pull_request/push"
            detail = (f"only referenced by {describe_steps(mine, files, undecided=UNDECIDED)}" if mine
                      else "no workflow step runs it")
            hint = f" (runner {expected})" if expected else ""
            report.violations["a"].append(
                f"DORMANT {job_id}{hint}: {len(enabled)} registered file(s), first at {enabled[0].where}; "
                f"needs a workflow triggered by {need}; {detail}")
    if mine and not enabled:
        report.violations["d"].append(
            f"EMPTY {job_id}: {', '.join(sorted({r.where for r in mine}))} runs it, but all {len(regs)} "
            "registration(s) are disabled: the runner finds nothing and the step passes")
    workflows = sorted({r.workflow.rpartition("/")[2] for r in mine}) or ["-"]
    triggers = sorted({t for r in mine if not r.masks for t in r.events_for(files)}) or ["-"]
    shown_parts = "1" if whole else parts if complete else "-"
    count = f"{len(enabled)}" + (f" (+{len(regs) - len(enabled)} disabled)" if len(regs) > len(enabled) else "")
    report.job_rows.append((job_id, count, f"{sum(r.est_time for r in enabled):.0f}", shown_parts,
                            ", ".join(workflows), ", ".join(triggers),
                            ", ".join(runners) or (f"({expected})" if expected else "-")))


def _note_disabled(report: ForeignReport, regs: list[SuiteRegistration]) -> None:
    """The disabled registrations' table rows; rule c for those that give no reason."""
    for reg in regs:
        if reg.disabled is not None:
            reason = reg.disabled if isinstance(reg.disabled, str) else ""
            report.disabled_rows.append((reg.file, reg.suite, reason.strip() or "-", reg.where))
            if not reason.strip():
                report.violations["c"].append(
                    f"{reg.where}: disabled={reg.disabled!r} in suite {reg.suite}: give the reason as a string")


def _check_runners(report: ForeignReport, refs: list[StepRun]) -> None:
    """Rule g: a step runs a suite on a runner the suite's name rules out (each message once)."""
    for ref in refs:
        schedule, hw, suite = ref.target.split("/", 2)
        problem = runner_mismatch(suite, hw, report.scan.runs_on.get((ref.workflow, ref.wf_job), ()))
        message = f"HARDWARE {ref.where}: runs {ref.target}, but {problem}" if problem else None
        if message and message not in report.violations["g"]:
            report.violations["g"].append(message)


def _check_unknown_suites(report: ForeignReport, refs: list[StepRun], jobs: dict[str, list]) -> None:
    """Rule b: a step runs a suite nothing registers, with the nearest registered name as a hint."""
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
        message = (f"UNKNOWN {ref.where}: runs --hw {hw} --suite {suite}"
                   f"{' --nightly' if schedule == 'nightly' else ''}, which nothing registers{hint}")
        if message not in report.violations["b"]:
            report.violations["b"].append(message)


def format_foreign(report: ForeignReport) -> str:
    regs = report.suites.registrations
    disabled = sum(1 for r in regs if r.disabled is not None)
    try:
        shown = report.root.relative_to(Path.cwd())
    except ValueError:
        shown = report.root
    lines = [f"registry ({report.adapter} adapter): {len(report.suites.files)} test file(s), {len(regs)} "
             f"registration(s) ({disabled} disabled), {len(report.job_rows)} job(s) -- {shown}", ""]
    lines.append(format_table(["job", "registrations", "est s", "partitions", "workflow", "trigger", "runner"],
                              report.job_rows, right=(1, 2)))
    if report.disabled_rows:
        lines += ["", "disabled registrations:",
                  format_table(["file", "suite", "reason", "where"], report.disabled_rows)]
    lines += format_rules(RULES, report.violations)
    return "\n".join(lines)


def foreign_json(report: ForeignReport) -> dict[str, Any]:
    return {
        "adapter": report.adapter,
        "root": str(report.root),
        "jobs": [{**dict(zip(("id", "registrations", "est_s", "partitions", "workflows", "triggers", "runner"), row)),
                  "registrations": int(str(row[1]).split()[0]),
                  "disabled": int(str(row[1]).split("+")[1].split()[0]) if "+" in str(row[1]) else 0}
                 for row in report.job_rows],
        "disabled": [dict(zip(("file", "suite", "reason", "where"), row)) for row in report.disabled_rows],
        "rules": {code: {"title": title, "ok": not report.violations[code]} for code, title in RULES.items()},
        "findings": [{"rule": code, "message": msg} for code, found in report.violations.items() for msg in found],
        "ok": report.ok,
    }


def main_foreign(args) -> int:
    """``python -m ci.audit --adapter NAME`` (arguments parsed by ci.audit.main)."""
    try:
        adapter = get_adapter(args.adapter)
        if getattr(args, "pytest_collection", False):
            raise ValueError("--pytest-collection: only for this project's own registry (--adapter dspark)")
        report = run_foreign_audit(args.root, adapter, repository=args.repository)
    except ValueError as exc:
        print(f"audit: {exc}", file=sys.stderr)
        return 2
    return print_report(report.ok, args.format, lambda: foreign_json(report), lambda: format_foreign(report))
