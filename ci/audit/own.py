"""The registry audit: prove every registered test runs, whole, where it says, and say so in tables.

    python -m ci.audit ARGS        # = dspark-audit ARGS = nox -s audit -- ARGS (ci/audit/cli.py: the options)

Rules (ci/audit/rules.py; each printed PASS/FAIL with its findings as `severity [rule-id] message`;
exit 1 on any error finding): dormant-suite, unknown-suite, runner-mismatch, ungated-value,
non-native-gpu-backend, unregistered-test, suite-name-typo, op-without-reference,
disabled-without-reason, masked-step, skip-debt, impossible-test, collection-parity (--pytest-collection).
Another repository: ``--adapter sglang`` (see ci/audit/foreign.py). The command line, its JSON
schema and SARIF live in ci/audit/cli.py; ``python -m ci.audit`` runs it.
"""
from __future__ import annotations

import ast
import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ci.registry.catalog import CATALOG_PATH, CatalogError
from ci.registry.collect import names_mentioned
from ci.registry.jobs import Job, Registry, load_registry, parse_job_id
from ci.audit.nox_session import suite_session_problems
from ci.audit.ops import OP_TABLE_PATHS, impl_ops, reference_names
from ci.registry.skip_reasons import SkipTable, load_skip_table
from ci.audit.skips import condition_skips, skip_uses
from ci.audit.foreign import masked_key, problem_key
from ci.audit.report import FindingCollector, format_findings
from ci.audit.rules import OWN_RULES
from ci.audit.findings import RULES as RULE_REGISTRY
from ci.audit.findings import Finding, Location
from ci.table import format_table
from ci.safe_files import UnreadableFile, read_inside
from ci.safe_yaml import load_yaml
from ci.github.scan import (MAX_WORKFLOW_BYTES, StepRun, WorkflowScan, describe_steps, events_needed,
                              scan_workflows, workflow_files)
from impl.gates import GATES

RULES = {rule_id: RULE_REGISTRY[rule_id].title for rule_id in OWN_RULES}   # id -> title, in print order
DEFAULT_HORIZON_DAYS = 90
UNDECIDED = "its if: is not definitely true on any of them"  # a step that mentions a job, but may never run it


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


def registry_summary(registry: Registry) -> str:
    """One line with the counts, in the project's vocabulary (the audit and bench_registry print it)."""
    regs = registry.collection.registrations
    disabled = sum(1 for r in regs if r.disabled is not None)
    groups = group_plan(registry)
    return (f"{len(registry.collection.test_files)} test file(s), {len(regs)} registration(s) "
            f"({disabled} disabled), {len(registry.jobs)} job(s) in {len(groups)} group(s)")


def group_id(job: Job) -> str:
    return f"{job.key.schedule}/{job.key.hardware}"


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
    value = (data.get("defaults") or {}).get("until_horizon_days", DEFAULT_HORIZON_DAYS)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise CatalogError(f"{CATALOG_PATH}: defaults.until_horizon_days must be a positive integer, got {value!r}")
    return value


def check_until(until: Any, today: dt.date, horizon: int) -> str | None:
    """Why an ``until`` date is not acceptable today, or None."""
    if not until:
        return "no `until` expiry date (YYYY-MM-DD)"
    try:
        expiry = dt.date.fromisoformat(str(until))
    except ValueError:
        return f"until={until!r} is not a YYYY-MM-DD date"
    if expiry < today:
        return f"expired on {until}"
    limit = today + dt.timedelta(days=horizon)
    if expiry > limit:
        return (f"until={until} is beyond the {horizon}-day horizon ({limit.isoformat()}; "
                f"{CATALOG_PATH} defaults.until_horizon_days)")
    return None


# ----------------------------------------------------------------- (a), (b)
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


