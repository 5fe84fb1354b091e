"""top_k / top_p renorm's eager host path: the cached workspace, bound launches, streams and threads.

Eager calls reuse one workspace per (plan, specialization, device, stream): no allocation and no
state fill per call (each call's first pass rewrites the state words a call reads, every reducing
launch resets its ticket). These tests prove a reused, dirty workspace gives exact results, that
two threads and two streams never share one while they run, that the cache stays bounded, and
that the bound launchers call each triton release's C entry point with its argument layout.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels as K
import impl.kernels.renorm as renorm
import impl.kernels.renorm.plan as rplan
from impl.kernels._backend import dependent_launch_ok, ptx_ok
from impl.kernels.renorm import torch_path, workspace
import reference as R
from ci.registration import register
from impl.platform import default_device
from impl.testing.op_table import RENORM, mismatch
from registered.renorm_tunings import PATH_VOCAB, SMALL_SHAPES
from registered.skips import requires_gpu
from registered.threads import run_at_once

DEV = default_device()


def _probs(seed: int, bs: int, vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(bs, vocab, generator=g) * 3, -1)
    p[0, : vocab // 3] = 0.0  # rows that differ in shape from one call to the next
    return p / p.sum(-1, keepdim=True)


def _param(top_p: bool, seed: int, bs: int, vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(bs, generator=g) if top_p else torch.randint(1, vocab, (bs,), generator=g)


def _check(got: torch.Tensor, probs: torch.Tensor, param, top_p: bool, label: str, *, fast: bool = False) -> None:
    """Against the exact oracle, or (``fast``: GPU-sized rows, where the rational oracle takes
    seconds a row) against the torch backend, itself held exact against the oracle by the op table."""
    if fast:
        bs = probs.shape[0]
        p = param if isinstance(param, torch.Tensor) else torch.full(
            (bs,), param, dtype=torch.float32 if top_p else torch.int64, device=probs.device)
        want = (torch_path._top_p_torch if top_p else torch_path._top_k_torch)(probs, p)
    else:
        want = (R.top_p_renorm if top_p else R.top_k_renorm)(
            probs.cpu(), param.cpu() if isinstance(param, torch.Tensor) else param)
    problem = mismatch(RENORM, got.cpu(), want.cpu())
    assert problem is None, f"{label}: {problem}"


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=30)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_a_reused_dirty_workspace_gives_exact_results(top_p):
    """Calls of one plan run back to back on one workspace with different rows and parameters (tensor,
    then scalar, then tensor again): the state a call leaves (compacted rows, ranges, masses, tickets)
    must never leak into the next. A small candidate capacity makes some rows compact and others not,
    so the leftover state differs from row to row."""
    op = K.top_p_renorm if top_p else K.top_k_renorm
    bs, vocab = 4, PATH_VOCAB
    before = len(workspace._WORKSPACES)
    for call, rows in ((c, r) for r in (2, 10**9) for c in range(4)):  # the finish path, the small-batch path
        tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, candidate_capacity=16,
                                     finish_min_rows=rows)
        probs = _probs(call, bs, vocab).to(DEV)
        if call == 1:
            probs[2] = 1.0 / vocab  # one flat row: never fits the scratch
        param = _param(top_p, 10 + call, bs, vocab).to(DEV)
        if call == 2:
            param = 0.6 if top_p else 7
        got = op(probs, param, tuning=tuning)
        _check(got, probs, param, top_p, f"call {call}, finish_min_rows {rows}")
    assert len(workspace._WORKSPACES) >= min(before + 1, workspace.WORKSPACE_ENTRIES), "the workspace was not cached"


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=40)
def test_two_threads_never_share_a_running_workspace():
    """Two threads call one plan at once (same device, same stream: the same cache key). A call takes
    its workspace out of the cache while it launches, so the other thread makes its own; with one
    shared, their launches would interleave on one state and corrupt both (the interpreter runs a
    launch at a time, so interleaving happens on CPU too). With two GPUs each thread uses its own."""
    bs, vocab = 3, 1500
    devices = [DEV] if torch.cuda.device_count() < 2 else [torch.device("cuda", 0), torch.device("cuda", 1)]
    def work(tid: int) -> None:
        dev = devices[tid % len(devices)]
        for call in range(3):
            top_p = call % 2 == 1  # both threads on one plan at a time
            probs = _probs(100 * tid + call, bs, vocab).to(dev)
            param = _param(top_p, 200 * tid + call, bs, vocab).to(dev)
            got = (K.top_p_renorm if top_p else K.top_k_renorm)(probs, param)
            _check(got, probs, param, top_p, f"thread {tid} call {call} on {dev}")

    run_at_once(work, 2, timeout=600)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=20)
def test_the_workspace_cache_stays_bounded():
    """More shapes than the cache holds: it keeps at most WORKSPACE_ENTRIES workspaces, the newest."""
    for bs in range(1, workspace.WORKSPACE_ENTRIES + 3):
        probs = _probs(bs, bs, 64).to(DEV)
        _check(K.top_k_renorm(probs, 5), probs, 5, False, f"bs {bs}")
    assert len(workspace._WORKSPACES) <= workspace.WORKSPACE_ENTRIES
    newest = next(reversed(workspace._WORKSPACES))
    assert newest[0].launches[0].grid[1] == workspace.WORKSPACE_ENTRIES + 2, "the newest workspace must stay"


class _Launcher:
    """Stands in for a compiled kernel's launcher object: ``launch`` is its C entry point."""

    launch_cooperative_grid, launch_pdl = False, False
    global_scratch_size = profile_scratch_size = 0

    def __init__(self, packed: bool):
        self.calls = []
        self.launch = lambda *args: self.calls.append(args)
        if packed:
            self.arg_annotations, self.kernel_signature = "annotations", b"sig"


