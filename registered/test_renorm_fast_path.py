"""top_k / top_p renorm's eager fast path and the kernels' one bit test for bad values.

A GPU call like an earlier one (same gates, shapes, parameter kind, device, stream, tuning) skips
the full path's gate resolution and plan lookup: it checks what every call must and finds its
workspace in one index lookup. These tests prove it stays exact when values change in place,
declines (so the full path raises its usual errors) for every argument the full path refuses, and
steps aside under check mode, another kernel backend, a side stream and CUDA-graph capture. The
kernels test a probability's bits once (positive finite or weight 0): the edge bit patterns
(FLT_MAX, the smallest subnormal, -0.0, NaN payloads of either sign, +-inf) must weigh as decided.
"""
from __future__ import annotations

import struct

import pytest
import torch

import impl.kernels as K
import impl.kernels.renorm as renorm
from impl.kernels.renorm import fast_path, torch_path, workspace
import reference as R
from ci.registration import register
from impl.platform import default_device, use_kernel_backend
from impl.testing.op_table import RENORM, mismatch
from impl.validation import check_mode
from registered.skips import requires_gpu
from registered.threads import run_at_once

DEV = default_device()


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _edge_rows() -> torch.Tensor:
    """Row 0: FLT_MAX and its neighbour among small values; row 1: no mass but the smallest
    subnormals, beside -0.0, negative subnormals, NaN payloads of both signs and +-inf."""
    g = torch.Generator().manual_seed(5)
    rows = torch.rand(2, 12, generator=g) * 1e-3
    rows[0, 9] = _f32(0x7F7FFFFF)  # FLT_MAX: the largest finite, kept
    rows[0, 3] = _f32(0x7F7FFFFE)  # the two share the mass
    rows[1] = torch.tensor([_f32(b) for b in (0x00000001, 0x00000002, 0x80000000, 0x80000001, 0x807FFFFF,
                                              0x00000003, 0x7F800001, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFC00000,
                                              0x7F800000, 0xFF800000)])
    return rows


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("op", ["top_k", "top_p"])
def test_edge_bit_patterns_weigh_as_decided(op):
    """Positive finite entries (up to FLT_MAX, down to the smallest subnormal) keep their weight;
    -0.0, negative subnormals, NaN of any payload or sign and +-inf weigh 0 and are never kept:
    exactly the oracle's output."""
    probs = _edge_rows()
    fn, ref = (K.top_k_renorm, R.top_k_renorm) if op == "top_k" else (K.top_p_renorm, R.top_p_renorm)
    param = torch.tensor([2, 7]) if op == "top_k" else torch.tensor([0.9, 0.9])
    with check_mode(False):
        got = fn(probs.to(DEV), param.to(DEV)).cpu()
    want = ref(probs, param)
    assert not got.isnan().any(), "NaN in the output"
    assert got[0, 9] > 0.4 and got[0, 3] > 0.4, got[0]
    assert got[1, 0] > 0 and got[1, 5] > 0, f"a positive subnormal was dropped: {got[1]}"
    assert (got[1, 2:5] == 0).all() and (got[1, 6:12] == 0).all(), f"a bad entry was kept: {got[1]}"
    problem = mismatch(RENORM, got, want)
    assert problem is None, problem


def _probs(seed: int, bs: int, vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(bs, vocab, generator=g) * 3, -1)


def _want(probs: torch.Tensor, param, top_p: bool) -> torch.Tensor:
    bs = probs.shape[0]
    p = param if isinstance(param, torch.Tensor) else torch.full(
        (bs,), param, dtype=torch.float32 if top_p else torch.int64, device=probs.device)
    return (torch_path._top_p_torch if top_p else torch_path._top_k_torch)(probs, p)


def _exact(got: torch.Tensor, probs: torch.Tensor, param, top_p: bool, label: str) -> None:
    problem = mismatch(RENORM, got.cpu(), _want(probs, param, top_p).cpu())
    assert problem is None, f"{label}: {problem}"


