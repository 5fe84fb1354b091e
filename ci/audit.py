"""The registry audit (SPEC §8): prove every registered suite runs, and say so in a table.

    python -m ci.audit [--root DIR] [--today YYYY-MM-DD]

Rules, each printed PASS/FAIL with its offenders (exit 1 on any violation):
  (a) dormant: a registered job that no triggered workflow job runs (per-commit
      jobs need a pull_request/push workflow, nightly jobs a schedule), or whose
      shards are not all run
  (b) a workflow reference to an unknown (or unresolvable) job id
  (c) a gate value exercised by no per-commit job (only nightly, or by none)
  (d) a test in registered/test_*.py that belongs to no suite
  (e) an impl op without a reference, or without a per-commit test mentioning it
  (f) a disabled registration without a reason, without an `until` date, or past it
"""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ci.catalog import CatalogError
from ci.collect import CollectionError, names_mentioned
from ci.jobs import Job, Registry, load_registry, parse_job_id
from ci.ops_audit import OP_TABLE, impl_ops, reference_names
from ci.table import format_table
from ci.workflow_scan import PER_COMMIT_TRIGGERS, WorkflowScan, scan_workflows
from impl.gates import GATES

RULES = {
    "a": "every registered job is run by a triggered workflow job (no dormant suites)",
    "b": "every workflow reference names a registered job",
    "c": "every gate value is exercised by a per-commit job",
    "d": "every test in registered/ belongs to a suite",
    "e": "every impl op has a reference and a per-commit test",
    "f": "every disabled registration has a reason and an unexpired `until` date",
}


@dataclass
class AuditReport:
    registry: Registry
    scan: WorkflowScan
    violations: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in RULES})
    job_rows: list[tuple] = field(default_factory=list)
    gate_rows: list[tuple] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


def _runs_on_schedule(schedule: str, triggers: frozenset[str]) -> bool:
    if schedule == "nightly":
        return "schedule" in triggers or bool(triggers & PER_COMMIT_TRIGGERS)
    return bool(triggers & PER_COMMIT_TRIGGERS)


def rule_dormant(report: AuditReport) -> None:
    for job in report.registry.jobs.values():
        refs = [r for r in report.scan.refs if r.job_id == job.id]
        live = [r for r in refs if not r.never_runs and _runs_on_schedule(job.key.schedule, r.triggers)]
        where = job.tests[0].where
        if not live:
            need = "a schedule" if job.key.schedule == "nightly" else "pull_request/push"
            if refs:
                seen = "; ".join(f"{r.workflow}:{r.wf_job} on {sorted(r.triggers) or 'nothing'}"
                                 + (" (if: false)" if r.never_runs else "") for r in refs)
                detail = f"only referenced by {seen}"
            else:
                detail = "no workflow job calls the runner with this --job"
            report.violations["a"].append(
                f"DORMANT {job.id} ({len(job.tests)} test(s), first at {where}): needs a workflow "
                f"triggered by {need}; {detail}")
        for ref in live:
            if ref.shard_problem:
                report.violations["a"].append(f"PARTIAL {job.id}: {ref.workflow}:{ref.wf_job} {ref.shard_problem}")


def rule_unknown_refs(report: AuditReport) -> None:
    report.violations["b"] += report.scan.problems
    for ref in report.scan.refs:
        try:
            parse_job_id(ref.job_id)
        except ValueError as exc:
            report.violations["b"].append(f"{ref.workflow}:{ref.wf_job}: {exc}")
            continue
        if ref.job_id not in report.registry.jobs:
            report.violations["b"].append(
                f"{ref.workflow}:{ref.wf_job}: --job {ref.job_id} is not a registered job "
                "(renamed or removed suite? regenerate with nox -s workflows)")


def exercised_gate_values(job: Job) -> dict[str, str]:
    """The value of every gate a job runs with: its env, else the gate's default for that hardware."""
    env = job.full_env()
    out: dict[str, str] = {}
    for gate in GATES.values():
        value = env.get(gate.env_var)
        if value:
            out[gate.name] = value
        elif gate.name == "platform":
            out[gate.name] = job.hardware.backend
        elif gate.name == "kernel_backend":
            out[gate.name] = "triton" if job.hardware.is_gpu else "triton-interpret"
        elif gate.default is not None:
            out[gate.name] = gate.default
    return out


def rule_gates(report: AuditReport) -> None:
    by_value: dict[tuple[str, str], dict[str, list[str]]] = {
        (g.name, v): {"per-commit": [], "nightly": []} for g in GATES.values() for v in g.values}
    for job in report.registry.jobs.values():
        for gate, value in exercised_gate_values(job).items():
            by_value.setdefault((gate, value), {"per-commit": [], "nightly": []})
            by_value[(gate, value)].setdefault(job.key.schedule, []).append(job.id)
    for (gate, value), jobs in by_value.items():
        per_commit, nightly = jobs.get("per-commit", []), jobs.get("nightly", [])
        report.gate_rows.append((gate, value, len(per_commit), len(nightly)))
        if per_commit:
            continue
        if nightly:
            hint = " (a cpu variant emulates it)" if gate == "platform" else ""
            report.violations["c"].append(
                f"gate {gate}={value} is exercised only by nightly jobs {nightly}: add a per-commit job "
                f"or variant that runs with {GATES[gate].env_var}={value}{hint}")
        else:
            report.violations["c"].append(
                f"gate {gate}={value} is exercised by no job: add a per-commit job or variant that runs "
                f"with {GATES[gate].env_var}={value}")


