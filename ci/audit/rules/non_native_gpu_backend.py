"""non-native-gpu-backend: a GPU label's jobs run the native compiled backend unless a variant says otherwise.

``own(report)``: each GPU label of the catalog whose env selects another kernel backend.
``kernel_backend`` is also the own audit's job table's backend column (``ci.audit.own``).
"""
from __future__ import annotations

from ci.audit.findings import Location, Rule

RULE = Rule(
    "non-native-gpu-backend",
    "a GPU label's jobs run the native compiled backend unless a variant says otherwise",
    "a GPU runner testing the torch fallback (or the interpreter) while attestation says OK",
    "ci/hardware.yaml: h200: env: {DSPARK_KERNEL_BACKEND: torch}",
    "error   [non-native-gpu-backend] ci/hardware.yaml: h200 (a GPU label) sets DSPARK_KERNEL_BACKEND=torch ...",
)


NATIVE_GPU_BACKEND = "triton"
INTERPRETED = {"TRITON_INTERPRET": "1"}


def kernel_backend(env: dict[str, str], is_gpu: bool) -> str:
    """The kernel backend a job's env selects (the interpreter when TRITON_INTERPRET=1)."""
    chosen = env.get("DSPARK_KERNEL_BACKEND") or (NATIVE_GPU_BACKEND if is_gpu else "triton-interpret")
    if chosen == "triton" and any(env.get(k) == v for k, v in INTERPRETED.items()):
        return "triton-interpret"
    return chosen


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    catalog = report.registry.catalog
    for label, hw in catalog.hardware.items():
        if not hw.is_gpu:
            continue
        value = kernel_backend(dict(hw.env), True)
        if value != NATIVE_GPU_BACKEND:
            report.add(RULE.id,
                       f"{catalog.path}: {label} is a GPU label ({hw.gpus} GPU(s)) whose env selects the {value} "
                       f"kernel backend: every job on it would test the fallback on real hardware while attestation "
                       f"says OK; drop it from the label's env, or give a variant that says so "
                       f"(variants: {{name: {{env: {{DSPARK_KERNEL_BACKEND: {value}}}}}}})",
                       hardware=label, suite="*", schedule="*", locations=(Location(str(catalog.path), 0),))
