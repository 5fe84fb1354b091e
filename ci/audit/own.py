"""The registry audit: prove every registered test runs, whole, where it says, and say so in tables.

    python -m ci.audit ARGS        # = dspark-audit ARGS = nox -s audit -- ARGS (ci/audit/cli.py: the options)

Rules: ``ci.audit.rules.OWN_RULES``, one module each in ci/audit/rules/ (each printed PASS/FAIL with its
findings as `severity [rule-id] message`; exit 1 on any error finding). This module reads the inputs
once (the registry, the workflow scan, the skip table), hands the scan's input findings to their rules,
runs every rule's ``own`` check in the list's order, and draws the job, group, gate and debt tables.
Another repository: ``--adapter sglang`` (see ci/audit/foreign.py). The command line, its JSON
schema and SARIF live in ci/audit/cli.py; ``python -m ci.audit`` runs it.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ci.registry.catalog import CATALOG_PATH, CatalogError
from ci.registry.jobs import Job, Registry, load_registry
from ci.registry.skip_reasons import SkipTable, load_skip_table
from ci.audit.skips import skip_uses
from ci.audit.keys import group_id
from ci.audit.report import FindingCollector, format_findings
from ci.audit.rules import OWN_CHECKS, OWN_RULES, REGISTRY, add_scan_findings
from ci.audit.rules.non_native_gpu_backend import INTERPRETED, kernel_backend
from ci.audit.findings import Finding
from ci.table import format_table
from ci.safe_files import UnreadableFile, read_inside
from ci.safe_yaml import load_yaml, mapping
from ci.github.scan import WorkflowScan, scan_workflows

RULES = {rule_id: REGISTRY[rule_id].title for rule_id in OWN_RULES}   # id -> title, in print order
DEFAULT_HORIZON_DAYS = 90


@dataclass
class AuditReport(FindingCollector):
    registry: Registry = None
    scan: WorkflowScan = None
    job_rows: list[tuple] = field(default_factory=list)
    group_rows: list[tuple] = field(default_factory=list)
    gate_rows: list[tuple] = field(default_factory=list)
    debt_rows: list[tuple] = field(default_factory=list)
    retry_rows: list[tuple] = field(default_factory=list)
    skipped_rules: dict[str, str] = field(default_factory=dict)   # rule -> why it was not checked
    # what the rules' checks read, besides the registry and the scan
    plan: dict[str, tuple[int, list[str]]] = field(default_factory=dict)   # group id -> (shards, job ids)
    skip_table: SkipTable = None
    skip_uses: dict[str, list] = field(default_factory=dict)   # node id -> its skip uses (ci.audit.skips)
    today: dt.date = None
    horizon: int = DEFAULT_HORIZON_DAYS   # days an ``until`` may lie ahead
    collected: list[str] | None = None    # pytest's node ids (collection-parity), None: not checked


def registry_summary(registry: Registry) -> str:
    """One line with the counts, in the project's vocabulary (the audit and bench_registry print it)."""
    regs = registry.collection.registrations
    disabled = sum(1 for r in regs if r.disabled is not None)
    groups = group_plan(registry)
    return (f"{len(registry.collection.test_files)} test file(s), {len(regs)} registration(s) "
            f"({disabled} disabled), {len(registry.jobs)} job(s) in {len(groups)} group(s)")


def group_plan(registry: Registry) -> dict[str, tuple[int, list[str]]]:
    """group id -> (shard count, job ids), from the registry's plan (``Registry.groups``)."""
    return {gid: (int(g.shards), [j.id for j in g.jobs]) for gid, g in registry.groups.items()}


def until_horizon_days(root: str | Path) -> int:
    """``defaults.until_horizon_days`` in ci/hardware.yaml (default 90)."""
    path = Path(root) / CATALOG_PATH
    try:
        data = load_yaml(read_inside(root, path)) or {}
    except (UnreadableFile, yaml.YAMLError):
        return DEFAULT_HORIZON_DAYS
    value = mapping(mapping(data).get("defaults")).get("until_horizon_days", DEFAULT_HORIZON_DAYS)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise CatalogError(f"{CATALOG_PATH}: defaults.until_horizon_days must be a positive integer, got {value!r}")
    return value


def kernel_backend_shown(job: Job) -> str:
    """The job table's backend column: the backend, marked ``(variant)`` when a variant chose it."""
    value = kernel_backend(job.full_env(), job.hardware.is_gpu)
    chosen = job.key.variant and kernel_backend(dict(job.env), job.hardware.is_gpu) == value and (
        "DSPARK_KERNEL_BACKEND" in job.env or any(k in job.env for k in INTERPRETED))
    return f"{value} (variant {job.key.variant})" if chosen else value


def retry_table(report: AuditReport) -> None:
    """The tests that opted into retries (a table, not a rule: a pass on a retry is reported flaky)."""
    for reg in report.registry.collection.registrations:
        if getattr(reg, "retries", 0):
            report.retry_rows.append((reg.node_id, f"{reg.schedule}/{','.join(reg.hardware)}/{reg.suite}",
                                      reg.retries, reg.where))


