"""Every docs/design.md §3 op equals its oracle on every sample of the op table (default backend).

In-place outputs start poisoned (random bits, NaN/inf included), so a forgotten
or extra write is a mismatch; untouched rows are compared bit for bit.
"""
from __future__ import annotations

import inspect

import pytest
import torch

import impl.kernels
import reference
from ci.registration import register
from impl.platform import default_device
from impl.testing.op_table import OPS, case_id, cases, clone_kwargs, run_op, sample_mismatches
from reference.bits import bits_view
from registered.schedule import repeated_cases, variant

CASES = cases(large=False)
ROW_CASES = [c for c in CASES if c[0].written_rows is not None]
# per commit on cpu, the paths that repeat samples run a covering subset (registered/schedule.py); every sample of
# a Triton op still runs there on the default backend in test_ops_torch_backend.test_default_backend_runs_triton
GATES_PATH = f"gates[{variant()}]" if variant() in ("torch", "interpret", "check-on") else "reference"


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=8)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=120)
@pytest.mark.parametrize("case", repeated_cases(CASES, "reference"), ids=case_id)
def test_impl_matches_reference(case):
    problems = sample_mismatches(*case, default_device(), check=False)
    assert not problems, problems


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=8)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=120)
@pytest.mark.parametrize("case", repeated_cases(CASES, "check-mode"), ids=case_id)
def test_check_mode_accepts_valid_inputs_and_changes_nothing(case):
    """Check mode must not reject valid samples nor alter results."""
    problems = sample_mismatches(*case, default_device(), check=True)
    assert not problems, problems


@register(suite="kernels-gates", hardware=["cpu"], schedule="per-commit", est_time=8,
          env={"torch": {"DSPARK_KERNEL_BACKEND": "torch"}, "interpret": {"DSPARK_KERNEL_BACKEND": "triton-interpret"},
               "check-on": {"DSPARK_CHECK": "on"}})
@register(suite="kernels-gates", hardware=["cpu"], schedule="nightly", est_time=120,
          env={"torch": {"DSPARK_KERNEL_BACKEND": "torch"}, "interpret": {"DSPARK_KERNEL_BACKEND": "triton-interpret"},
               "check-on": {"DSPARK_CHECK": "on"}})
@pytest.mark.parametrize("case", repeated_cases(CASES, GATES_PATH), ids=case_id)
def test_impl_matches_reference_under_job_gates(case):
    """No overrides: the job's gate variables (torch backend, interpreter, check mode on) decide the path."""
    problems = sample_mismatches(*case, default_device())
    assert not problems, problems


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("case", ROW_CASES, ids=case_id)
def test_untouched_rows_bitwise_unchanged(case):
    """Invariant 6: rows no kept loc points at keep their (poisoned) bits exactly."""
    op, sample = case
    kwargs = sample.make(default_device())
    before = kwargs[op.mutates].clone()
    (after,) = run_op(op, op.impl, clone_kwargs(kwargs))
    written = op.written_rows(kwargs)
    untouched = torch.tensor([r for r in range(before.shape[0]) if r not in written], dtype=torch.long)
    assert torch.equal(bits_view(after[untouched.to(after.device)]), bits_view(before[untouched.to(before.device)]))
    if written:  # the written rows did change (the poison was really overwritten)
        rows = torch.tensor(sorted(written), device=after.device)
        assert not torch.equal(bits_view(after[rows]), bits_view(before[rows]))


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_table_covers_every_op_with_random_and_edge_samples():
    """The table is the audit's list: each exported op appears, with several samples."""
    exported = set(impl.kernels.__all__) - {"select_token_tier"}
    assert {op.name for op in OPS} == exported
    for op in OPS:
        names = [s.name for s in op.samples(False)]
        assert len(names) >= 3 and len(set(names)) == len(names), op.name
        assert any("random" in n for n in names), f"{op.name} has no random sample"
        assert op.graph_safe == (op.syncs == 0), f"{op.name}: graph safe ops must expect 0 syncs"


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name", sorted(impl.kernels.__all__))
def test_reference_has_same_signature(name):
    impl_sig = inspect.signature(getattr(impl.kernels, name))
    ref_sig = inspect.signature(getattr(reference, name))
    assert [(p.name, p.kind, p.default) for p in impl_sig.parameters.values()] == [
        (p.name, p.kind, p.default) for p in ref_sig.parameters.values()
    ]
