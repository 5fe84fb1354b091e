"""Graph mode at any batch (issue 35): the captured sizes cover every step the slots allow, and a
step larger than the largest captured size runs eagerly and is counted -- never a mid-run error.

CPU CI cannot capture CUDA graphs, so these tests check the plan (torch-free), the ragged graph
layout a 16-slot step gets from it, and the runner's fallback with the capture left out; the GPU
suite (registered/test_e2e_gpu.py) runs batch 32 on 16 slots with graphs."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.engine.graph import VerifyGraphRunner
from impl.engine.graph_plan import derived_capture_sizes, parse_capture_sizes, plan_graphs
from impl.model.tiny_config import dsv4_geometry
from impl.verify_metadata import RaggedVerifyLayout


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("slots, sizes", [(1, (1,)), (6, (1, 2, 4, 6)), (8, (1, 2, 4, 8)), (16, (1, 2, 4, 8, 16)),
                                          (33, (1, 2, 4, 8, 16, 32, 33))])
def test_derived_sizes_cover_every_step_batch(slots, sizes):
    plan = plan_graphs(slots)
    assert derived_capture_sizes(slots) == plan.capture_batch_sizes == sizes
    assert all(plan.fits(b) for b in range(1, slots + 1)) and not plan.eager_batches


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_issue_35_step_fits_a_derived_tier():
    """32 requests on 16 slots, gamma 5: 96 verify rows. The old fixed sizes (1, 2, 4, 8) stopped at
    48 rows ("need=96 tokens exceeds the largest captured tier 48"); the derived ones reach 96."""
    cfg = dsv4_geometry()
    lens = torch.full((16,), cfg.gamma + 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="need=96 tokens exceeds the largest captured tier 48"):
        RaggedVerifyLayout.for_graph(lens, cfg.spec_config(cfg.gamma, 16))
    spec = cfg.spec_config(cfg.gamma, 16, capture_batch_sizes=plan_graphs(16).capture_batch_sizes)
    layout = RaggedVerifyLayout.for_graph(lens, spec)
    assert (layout.tier, layout.padded_bs) == (96, 16)


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_user_sizes_leave_larger_steps_to_eager():
    plan = plan_graphs(16, (8, 1, 4, 2, 4, 64))
    assert plan.capture_batch_sizes == (1, 2, 4, 8)  # sorted, deduplicated, 64 > 16 slots dropped
    assert list(plan.eager_batches) == list(range(9, 17)) and plan.fits(8) and not plan.fits(9)
    assert "steps with 9-16 requests run eagerly" in plan.describe()
    with pytest.raises(ValueError, match=r"every capture size in 32,64 exceeds the 16 slot\(s\) in flight"):
        plan_graphs(16, (32, 64))
    assert parse_capture_sizes(" 1, 2,8") == (1, 2, 8)
    for bad in ("", "0", "1,,2", "a", "-1"):
        with pytest.raises(ValueError, match="comma-separated positive integers"):
            parse_capture_sizes(bad)


class _EagerEngine:
    """What the runner needs from an engine to fall back: gamma and the eager verify forward."""

    gamma = 2

    def __init__(self):
        self.eager_calls = []

    def _verify_forward(self, tokens, prefix, slots):
        self.eager_calls.append(prefix.shape[0])
        return "eager-out", "eager-decision"


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_runner_runs_a_step_above_the_largest_size_eagerly_and_counts_it():
    runner = VerifyGraphRunner.__new__(VerifyGraphRunner)  # no capture on CPU: only the dispatch is tested
    eng = _EagerEngine()
    runner.engine, runner.plan, runner.replays, runner.eager_steps = eng, plan_graphs(16, (1, 2, 4, 8)), 0, 0
    runner.used_tiers, runner.graphs = set(), {}
    bs = 12
    out = runner.verify(torch.zeros(bs * 3, dtype=torch.int64), torch.zeros(bs, dtype=torch.int64),
                        torch.arange(bs))
    assert out == ("eager-out", "eager-decision") and runner.eager_steps == 1 and eng.eager_calls == [bs]
    assert runner.replays == 0