def rule_dormant(report: AuditReport, plan: dict[str, tuple[int, list[str]]]) -> None:
    refs = report.scan.refs
    partial_groups: set[str] = set()
    for job in report.registry.jobs.values():
        gid = group_id(job)
        need = events_needed(job.key.schedule)
        job_refs = [r for r in refs if r.kind == "job" and r.target == job.id]
        group_refs = [r for r in refs if r.kind == "group" and r.target == gid]
        files = sorted({t.node_id.split("::")[0] for t in job.tests})
        live_job = [r for r in job_refs if not r.masks and r.events_for(files) & need]
        live_group = [r for r in group_refs if not r.masks and r.events_for(files) & need]
        key = _key_fields(job)
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
                report.add("dormant-suite",
                           f"PARTIAL group {gid}: {', '.join(places)} run(s) shards {group_have} of {group_n}: "
                           f"shard(s) {missing} never run ({len(plan.get(gid, (0, []))[1])} job(s) affected)",
                           hardware=job.key.hardware, schedule=job.key.schedule, suite=f"group shards {missing}",
                           state="partial")
            continue
        if live_job:
            missing = sorted(set(range(1, (job_n or 1) + 1)) - set(job_have))
            places = sorted({f"{r.workflow}:{r.wf_job}" for r in live_job})
            verb = "runs" if len(places) == 1 else "run"
            report.add("dormant-suite", f"PARTIAL {job.id}: {', '.join(places)} {verb} shards {job_have} of {job_n}: "
                       f"shard(s) {missing} never run", state="partial", **key)
            continue
        where = job.tests[0].where
        need_text = "a schedule" if job.key.schedule == "nightly" else "pull_request/push"
        seen = job_refs + group_refs
        detail = (f"only referenced by {describe_steps(seen, files, undecided=UNDECIDED)}" if seen else
                  f"no workflow job runs it (as --job {job.id} or --group {gid})")
        report.add("dormant-suite", f"DORMANT {job.id} ({len(job.tests)} registration(s), first at {where}): "
                   f"needs a workflow triggered by {need_text}; {detail}", state="dormant", **key)


def _key_fields(job: Job) -> dict[str, str]:
    """The baseline key of a finding about one job: hardware, suite (with its variant), schedule."""
    suite = job.key.suite + (f"@{job.key.variant}" if job.key.variant else "")
    return {"hardware": job.key.hardware, "suite": suite, "schedule": job.key.schedule}


def _runner_problem(report: AuditReport, ref: StepRun, label: str) -> str | None:
    """The workflow job must ask for the runner labels the catalog gives the hardware it runs."""
    hardware = report.registry.catalog.hardware.get(label)
    asked = report.scan.runs_on.get((ref.workflow, ref.wf_job), ())
    if hardware is None or any("${{" in a for a in asked) or set(hardware.runs_on) <= set(asked):
        return None
    return (f"{ref.workflow}:{ref.wf_job}: runs {ref.kind} {ref.target} on runs-on {list(asked)}, but "
            f"{report.registry.catalog.path} gives {label} the runner(s) {list(hardware.runs_on)}")


def rule_unknown_refs(report: AuditReport, plan: dict[str, tuple[int, list[str]]]) -> None:
    for problem in report.scan.problems:
        report.add("unknown-suite", problem, **problem_key(problem, report.scan))
    for ref in report.scan.refs:
        label = ref.target.split("/")[1] if ref.target.count("/") >= 1 else ""
        problem = _runner_problem(report, ref, label)
        if problem:
            report.add("runner-mismatch", problem, hardware=label, suite=ref.target)
    for ref in report.scan.refs:
        place = f"{ref.workflow}:{ref.wf_job}"
        if ref.kind == "job":
            try:
                parse_job_id(ref.target)
            except ValueError as exc:
                report.add("unknown-suite", f"{place}: {exc}", suite=ref.target)
                continue
            if ref.target not in report.registry.jobs:
                report.add("unknown-suite",
                    f"{place}: --job {ref.target} is not a registered job "
                    "(renamed or removed suite? regenerate with nox -s workflows)", suite=ref.target)
        elif ref.kind == "group":
            if ref.target not in plan:
                report.add("unknown-suite",
                    f"{place}: --group {ref.target} is not a registered group; groups: {sorted(plan)}",
                    suite=ref.target)
            elif ref.shard is not None and ref.shard[1] != plan[ref.target][0]:
                report.add("unknown-suite",
                    f"{place}: --group {ref.target} --shard {ref.shard[0]}/{ref.shard[1]}, but the plan splits "
                    f"{ref.target} into {plan[ref.target][0]} shard(s) (regenerate with nox -s workflows)",
                    suite=f"{ref.target} --shard {ref.shard[0]}/{ref.shard[1]}")