class _Compiled:
    function, packed_metadata = 77, (4, 1, 0)

    def __init__(self, packed: bool):
        self.run = _Launcher(packed)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("abi", ["flat", "packed", None])
def test_bound_launcher_calls_each_triton_entry_point_with_its_layout(monkeypatch, abi):
    """triton 3.6's C launcher takes the kernel arguments one by one after (grid, stream, function,
    cooperative, pdl, global scratch, profile scratch, metadata, launch metadata, enter and exit
    hooks); triton 3.9's takes (grid, stream, function, cooperative, pdl, metadata, launch metadata,
    hooks, scratches, annotations, signature) and then the arguments as one tuple. Any other release
    goes through the launcher object itself (CompiledKernel.run's layout)."""
    from impl.kernels import _backend

    monkeypatch.setattr(_backend, "_RAW_ABI", abi)
    compiled = _Compiled(packed=abi == "packed")
    calls = []
    if abi is None:  # the launcher object is called itself
        compiled.run = lambda *a: calls.append(a)
    launch, packed = _backend.bound_launcher(compiled, (3, 2), 1234)
    args = (111, 222, 0.5, 64)
    launch(args) if packed else launch(*args)
    assert packed == (abi == "packed")
    if abi == "flat":
        assert compiled.run.calls == [(3, 2, 1, 1234, 77, False, False, None, None, (4, 1, 0), None, None, None, *args)]
    elif abi == "packed":
        assert compiled.run.calls == [(3, 2, 1, 1234, 77, False, False, (4, 1, 0), None, None, None, None, None,
                                       "annotations", b"sig", args)]
    else:
        assert calls == [(3, 2, 1, 1234, 77, (4, 1, 0), None, None, None, *args)]


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=30)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_side_streams_and_graphs_keep_their_own_workspaces(top_p):
    """Calls on a side stream, and calls alternating between two streams with no sync between them
    (each stream's workspace is its own, so they may overlap on the GPU), are exact; so is a CUDA
    graph replayed between eager calls on the same stream (the graph keeps its own buffers)."""
    op = K.top_p_renorm if top_p else K.top_k_renorm
    bs, vocab = 64, 129280
    inputs = [(_probs(i, bs, vocab).cuda(), _param(top_p, 50 + i, bs, vocab).cuda()) for i in range(4)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for probs, param in inputs[:1]:  # compile and bind outside the streams
        op(probs, param)
    torch.cuda.synchronize()
    outs = []
    for rep in range(3):
        for i, (probs, param) in enumerate(inputs):
            stream = streams[i % 2]
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                outs.append((i, op(probs, param)))
    torch.cuda.synchronize()
    for i, got in outs:
        _check(got, *inputs[i], top_p, f"input {i} on stream {i % 2}", fast=True)
    static_probs, static_param = inputs[0][0].clone(), inputs[0][1].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        op(static_probs, static_param)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_out = op(static_probs, static_param)
    for probs, param in inputs[1:]:
        static_probs.copy_(probs)
        static_param.copy_(param)
        eager = op(inputs[0][0], inputs[0][1])  # the same stream, its cached workspace, between replays
        graph.replay()
        torch.cuda.synchronize()
        _check(graph_out, probs, param, top_p, "graph replay", fast=True)
        _check(eager, *inputs[0], top_p, "eager call between replays", fast=True)


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=20)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_eager_calls_replay_a_graph_per_address_set_with_fresh_values(top_p):
    """Eager calls whose (probs, parameter, output) addresses repeat replay a CUDA graph of the call
    (RenormTuning.eager_graph_after). The graph reads whatever those addresses hold now: new values
    written in place between calls, a new scalar parameter (another graph) and a new output address
    (the previous output kept alive) must all give exact results; with eager_graph_after = 0 no graph
    is ever captured."""
    op = K.top_p_renorm if top_p else K.top_k_renorm
    bs, vocab = 8, 129280
    probs = _probs(1, bs, vocab).cuda()
    param = _param(top_p, 2, bs, vocab).cuda()
    for after in (2, 0):
        tuning = dataclasses.replace(renorm.DEFAULT_TUNING, eager_graph_after=after)
        kept = []
        for call in range(6):
            probs.copy_(_probs(10 + call, bs, vocab))
            param.copy_(_param(top_p, 20 + call, bs, vocab))
            arg = param if call != 4 else (0.7 if top_p else 9)
            got = op(probs, arg, tuning=tuning)
            _check(got, probs, arg, top_p, f"eager_graph_after {after}, call {call}", fast=True)
            if call == 3:
                kept.append(got)  # the next output lands elsewhere
            del got  # freed before the next call: its output may reuse the address
        plan = rplan._plan_for(bs, vocab, top_p, True, tuning, dependent_launch_ok(probs), ptx_ok(probs))
        ws = next(w for (p, *_), w in workspace._WORKSPACES.items() if p is plan)
        if after:
            assert ws.captures >= 1 and ws.hits >= 1, (ws.captures, ws.hits)
        else:
            assert ws.captures == 0 and not ws.graphs