def rule_unregistered(report: AuditReport) -> None:
    for test in report.registry.collection.unregistered:
        report.violations["d"].append(
            f"{test.file}:{test.line}: {test.node_id} belongs to no suite (decorate it with @register(...))")


def rule_ops(report: AuditReport) -> None:
    root = report.registry.root
    ops = impl_ops(root)
    refs = reference_names(root)
    collection = report.registry.collection
    per_commit_files = {r.file for r in collection.registrations
                        if r.schedule == "per-commit" and r.disabled is None}
    mentioned: set[str] = set()
    for rel in per_commit_files:
        mentioned |= collection.mentions.get(rel, frozenset())
    op_table_used = any({"op_table", "registered.op_table"} & collection.mentions.get(rel, frozenset())
                        for rel in per_commit_files)
    if op_table_used and (root / OP_TABLE).is_file():
        mentioned |= names_mentioned(ast.parse((root / OP_TABLE).read_text(encoding="utf-8")))
    for op in ops:
        if op not in refs:
            report.violations["e"].append(f"op {op}: reference/__init__.py exports no {op!r}")
        if op not in mentioned:
            report.violations["e"].append(
                f"op {op}: no per-commit registered test file (nor {OP_TABLE} used by one) mentions it")


def rule_disabled(report: AuditReport, today: dt.date) -> None:
    for reg in report.registry.disabled:
        info = reg.disabled or {}
        label = f"{reg.where}: {reg.node_id} disabled in {reg.schedule} {reg.suite}"
        if not str(info.get("reason", "")).strip():
            report.violations["f"].append(f"{label}: no reason")
        until = info.get("until")
        if not until:
            report.violations["f"].append(f"{label}: no `until` expiry date (YYYY-MM-DD)")
            continue
        try:
            expiry = dt.date.fromisoformat(until)
        except ValueError:
            report.violations["f"].append(f"{label}: until={until!r} is not a YYYY-MM-DD date")
            continue
        if expiry < today:
            report.violations["f"].append(f"{label}: expired on {until} (reason: {info.get('reason', '')!r}); "
                                          "fix the test or renew the date")


def run_audit(root: str | Path = ".", *, today: dt.date | None = None) -> AuditReport:
    registry = load_registry(root)
    report = AuditReport(registry, scan_workflows(registry.root))
    rule_dormant(report)
    rule_unknown_refs(report)
    rule_gates(report)
    rule_unregistered(report)
    rule_ops(report)
    rule_disabled(report, today or dt.date.today())
    for job in registry.jobs.values():
        refs = [r for r in report.scan.refs if r.job_id == job.id]
        files = sorted({r.workflow.rpartition("/")[2] for r in refs}) or ["-"]
        triggers = sorted({t for r in refs for t in r.triggers}) or ["-"]
        report.job_rows.append((job.id, len(job.tests), f"{job.est_time:.0f}", job.shards,
                                ", ".join(files), ", ".join(triggers)))
    return report


def format_report(report: AuditReport) -> str:
    reg = report.registry
    n_tests = len({t.node_id for j in reg.jobs.values() for t in j.tests})
    lines = [f"registry: {len(reg.jobs)} job(s), {n_tests} registered test(s), "
             f"{len(reg.disabled)} disabled registration(s) -- {reg.root}", ""]
    lines.append(format_table(["job", "tests", "est s", "shards", "workflow", "trigger"],
                              report.job_rows, right=(1, 2, 3)))
    lines += ["", format_table(["gate", "value", "per-commit jobs", "nightly jobs"],
                               report.gate_rows, right=(2, 3))]
    if reg.disabled:
        lines += ["", "disabled registrations:"] + [
            f"  {r.where}: {r.node_id} [{r.schedule} {r.suite} {','.join(r.hardware)}] {r.disabled}"
            for r in reg.disabled]
    lines += ["", "rules:"]
    for code, title in RULES.items():
        found = report.violations[code]
        lines.append(f"  [{'FAIL' if found else 'PASS'}] ({code}) {title}")
        lines += [f"         - {v}" for v in found]
    failed = sum(1 for v in report.violations.values() if v)
    lines += ["", f"audit: {'OK' if not failed else f'{failed} of {len(RULES)} rule(s) failed'}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.audit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".")
    parser.add_argument("--today", type=dt.date.fromisoformat, help="date for expiry checks (default: today)")
    args = parser.parse_args(argv)
    try:
        report = run_audit(args.root, today=args.today)
    except (CollectionError, CatalogError) as exc:
        print(f"audit: registry cannot be collected:\n{exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
