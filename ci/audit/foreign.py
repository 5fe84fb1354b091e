"""The audit for another repository, through an adapter (``dspark-audit --adapter sglang``).

Rules: ``ci.audit.rules.FOREIGN_RULES``, one module each in ci/audit/rules/ (the same ids as the
project's own audit). This module collects the registrations through the adapter and scans the
workflows once, hands the scan's input findings to their rules, reads each suite once (the job table,
and the findings of dormant-suite, disabled-without-reason and empty-suite, through those rules'
functions), then runs every rule's ``foreign`` check in the list's order. Severities: error = proven (no
triggered path can run the suite); warning = hangs on a run-time value (a job if: on change
detection, a computed matrix, an unresolved step) or runs only by workflow_dispatch, with
``why_unproven``; note = odd but harmless. Gate rules apply only where the adapter declares gates.
``github.repository`` comes from ``--repo OWNER/NAME``, else the tree's git remote, else unknown.
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

from ci.input_errors import InputError

import configparser
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.adapters import Adapter, get_adapter
from ci.adapters.sglang import SuiteCollection, SuiteRegistration, expected_runner
from ci.audit.report import FindingCollector, format_findings
from ci.audit.rules import FOREIGN_CHECKS, FOREIGN_RULES, REGISTRY, add_scan_findings
from ci.audit.rules import disabled_without_reason, dormant_suite, empty_suite
from ci.audit.findings import Finding, Location
from ci.audit.keys import target_key
from ci.safe_files import UnreadableFile, read_inside
from ci.table import format_table
from ci.github.scan import MANUAL_TRIGGERS, StepRun, WorkflowScan, events_needed, scan_workflows

RULES = {rule_id: REGISTRY[rule_id].title for rule_id in FOREIGN_RULES}


@dataclass
class ForeignReport(FindingCollector):
    adapter: str = ""
    root: Path = None
    suites: SuiteCollection = None
    scan: WorkflowScan = None
    job_rows: list[tuple] = field(default_factory=list)
    disabled_rows: list[tuple] = field(default_factory=list)
    repository: str | None = None
    # what the rules' checks read, besides the scan and the collection
    jobs: dict[str, list[SuiteRegistration]] = field(default_factory=dict)   # suite id -> its registrations
    refs: list[StepRun] = field(default_factory=list)   # the scan's steps that run a suite (kind "suite")


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
        raise InputError(f"--root {root}: not a directory")
    repository = repository or repository_of(root)
    if repository:
        adapter.context = {**adapter.context, "github.repository": repository}
    suites = adapter.collect(root)
    scan = scan_workflows(root, adapter)
    report = ForeignReport(adapter=adapter.name, root=root, suites=suites, scan=scan, repository=repository,
                           jobs=_by_job(suites.registrations), refs=[r for r in scan.refs if r.kind == "suite"])
    add_scan_findings(report, scan.input_findings, "foreign")
    direct: dict[str, list[StepRun]] = {}
    for ref in scan.refs:
        if ref.kind == "file":
            direct.setdefault(ref.target, []).append(ref)
    for job_id, regs in report.jobs.items():
        _audit_job(report, job_id, regs, [r for r in report.refs if r.target == job_id], direct)
    for check in FOREIGN_CHECKS:   # ci/audit/rules/: every rule's foreign check, in the list's order
        check(report)
    return report


def _audit_job(report: ForeignReport, job_id: str, regs: list[SuiteRegistration], mine: list[StepRun],
               direct: dict[str, list[StepRun]]) -> None:
    """One suite, read once for three rules (dormant-suite, disabled-without-reason, empty-suite: their
    modules' functions turn what is read here into findings) and its row of the job table.
    A suite whose every enabled file is run by path (python3 test/registered/x.py, pytest x.py) runs too.
    A masked run is no run (the rule: run, unmasked, by a triggered step; the own audit reads it the same
    way): a suite only masked steps run is DORMANT (and masked-step reports each mask), so one that ran
    unmasked in a baseline and is now run only masked regresses. A mask that hangs on a run-time value
    leaves the run possible: UNPROVEN."""
    enabled = [r for r in regs if r.disabled is None]
    enabled_files = sorted({r.file for r in enabled})
    by_path_refs = [ref for f in enabled_files for ref in direct.get(f, [])]
    if enabled_files and all(direct.get(f) for f in enabled_files):
        mine = mine + by_path_refs
    schedule = job_id.split("/")[0]
    need = events_needed(schedule)
    files = sorted({r.file for r in regs})
    unproven_masks = report.scan.masked_unproven

    def masked(ref: StepRun) -> bool:   # a mask the scan is sure of (not one on a run-time value)
        return any(f"{ref.where}: {m}" not in unproven_masks for m in ref.masks)

    live = [r for r in mine if not r.masks and r.events_for(files) & need]
    maybe = [r for r in mine if not r.never_runs and not masked(r)
             and (r.maybe_events & need or (r.events_for(files) & need and (r.shard_unknown or r.masks)))]
    manual = [r for r in mine if not r.never_runs and not masked(r) and (r.events | r.maybe_events) & MANUAL_TRIGGERS]
    runners = sorted({lbl for r in mine for lbl in (r.runners or report.scan.runs_on.get((r.workflow, r.wf_job), ()))})
    expected = expected_runner(regs[0].backend, regs[0].suite)
    _note_disabled(report, regs)
    disabled_without_reason.foreign_registrations(report, regs)
    whole = any(r.shard is None and not r.shard_unknown for r in live)
    complete, parts = _partitions_text({r.shard for r in live if r.shard is not None})
    by_path = bool(enabled_files) and all(any(ref.events_for([f]) & need for ref in direct.get(f, []) if not ref.masks)
                                          for f in enabled_files)
    first = enabled[0] if enabled else regs[0]
    location = (Location(first.file, first.line),)
    if enabled and not (whole or complete or by_path):
        dormant_suite.foreign_job(report, job_id, enabled, mine, live, maybe, manual, parts, files, expected,
                                  location)
    elif enabled:
        key = target_key(job_id)
        report.run_suites.add((key["hardware"], key["suite"], key["schedule"]))
    empty_suite.foreign_job(report, job_id, regs, mine, location)
    workflows = sorted({r.workflow.rpartition("/")[2] for r in mine}) or ["-"]
    triggers = sorted({t for r in mine for t in r.events_for(files)}) or \
        sorted({f"{t}?" for r in mine for t in r.maybe_events}) or ["-"]
    shown_parts = "1" if whole else parts if complete else "?" if any(r.shard_unknown for r in mine) else "-"
    count = f"{len(enabled)}" + (f" (+{len(regs) - len(enabled)} disabled)" if len(regs) > len(enabled) else "")
    report.job_rows.append((job_id, count, f"{sum(r.est_time for r in enabled):.0f}", shown_parts,
                            ", ".join(workflows), ", ".join(triggers),
                            ", ".join(runners) or (f"({expected})" if expected else "-")))


def _note_disabled(report: ForeignReport, regs: list[SuiteRegistration]) -> None:
    """The disabled registrations' table rows."""
    for reg in regs:
        if reg.disabled is not None:
            reason = reg.disabled if isinstance(reg.disabled, str) else ""
            report.disabled_rows.append((reg.file, reg.suite, reason.strip() or "-", reg.where))


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