# ----------------------------------------------------------------- (c), (d), (e)
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
            report.add("ungated-value",
                f"gate {gate}={value} is exercised only by nightly jobs {nightly}: add a per-commit job "
                f"or variant that runs with {GATES[gate].env_var}={value}{hint}", suite=f"{gate}={value}")
        else:
            report.add("ungated-value",
                f"gate {gate}={value} is exercised by no job: add a per-commit job or variant that runs "
                f"with {GATES[gate].env_var}={value}", suite=f"{gate}={value}")


NATIVE_GPU_BACKEND = "triton"
INTERPRETED = {"TRITON_INTERPRET": "1"}


def kernel_backend(env: dict[str, str], is_gpu: bool) -> str:
    """The kernel backend a job's env selects (the interpreter when TRITON_INTERPRET=1)."""
    chosen = env.get("DSPARK_KERNEL_BACKEND") or (NATIVE_GPU_BACKEND if is_gpu else "triton-interpret")
    if chosen == "triton" and any(env.get(k) == v for k, v in INTERPRETED.items()):
        return "triton-interpret"
    return chosen


def kernel_backend_shown(job: Job) -> str:
    """The job table's backend column: the backend, marked ``(variant)`` when a variant chose it."""
    value = kernel_backend(job.full_env(), job.hardware.is_gpu)
    chosen = job.key.variant and kernel_backend(dict(job.env), job.hardware.is_gpu) == value and (
        "DSPARK_KERNEL_BACKEND" in job.env or any(k in job.env for k in INTERPRETED))
    return f"{value} (variant {job.key.variant})" if chosen else value


def rule_native_gpu_backend(report: AuditReport) -> None:
    """A GPU label's jobs run the native compiled backend unless a variant says otherwise."""
    catalog = report.registry.catalog
    for label, hw in catalog.hardware.items():
        if not hw.is_gpu:
            continue
        value = kernel_backend(dict(hw.env), True)
        if value != NATIVE_GPU_BACKEND:
            report.add("non-native-gpu-backend",
                       f"{catalog.path}: {label} is a GPU label ({hw.gpus} GPU(s)) whose env selects the {value} "
                       f"kernel backend: every job on it would test the fallback on real hardware while attestation "
                       f"says OK; drop it from the label's env, or give a variant that says so "
                       f"(variants: {{name: {{env: {{DSPARK_KERNEL_BACKEND: {value}}}}}}})",
                       hardware=label, suite="*", schedule="*", locations=(Location(str(catalog.path), 0),))


def rule_suite_typos(report: AuditReport, declared: list[str]) -> None:
    """A one-test suite within edit distance 2 of a bigger suite of the same hardware and schedule."""
    from ci.registry.suite_names import near_names

    jobs = report.registry.jobs
    sizes: dict[str, int] = {}
    for j in jobs.values():   # a suite's size counts its variants' tests too
        key = f"{j.key.schedule}/{j.key.hardware}/{j.key.suite}"
        sizes[key] = sizes.get(key, 0) + len(j.tests)
    for suspect, meant, distance in near_names(sizes, declared):
        job = next(j for j in jobs.values() if f"{j.key.schedule}/{j.key.hardware}/{j.key.suite}" == suspect)
        test = job.tests[0]
        report.add("suite-name-typo",
                   f"{test.where}: suite {job.key.suite!r} ({sizes[suspect]} test(s)) is {distance} edit(s) from "
                   f"{meant.split('/', 2)[2]!r} ({sizes[meant]} test(s)) on {job.key.schedule}/{job.key.hardware}: "
                   f"a typo makes a new one-test job (declare it in {CATALOG_PATH} defaults.declared_suites)",
                   severity="warning", why_unproven="a name this close may be intended (declare it to say so)",
                   hardware=job.key.hardware, suite=job.key.suite, schedule=job.key.schedule)


