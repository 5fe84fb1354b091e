"""End to end on a GPU with DeepSeek-V4's KV geometry (head_dim 512, rope 64, window 128, gamma 5):
lossless against the reference decoder for both algorithms and KV backends, and CUDA-graph
verify decode produces the same tokens as eager."""
from __future__ import annotations

import pytest

from ci.registration import register
from impl.engine.run import run_case
from impl.model.tiny_config import dsv4_geometry
from impl.run_options import RunOptions
from registered.skips import requires_gpu

GAMMA = 5


@register(suite="e2e-gpu", hardware="h200-1", schedule="per-commit", est_time=240)
@register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=600)
@requires_gpu()
@pytest.mark.parametrize("kv_backend", ["unified", "paged"])
@pytest.mark.parametrize("algorithm", ["dspark", "mtp"])
def test_gpu_lossless_dsv4_geometry(algorithm, kv_backend):
    cfg = dsv4_geometry()
    for draft in ("model", "noisy:0.3"):
        res = run_case(cfg, RunOptions.resolve(algorithm=algorithm, gamma=GAMMA, kv_backend=kv_backend, batch=6,
                                               num_slots=4, draft=draft, max_new_tokens=24, seed=1, checked=True,
                                               device="cuda"))
        assert res.min_margin > 1e-3, f"near-tie in the reference (margin {res.min_margin})"
        assert res.lossless, f"{draft}: mismatches {res.mismatches}"
        assert max(len(r.prompt) for r in res.engine.finished.values()) > 2 * cfg.window


@register(suite="e2e-gpu", hardware="h200-1", schedule="per-commit", est_time=120)
@register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=300)
@requires_gpu()
@pytest.mark.parametrize("kv_backend", ["unified", "paged"])
@pytest.mark.parametrize("algorithm", ["dspark", "mtp"])
def test_graph_decode_matches_eager(algorithm, kv_backend):
    cfg = dsv4_geometry()
    options = RunOptions.resolve(algorithm=algorithm, gamma=GAMMA, kv_backend=kv_backend, batch=6, num_slots=4,
                                 draft="noisy:0.3", max_new_tokens=24, seed=2, device="cuda")
    eager = run_case(cfg, options)
    graph = run_case(cfg, options.replace(graph=True))
    assert graph.engine.graph_runner.replays == graph.engine.step_index - sum(
        1 for r in graph.engine.records if not r.verified)
    assert len(graph.engine.graph_runner.graphs) >= 2, "batch sizes should hit more than one captured tier"
    assert graph.outputs == eager.outputs
    assert graph.lossless and eager.lossless