def _prepared(top_p: bool, bs: int = 4, vocab: int = 8192):
    """Inputs whose calls the fast path takes (two full-path calls prepared them)."""
    probs = _probs(1, bs, vocab).cuda()
    param = (torch.rand(bs) * 0.9 + 0.05).cuda() if top_p else torch.randint(1, vocab, (bs,)).cuda()
    op = K.top_p_renorm if top_p else K.top_k_renorm
    for _ in range(3):
        op(probs, param)
    torch.cuda.synchronize()
    assert fast_path._fast_call(probs, param, top_p, None) is not None, "the fast path did not take a prepared call"
    return op, probs, param


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=10)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_fast_calls_read_fresh_values_and_count_their_replays(top_p):
    """Prepared calls (the fast path, graph replays) with rows and parameters rewritten in place, then
    scalar parameters, are exact; the workspace counts the replays the fast path made."""
    op, probs, param = _prepared(top_p)
    bs, vocab = probs.shape
    key = workspace._FAST_INDEX[(top_p, bs, vocab, workspace._specialization(0, probs, None, param),
                                 torch.cuda.current_stream().cuda_stream, id(renorm.DEFAULT_TUNING))][1]
    hits = workspace._WORKSPACES[key].hits
    for call in range(5):
        probs.copy_(_probs(10 + call, bs, vocab))
        param.copy_(torch.rand(bs) if top_p else torch.randint(1, vocab, (bs,)))
        _exact(op(probs, param), probs, param, top_p, f"call {call}")
    assert workspace._WORKSPACES[key].hits >= hits + 4, "the fast path's calls did not replay the graph"
    for scalar in ((0.3, 0.95, 0.3) if top_p else (1, 16, 5000, 1)):
        _exact(op(probs, scalar), probs, scalar, top_p, f"scalar {scalar}")
    torch.cuda.synchronize()


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=5)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_fast_path_declines_what_the_full_path_refuses(top_p):
    """After prepared calls, every bad argument still gets the full path's error naming it."""
    op, probs, param = _prepared(top_p)
    name = "p" if top_p else "k"
    bad_params = [param.double() if not top_p else param.half(), param[:-1], param.cpu(), param.view(-1, 1),
                  param.repeat(2)[::2], True]
    for bad in bad_params:
        with pytest.raises((TypeError, ValueError), match=rf"^{name} must"):
            op(probs, bad)
    for bad in (probs.t(), probs.half(), probs[0], probs.cpu().double()):
        with pytest.raises((TypeError, ValueError), match="^probs must"):
            op(bad, param)
    if top_p:
        with pytest.raises(ValueError, match="p must not be NaN"):
            op(probs, float("nan"))
    with pytest.raises(TypeError, match="^tuning must"):
        op(probs, param, tuning="fast")


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=10)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_fast_path_steps_aside_for_checks_backends_streams_and_capture(monkeypatch, top_p):
    """After prepared calls: check mode still scans the values (a NaN raises), the torch backend
    gate still runs torch, a side stream gets its own workspace and exact results, and a call
    captured into a CUDA graph keeps its own buffers (replays exact after the inputs change)."""
    op, probs, param = _prepared(top_p)
    bad = probs.clone()
    bad[1, 7] = float("nan")
    with check_mode(True), pytest.raises(ValueError, match="probs must be finite"):
        op(bad, param)
    name = "_top_p_torch" if top_p else "_top_k_torch"
    torch_calls = []
    real = getattr(torch_path, name)
    monkeypatch.setattr(torch_path, name, lambda *a: torch_calls.append(1) or real(*a))
    with use_kernel_backend("torch"):
        assert fast_path._fast_call(probs, param, top_p, None) is not None  # the index alone would take it
        got = op(probs, param)
    monkeypatch.setattr(torch_path, name, real)
    assert torch_calls, "the torch backend gate was ignored"
    _exact(got, probs, param, top_p, "torch backend")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        outs = [op(probs, param) for _ in range(4)]
        assert fast_path._fast_call(probs, param, top_p, None) is not None
    torch.cuda.current_stream().wait_stream(side)
    for i, got in enumerate(outs):
        _exact(got, probs, param, top_p, f"side stream call {i}")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = op(probs, param)
    fresh = _probs(99, *probs.shape).cuda()
    probs.copy_(fresh)
    graph.replay()
    eager = op(probs, param)
    torch.cuda.synchronize()
    _exact(captured, fresh, param, top_p, "graph replay")
    _exact(eager, fresh, param, top_p, "eager call after the capture")


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=10)
@requires_gpu()
def test_two_threads_on_the_fast_path_stay_exact():
    """Two threads make prepared calls of one plan at once (one stream: one index entry): each call
    takes its workspace out while it launches, so neither ever launches on the other's."""
    _, probs, param = _prepared(False)
    inputs = [(_probs(40 + i, *probs.shape).cuda(), param.clone()) for i in range(2)]

    def work(tid: int) -> None:
        mine = inputs[tid]
        outs = [K.top_k_renorm(*mine) for _ in range(30)]
        torch.cuda.synchronize()
        for i, got in enumerate(outs[::7]):
            _exact(got, *mine, False, f"thread {tid} call {7 * i}")

    run_at_once(work, 2, timeout=120)