def declared_suites(root: str | Path) -> list[str]:
    """``defaults.declared_suites`` in ci/hardware.yaml: suite names that are close to another on purpose."""
    try:
        data = load_yaml(read_inside(root, Path(root) / CATALOG_PATH)) or {}
    except (UnreadableFile, yaml.YAMLError):
        return []
    value = (data.get("defaults") or {}).get("declared_suites") or []
    return [str(v) for v in value] if isinstance(value, list) else []


def rule_unregistered(report: AuditReport) -> None:
    for test in report.registry.collection.unregistered:
        report.add("unregistered-test",
            f"{test.file}:{test.line}: {test.node_id} belongs to no suite (decorate it with @register(...))",
            suite=test.node_id)


OP_TABLE_NAMES = {"op_table", "registered.op_table", "impl.testing.op_table"}


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
    op_table_used = any(OP_TABLE_NAMES & collection.mentions.get(rel, frozenset()) for rel in per_commit_files)
    tables = [p for p in OP_TABLE_PATHS if (root / p).is_file()]
    if op_table_used:
        for table in tables:
            mentioned |= names_mentioned(ast.parse(read_inside(root, root / table)))
    shown = " or ".join(OP_TABLE_PATHS)
    for op in ops:
        if op not in refs:
            report.add("op-without-reference", f"op {op}: reference/__init__.py exports no {op!r}",
                       suite=f"{op}: reference")
        if op not in mentioned:
            report.add("op-without-reference",
                f"op {op}: no per-commit registered test file (nor the op table, {shown}, used by one) mentions it",
                suite=f"{op}: per-commit test")


# ----------------------------------------------------------------- (f), (h), (i)
def rule_disabled(report: AuditReport, today: dt.date, horizon: int) -> None:
    for reg in report.registry.disabled:
        info = reg.disabled or {}
        label = f"{reg.where}: {reg.node_id} disabled in {reg.schedule} {reg.suite}"
        if not str(info.get("reason", "")).strip():
            report.add("disabled-without-reason", f"{label}: no reason", suite=f"{reg.node_id}: reason",
                       schedule=reg.schedule)
        problem = check_until(info.get("until"), today, horizon)
        if problem:
            suffix = f" (reason: {info.get('reason', '')!r}); fix the test or renew the date" \
                if problem.startswith("expired") else ""
            report.add("disabled-without-reason", f"{label}: {problem}{suffix}", suite=f"{reg.node_id}: until",
                       schedule=reg.schedule)
        report.debt_rows.append((reg.node_id, "disabled", info.get("reason", "") or "-", "-",
                                 info.get("until", "-"), reg.where))


def rule_skips(report: AuditReport, table: SkipTable, today: dt.date, horizon: int) -> None:
    report.extend("skip-debt", table.problems)
    for reason in table.reasons.values():
        if not reason.unconditional:
            continue
        label = f"registered/skips.py:{reason.line}: skip reason {reason.key!r} can skip on any machine"
        if not str(reason.owner or "").strip():
            report.add("skip-debt", f"{label}: no `owner`", suite=f"{reason.key}: owner")
        problem = check_until(reason.until, today, horizon)
        if problem:
            report.add("skip-debt", f"{label}: {problem}", suite=f"{reason.key}: until")