def run_audit(root: str | Path = ".", *, today: dt.date | None = None,
              collected: list[str] | None = None) -> AuditReport:
    """Audit the repository at ``root``; ``collected``: pytest's node ids, for rule collection-parity."""
    registry = load_registry(root)
    today = today or dt.date.today()
    horizon = until_horizon_days(registry.root)
    report = AuditReport(registry=registry, scan=scan_workflows(registry.root, "dspark"), plan=group_plan(registry),
                         today=today, horizon=horizon, collected=collected)
    report.skip_table = load_skip_table(registry.root)
    report.skip_uses = skip_uses(registry.root, registry.collection.test_files, report.skip_table)
    add_scan_findings(report, report.scan.input_findings, "own")
    for check in OWN_CHECKS:   # ci/audit/rules/: every rule's own check, in the list's order
        check(report)
    retry_table(report)
    plan, refs = report.plan, report.scan.refs
    for job in registry.jobs.values():
        gid = group_id(job)
        mine = [r for r in refs if (r.kind == "job" and r.target == job.id) or (r.kind == "group" and r.target == gid)]
        files = sorted({r.workflow.rpartition("/")[2] for r in mine}) or ["-"]
        test_files = sorted({t.node_id.split("::")[0] for t in job.tests})
        triggers = sorted({t for r in mine if not r.masks for t in r.events_for(test_files)}) or ["-"]
        shards = plan[gid][0] if any(r.kind == "group" for r in mine) else getattr(job, "shards", plan[gid][0])
        report.job_rows.append((job.id, len(job.tests), f"{job.est_time:.0f}", shards,
                                ", ".join(files), ", ".join(triggers), kernel_backend_shown(job)))
    for gid, (count, job_ids) in sorted(plan.items()):
        mine = [r for r in refs if r.kind == "group" and r.target == gid]
        files = sorted({r.workflow.rpartition("/")[2] for r in mine}) or ["-"]
        triggers = sorted({t for r in mine if not r.masks for t in r.events}) or ["-"]
        est = sum(registry.jobs[j].est_time for j in job_ids)
        report.group_rows.append((gid, len(job_ids), f"{est:.0f}", count, ", ".join(files), ", ".join(triggers)))
    return report


def format_report(report: AuditReport, findings: list[Finding] | None = None, **opts: Any) -> str:
    reg = report.registry
    lines = [f"registry: {registry_summary(reg)} -- {reg.root}", ""]
    lines.append(format_table(["job", "registrations", "est s", "shards", "workflow", "trigger", "backend"],
                              report.job_rows, right=(1, 2, 3)))
    lines += ["", format_table(["group", "jobs", "est s", "shards", "workflow (--group)", "trigger"],
                               report.group_rows, right=(1, 2, 3))]
    lines += ["", format_table(["gate", "value", "per-commit jobs", "nightly jobs"],
                               report.gate_rows, right=(2, 3))]
    if report.debt_rows:
        lines += ["", "disabled and conditionally skipped tests:",
                  format_table(["test", "kind", "reason", "owner", "until / when", "where"], report.debt_rows)]
    if report.retry_rows:
        lines += ["", "tests that opted into retries (a pass on a retry is reported flaky):",
                  format_table(["test", "registration", "retries", "where"], report.retry_rows, right=(2,))]
    lines += format_findings(OWN_RULES, report.findings if findings is None else findings, report.skipped_rules,
                             **opts)
    return "\n".join(lines)


def format_text(report: AuditReport, findings: list[Finding] | None = None, **opts: Any) -> str:
    """The text report: the job, group and gate tables, then ``severity [rule-id] message`` per finding
    (``findings``: a filtered list, e.g. after a baseline; default all of the report's; ``opts``:
    format_findings' baselined, show_baselined, fail_on)."""
    return format_report(report, findings, **opts)


def report_tables(report: AuditReport) -> dict[str, list[dict[str, Any]]]:
    """The text report's tables as JSON (``tables`` in ``--format json``)."""
    return {
        "jobs": [dict(zip(("id", "registrations", "est_s", "shards", "workflows", "triggers", "backend"), row))
                 for row in report.job_rows],
        "groups": [dict(zip(("id", "jobs", "est_s", "shards", "workflows", "triggers"), row))
                   for row in report.group_rows],
        "debt": [dict(zip(("test", "kind", "reason", "owner", "until", "where"), row)) for row in report.debt_rows],
        "retries": [dict(zip(("test", "registration", "retries", "where"), row)) for row in report.retry_rows],
    }


if __name__ == "__main__":
    # ``python -m ci.audit`` is ``dspark-audit``: it runs the one command line (ci/audit/cli.py) as the main
    # program, exactly as ``python -m ci.audit.cli`` does. This module, the project's own audit that the
    # command line calls, never imports the command line (no import cycle); in-process callers use
    # ci.audit.cli.main.
    import runpy

    runpy.run_module("ci.audit.cli", run_name="__main__", alter_sys=True)
