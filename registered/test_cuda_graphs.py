"""The one CUDA-graph capture routine (impl/cuda_graphs.py): argument errors and the non-CUDA
error on any machine; on a GPU, the warm-up and capture counts and the captured output."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.cuda_graphs import capture_graph
from impl.pools import UnifiedKVPool
from impl.verify_step import VerifyStep
from registered.skips import requires_gpu
from registered.spec_fixtures import small_config


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_capture_arguments_are_checked_before_cuda_is_touched():
    calls = []

    def fn():
        calls.append(1)

    with pytest.raises(TypeError, match="fn must be callable, got int"):
        capture_graph(3, device="cuda", warmup=1)
    for kw, msg in (({"warmup": -1}, "warmup must be an int >= 0, got -1"),
                    ({"warmup": 1.5}, "warmup must be an int >= 0, got 1.5"),
                    ({"warmup": True}, "warmup must be an int >= 0, got True"),
                    ({"warmup": 1, "calls": 0}, "calls must be an int >= 1, got 0"),
                    ({"warmup": 1, "calls": "2"}, "calls must be an int >= 1, got '2'")):
        with pytest.raises(ValueError, match=msg):
            capture_graph(fn, device="cuda", **kw)
    for device in ("cpu", torch.device("cpu"), "meta"):
        with pytest.raises(ValueError, match=r"CUDA graph capture needs a CUDA device, got device='(cpu|meta)'"):
            capture_graph(fn, device=device, warmup=0)
    assert calls == []  # refused before any warm-up call


@register(suite="foundation", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_verify_step_on_a_cpu_pool_refuses_to_capture():
    cfg = small_config(gamma=3)
    pool = UnifiedKVPool(cfg, num_layers=1, device="cpu")
    step = VerifyStep(pool, batch_size=2, norm_weight=torch.ones(cfg.head_dim, dtype=torch.bfloat16), eps=1e-6,
                      cos=torch.ones(8, cfg.rope_dim), sin=torch.zeros(8, cfg.rope_dim), platform="cuda",
                      algorithm="dspark")
    with pytest.raises(ValueError, match="CUDA graph capture needs a CUDA device, got device='cpu'"):
        step.capture()
    with pytest.raises(ValueError, match="warmup must be an int >= 0, got -2"):
        step.capture(warmup=-2)
    with pytest.raises(RuntimeError, match=r"call capture\(\) before replay\(\)"):
        step.replay()  # a refused capture leaves no graph behind


@register(suite="components-gpu", hardware="h200-1", schedule="per-commit", est_time=5)
@requires_gpu()
def test_capture_warms_up_then_captures_calls_and_returns_the_last_output():
    x = torch.zeros(4, device="cuda")
    seen = []

    def fn():
        seen.append(torch.cuda.current_stream())
        return x.add_(1)

    before = torch.cuda.current_stream()
    graph, out = capture_graph(fn, device="cuda", warmup=2, calls=3)
    torch.cuda.synchronize()
    assert x.tolist() == [2.0] * 4  # the warm-up ran twice; captured calls do not run
    assert len(seen) == 5 and all(s != before for s in seen)  # warm-up on a side stream, capture too
    assert out is x
    graph.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [5.0] * 4  # one replay = the three captured calls
    graph2, _ = capture_graph(fn, device=torch.device("cuda"), warmup=0, synchronize=True)
    graph2.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [6.0] * 4 and len(seen) == 6
