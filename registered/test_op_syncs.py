"""Sync contract of every op (docs/design.md §4): graph-safe ops never sync, the others exactly as intended.

The counts come from ``impl.sync_detector.count_syncs`` (works on CPU), so the
detector itself is pinned too: each op kind it claims to catch is caught, and
our own check-mode value checks show up as syncs. On CUDA the graph-safe ops
also run under ``torch.cuda.set_sync_debug_mode("error")``.
"""
from __future__ import annotations

import pytest
import torch

import impl.kernels as K
from ci.registration import register
from impl.platform import default_device
from impl.sync_detector import count_syncs
from impl.testing.op_table import case_id, cases, clone_kwargs, expected_syncs, run_op
from impl.validation import check_mode
from registered.schedule import repeated_cases
from registered.skips import requires_gpu

CASES = cases(large=False)
# per commit on cpu a covering subset (registered/schedule.py); the GPU jobs and the nightly cpu job run every sample
SYNC_CASES = repeated_cases(CASES, "syncs")


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=16)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=60)
@pytest.mark.parametrize("case", SYNC_CASES, ids=case_id)
@pytest.mark.usefixtures("kernel_backend")
def test_op_sync_count_is_exact(case):
    """Graph-safe ops (and graph-safe samples) record 0 syncs; eager paths exactly their intended count."""
    op, sample = case
    kwargs = clone_kwargs(sample.make(default_device()))
    with check_mode(False), count_syncs() as log:
        run_op(op, op.impl, kwargs)
    assert log.count == expected_syncs(op, sample), log.kinds()
    if op.graph_safe and sample.syncs is None:
        assert log.count == 0


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_eager_paths_sync_by_repeat_interleave_only():
    """The one sync of the eager paths is the documented repeat_interleave without output_size."""
    e = torch.tensor([2, 0, 3], device=default_device())
    with count_syncs() as log:
        K.prefill_inject_meta(torch.arange(3, device=e.device), e, e)
        K.expand_prefill_causally(e + 1, e, torch.arange(3, device=e.device))
    assert log.kinds() == ["repeat_interleave without output_size"] * 2


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_check_mode_value_checks_are_counted():
    """Check mode reads device memory: the detector must see it (so '0 syncs' above is meaningful)."""
    dev = default_device()
    kv, unified = torch.randn(4, 8, device=dev), torch.zeros(8, 8, device=dev)
    loc = torch.tensor([0, 3, -1, 5], device=dev)
    with count_syncs() as quiet:
        K.scatter_into_unified(kv, loc, unified)
    with count_syncs() as checked:
        K.scatter_into_unified(kv, loc, unified, check=True)
    assert quiet.count == 0 and checked.count > 0


def _sync_examples():
    t = torch.tensor([3, 0, 2, 1])
    return {
        "item": lambda: t.sum().item(),
        "nonzero": lambda: t.nonzero(),
        "boolean-mask indexing": lambda: t[t > 0],
        "masked_select": lambda: torch.masked_select(t, t > 1),
        "repeat_interleave without output_size": lambda: torch.repeat_interleave(t),
        "unique": lambda: torch.unique(t),
        "tolist": lambda: t.tolist(),
    }


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("kind", sorted(_sync_examples()))
def test_detector_catches_each_sync_kind(kind):
    with count_syncs() as log:
        _sync_examples()[kind]()
    assert kind in log.kinds(), log.kinds()


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_detector_ignores_repeat_interleave_with_output_size():
    t = torch.tensor([3, 0, 2])
    with count_syncs() as log:
        torch.repeat_interleave(torch.arange(3), t, output_size=5)
    assert log.count == 0


@register(suite="kernels", hardware=["h200-1"], schedule="per-commit", est_time=20)
@requires_gpu()
@pytest.mark.parametrize("case", [c for c in cases(large=True) if c[0].graph_safe and c[1].syncs is None], ids=case_id)
def test_graph_safe_ops_pass_cuda_sync_debug_mode(case):
    """On CUDA the graph-safe ops run with set_sync_debug_mode('error'): any implicit sync raises."""
    op, sample = case
    kwargs = clone_kwargs(sample.make(torch.device("cuda")))
    run_op(op, op.impl, clone_kwargs(kwargs))  # warm-up: Triton compiles outside the guarded region
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with check_mode(False):
            run_op(op, op.impl, kwargs)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