def rule_impossible(report: AuditReport, table: SkipTable, uses: dict[str, list]) -> None:
    catalog = report.registry.catalog
    seen_debt: set[tuple[str, str]] = set()
    for reg in report.registry.collection.registrations:
        if reg.disabled is not None:
            continue
        node_uses = uses.get(reg.node_id, [])
        for use in node_uses:
            if use.unregistered and not use.always:
                whom = f"every test of {use.node_id}" if "::" not in use.node_id else reg.node_id
                message = (f"{use.where}: {use.how} skips {whom} without a registered reason: the runner "
                           "fails the job when it does (use registered_skip(key) / a marker from registered/skips.py)")
                if use.unknown_key is not None:
                    message = (f"{use.where}: {use.how} skips {whom} with skip key {use.unknown_key!r}, which "
                               "registered/skips.py does not declare: add it to SKIP_REASONS in registered/skips.py "
                               "(text and skips_when), or use an existing key")
                report.add("impossible-test", message, suite=reg.node_id)
                continue
            if use.key is None and not use.always:
                continue
            reason = table.reasons.get(use.key) if use.key else None
            if (reg.node_id, use.where) in seen_debt:
                continue
            seen_debt.add((reg.node_id, use.where))
            if use.always:
                report.add("impossible-test",
                    f"{use.where}: {reg.node_id}: {use.how} skips it unconditionally: it never runs "
                    "(register it with disabled={'reason': ..., 'until': ...} instead)", suite=reg.node_id)
                continue
            if reason is None:
                continue
            when = reason.skips_when if reason.skips_when != "gpus<N" else f"gpus<{use.arg}"
            report.debt_rows.append((reg.node_id, f"skip {reason.key}", reason.text, reason.owner or "-",
                                     reason.until or f"when {when}", use.where))
            labels = [catalog.hardware[h] for h in reg.hardware if h in catalog.hardware]
            if labels and all(condition_skips(reason.skips_when, hw.gpus, hw.vendor, use.arg) for hw in labels) \
                    and not reason.unconditional:
                report.add("impossible-test",
                    f"{reg.where}: {reg.node_id} is registered only for {list(reg.hardware)}, where {use.how} "
                    f"({use.where}) always skips it ({reason.key}: skips when {when}): it can never run",
                    suite=reg.node_id)


def rule_retries(report: AuditReport) -> None:
    for reg in report.registry.collection.registrations:
        if getattr(reg, "retries", 0):
            report.retry_rows.append((reg.node_id, f"{reg.schedule}/{','.join(reg.hardware)}/{reg.suite}",
                                      reg.retries, reg.where))


def rule_masked(report: AuditReport) -> None:
    for masked in report.scan.masked:   # keyed by what the step runs, never by its job or step name
        report.add("masked-step", f"MASKED {masked}", **masked_key(masked, report.scan))
    if any(r.kind in ("job", "group") for r in report.scan.refs) and _uses_nox(report.registry.root):
        report.extend("masked-step", [f"MASKED {p}" for p in suite_session_problems(report.registry.root)])


def _uses_nox(root: Path) -> bool:
    """Whether a workflow mentions nox (an unreadable one is reported by unreadable-input, not read here)."""
    for path in workflow_files(root):
        try:
            if "nox" in read_inside(root, path, MAX_WORKFLOW_BYTES):
                return True
        except UnreadableFile:
            continue
    return False


def rule_parity(report: AuditReport, collected: list[str] | None) -> None:
    if collected is None:
        report.skipped_rules["collection-parity"] = ("not checked here (python -m ci.audit --pytest-collection; "
                                     "the per-commit ci job runs it)")
        return
    from ci.audit.parity import compare

    registered = {}
    for reg in report.registry.collection.registrations:
        registered.setdefault(reg.node_id, reg.where)
    report.extend("collection-parity", compare(collected, registered, report.registry.root))


def run_audit(root: str | Path = ".", *, today: dt.date | None = None,
              collected: list[str] | None = None) -> AuditReport:
    """Audit the repository at ``root``; ``collected``: pytest's node ids, for rule collection-parity."""
    registry = load_registry(root)
    today = today or dt.date.today()
    horizon = until_horizon_days(registry.root)
    report = AuditReport(registry=registry, scan=scan_workflows(registry.root, "dspark"))
    plan = group_plan(registry)
    table = load_skip_table(registry.root)
    uses = skip_uses(registry.root, registry.collection.test_files, table)
    report.add_input_findings(report.scan.input_findings)
    rule_dormant(report, plan)
    rule_unknown_refs(report, plan)
    rule_gates(report)
    rule_native_gpu_backend(report)
    rule_suite_typos(report, declared_suites(registry.root))
    rule_unregistered(report)
    rule_ops(report)
    rule_disabled(report, today, horizon)
    rule_masked(report)
    rule_skips(report, table, today, horizon)
    rule_impossible(report, table, uses)
    rule_retries(report)
    rule_parity(report, collected)
    refs = report.scan.refs
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
