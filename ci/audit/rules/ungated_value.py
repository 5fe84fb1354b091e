"""ungated-value: every gate value (impl/gates.py) is exercised by a per-commit job (own audit only).

``own(report)``: each gate value's per-commit and nightly jobs (the gate table), a finding when no
per-commit job runs with it. Gate rules apply only to this project: an adapter declares no gates.
"""
from __future__ import annotations

from ci.audit.findings import Rule
from ci.registry.jobs import Job
from impl.gates import GATES

RULE = Rule(
    "ungated-value",
    "every gate value is exercised by a per-commit job",
    "a code path (a backend, a platform) only nightly or never tested",
    "no per-commit job runs with DSPARK_KERNEL_BACKEND=torch",
    "error   [ungated-value] gate kernel_backend=torch is exercised by no job",
)


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


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport`` (fills ``gate_rows``)."""
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
            report.add(RULE.id,
                f"gate {gate}={value} is exercised only by nightly jobs {nightly}: add a per-commit job "
                f"or variant that runs with {GATES[gate].env_var}={value}{hint}", suite=f"{gate}={value}")
        else:
            report.add(RULE.id,
                f"gate {gate}={value} is exercised by no job: add a per-commit job or variant that runs "
                f"with {GATES[gate].env_var}={value}", suite=f"{gate}={value}")
