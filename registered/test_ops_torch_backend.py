"""The torch fallback (kernel_backend gate = "torch") matches the oracle on every sample,
and each backend really runs the code path it names (the other one is booby-trapped)."""
from __future__ import annotations

import pytest

import impl.kernels.norm_rope
import impl.kernels.renorm.kernels
import impl.kernels.renorm.torch_path
import impl.kernels.scatter
from ci.registration import register
from impl.platform import default_device, kernel_backend
from impl.testing.op_table import case_id, cases, sample_mismatches

TRITON_CASES = [c for c in cases(large=False) if "triton" in c[0].tags]
# (module, Triton kernel or None, torch fallbacks) per kernel file: the module each name is read from
PATHS = [
    (impl.kernels.scatter, "_scatter_rows_kernel", ["_scatter_torch"]),
    (impl.kernels.norm_rope, "_norm_rope_kernel", ["_norm_rope_torch"]),
    (impl.kernels.renorm.kernels, "_pass_kernel", []),
    (impl.kernels.renorm.torch_path, None, ["_top_k_torch", "_top_p_torch"]),  # read there by the API
]


class _Trap:
    def __init__(self, what: str):
        self.what = what

    def __getitem__(self, grid):
        raise AssertionError(f"{self.what} ran, but the gate selected the other backend")

    def __call__(self, *args, **kwargs):
        raise AssertionError(f"{self.what} ran, but the gate selected the other backend")


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("case", TRITON_CASES, ids=case_id)
def test_torch_fallback_matches_reference(case, monkeypatch):
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    for module, kernel, _ in PATHS:
        if kernel is not None:
            monkeypatch.setattr(module, kernel, _Trap(f"Triton kernel {kernel}"))
    problems = sample_mismatches(*case, default_device())
    assert not problems, problems


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("case", TRITON_CASES, ids=case_id)
def test_default_backend_runs_triton(case, monkeypatch):
    """On CPU (interpreter) and on a GPU the data-moving ops run their Triton kernels, not torch."""
    assert kernel_backend() in ("triton", "triton-interpret")
    for module, _, fallbacks in PATHS:
        for name in fallbacks:
            monkeypatch.setattr(module, name, _Trap(f"torch fallback {name}"))
    problems = sample_mismatches(*case, default_device())
    assert not problems, problems


FALLBACKS = [(module, name) for module, _, names in PATHS for name in names]
FIRST_CASES = list({op.name: (op, sample) for op, sample in reversed(TRITON_CASES)}.values())  # one sample per op


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("module, name", FALLBACKS, ids=[f"{m.__name__}.{n}" for m, n in FALLBACKS])
def test_each_trapped_fallback_is_the_name_its_op_reads(module, name, monkeypatch):
    """A trap set where no op reads the name (a package re-export, a name an importer bound to itself)
    would let test_default_backend_runs_triton pass whatever runs: under the torch gate, some op's
    first sample must walk into each trapped fallback."""
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    monkeypatch.setattr(module, name, _Trap(f"torch fallback {name}"))
    for case in FIRST_CASES:
        try:
            sample_mismatches(*case, default_device())
        except AssertionError as exc:
            if name in str(exc):
                return
    pytest.fail(f"no op sample ran {module.__name__}.{name} under the torch backend: the trap is not the name it reads")
