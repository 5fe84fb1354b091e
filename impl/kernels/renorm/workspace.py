"""The renorm workspaces and how a call launches: the cache, bound launches, eager CUDA graphs.

Imports the plan, the kernels' constants and _backend's launchers; never the fast path or the API
(the fast path reads this module's cache and index, the API calls _launch_all).

Eager calls (the ones engines make, outside their graphs) are host-bound at small batches, so
their host path is short. A call like an earlier one (the same Gates object, checks off, compiled
Triton; same shapes, parameter kind, specialization, stream and tuning) takes the fast path
(fast_path._fast_call): the checks every call needs, one index lookup for its workspace, the output's
allocation and one graph replay; anything else takes the full path, which raises the errors and
fills the index. The full path: one active_gates() lookup, attribute checks (the message-building
checks run only on a mismatch), the plan by the tuning's identity, and a workspace cached per
(plan, specialization, device, stream) whose kernels are bound once to it and launched through
the compiled kernels' C launchers (impl/kernels/_backend.py bound_launcher): no allocation but
the output, no state fill (each call's first pass rewrites the state words a call reads, and each
reducing launch resets its ticket), no per-launch argument binding. Once a call's (probs, parameter,
output) addresses repeat on a stream (RenormTuning.eager_graph_after), its launches are captured
into a CUDA graph over that stream's workspace and later such calls replay it: one graph launch
instead of 4-7 kernel launches (a few graphs per workspace; a workspace whose addresses keep
changing stops capturing). A call takes its workspace
out of the cache while it launches (another thread on the same stream makes its own); a call
inside CUDA-graph capture allocates its own buffers (the graph's pool), so replays never share
one with eager calls. The interpreter and launch hooks (profilers) take ``kernel[grid](...)``.
"""
from __future__ import annotations

import contextlib
import threading

import torch

from impl.kernels._backend import INTERPRETED, bound_launcher, direct_launch_ready
from impl.kernels.renorm import kernels as rk
from impl.kernels.renorm.plan import _Launch, _Plan

# torch's C entry points where this build has them (no Python layer per call), else the public ones
_CURRENT_DEVICE = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda dev: torch.cuda.current_stream(dev).cuda_stream)
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing
_REPLAY = getattr(getattr(torch._C, "_CUDAGraph", None), "replay", None) or torch.cuda.CUDAGraph.replay


def _specialization(dev: int, probs, param, param_t) -> tuple:
    """What Triton specializes on that the plan does not fix: the device, the caller's pointers'
    16-byte alignment and dtype, an int k equal to 1 or divisible by 16 (p is never specialized)."""
    if param_t is not None:
        spec = (param_t.dtype, param_t.data_ptr() % 16 == 0)
    else:
        spec = (param == 1, param % 16 == 0) if isinstance(param, int) else ()
    return dev, probs.data_ptr() % 16 == 0, spec


class _Workspace:
    """One call's scratch (state, partials, candidates, gathered keys, segment maxima), reused by later calls of the
    same plan on the same device and stream; ``calls`` / ``write``: the plan's kernels bound to it."""

    __slots__ = ("plan", "state", "part", "cand", "gath", "seg", "listed", "nbytes", "calls", "write", "packed",
                 "compiled", "graphs", "seen", "captures", "hits")

    def __init__(self, plan: _Plan, bs: int, vocab: int, device) -> None:
        # The state is zeroed once: each call's first pass rewrites the words a call reads and every
        # reducing launch resets its ticket (renorm_kernels), so a reused workspace needs no fill.
        self.plan = plan
        self.state = torch.zeros((bs, int(rk.STATE_W)), dtype=torch.int64, device=device)
        self.part = torch.empty((bs, plan.chunks, int(rk.PART_W)), dtype=torch.float64, device=device)
        self.cand = torch.empty((plan.cand_rows, plan.cap) if plan.cand_rows else (1, 1), dtype=torch.float32,
                                device=device)
        self.gath = torch.empty((bs, vocab) if plan.gathers else (1, 1), dtype=torch.float32, device=device)
        # each call's first pass writes every segment's maximum before a launch reads it
        self.seg = torch.empty((bs, -(-vocab // int(rk.SEG))), dtype=torch.int32, device=device)
        # the compaction's lists of segments to read: each program writes its own before reading them
        self.listed = torch.empty_like(self.seg) if plan.cand_rows else torch.empty((1, 1), dtype=torch.int32,
                                                                                     device=device)
        self.nbytes = sum(t.numel() * t.element_size()
                          for t in (self.state, self.part, self.cand, self.gath, self.seg, self.listed))
        self.calls = self.write = self.packed = self.compiled = None
        self.graphs: dict | None = {}  # (probs, param, scalar, out) -> CUDA graph of the call; None: off
        self.seen: dict = {}  # the same keys -> calls seen, before a capture
        self.captures = self.hits = 0

    def args(self, step: _Launch, ints: bool) -> tuple:
        """The arguments of ``step`` after (probs, param pointer, param scalar): tensors, or their
        addresses (bound launches)."""
        tensors = (self.state, self.part, self.cand, self.gath, self.seg, self.listed)
        state, part, cand, gath, seg, listed = tuple(t.data_ptr() for t in tensors) if ints else tensors
        fstate = state if ints else self.state.view(torch.float64)
        bufs = {"probe": (state, fstate), "first": (seg, part, state, fstate), "pass": (cand, part, state, fstate),
                "compact": (cand, seg, listed, part, state, fstate), "gather": (cand, gath, part, state, fstate),
                "finish": (cand, part, state, fstate), "write": (seg, state, fstate)}[step.args]
        return (*bufs, *step.sizes)

    def bind(self, compiled: tuple, stream: int) -> None:
        """Bind every launch of the plan to this workspace, the compiled kernels and ``stream``."""
        self.compiled = compiled
        self.calls, self.write, self.packed = self.bound(stream)

    def bound(self, stream: int) -> tuple:
        """(select launches, write launch, packed) bound to ``stream``: each a (launch, rest)."""
        compiled, calls, packed = self.compiled, [], False
        for step, ck in zip((*self.plan.launches, self.plan.write), compiled, strict=True):
            launch, packed = bound_launcher(ck, step.grid, stream)
            rest = self.args(step, True)
            first = (2 if step.args == "write" else 3) + len(rest)  # the constexprs follow, by keyword
            calls.append((launch, (*rest, *(step.meta[name] for name in step.kernel.arg_names[first:]))))
        write = calls.pop()
        return tuple(calls), write, packed


# (plan, specialization, device index, stream) -> workspace; a plain dict used as an LRU (a hit is
# popped and re-inserted): at most WORKSPACE_ENTRIES entries and, beyond the newest, WORKSPACE_BYTES.
# A call pops its workspace while it launches, so a second thread on the same stream makes its own.
WORKSPACE_ENTRIES = 8
WORKSPACE_BYTES = 256 << 20
_WORKSPACES: dict[tuple, _Workspace] = {}
# The fast path's index (impl/kernels/renorm/fast_path.py), filled here as the full path keys a
# workspace: (top_p, bs, vocab, specialization, stream, id(tuning)) -> (tuning, _WORKSPACES key)
_FAST_INDEX: dict[tuple, tuple] = {}
_INTERPRETER_LOCK = threading.Lock()  # Triton's interpreter patches its language module per launch


def _note_fast(plan: _Plan, bs: int, vocab: int, spec: tuple, stream: int, key: tuple) -> None:
    """Index the workspace key of an eager call with an output (the fast path's lookup)."""
    if len(_FAST_INDEX) >= 256:
        _FAST_INDEX.clear()
    _FAST_INDEX[(plan.top_p, bs, vocab, spec, stream, id(plan.tuning))] = (plan.tuning, key)


def _keep(key: tuple, ws: _Workspace) -> None:
    """Cache a new workspace, evicting the oldest beyond the bounds."""
    _WORKSPACES[key] = ws
    while len(_WORKSPACES) > 1 and (len(_WORKSPACES) > WORKSPACE_ENTRIES
                                    or sum(w.nbytes for w in _WORKSPACES.values()) > WORKSPACE_BYTES):
        _WORKSPACES.pop(next(iter(_WORKSPACES)), None)


def _launch_all(probs, param, param_t, plan: _Plan, out: torch.Tensor | None) -> _Workspace:
    """Launch the plan's select and (``out`` given) its write; returns the workspace holding the
    per-row state (pivot key in word LO, kept mass, COMPACTED: the attempt that took the row or 0)."""
    bs, vocab = probs.shape
    cuda = probs.is_cuda
    dev = probs.get_device() if cuda else -1
    spec = _specialization(dev, probs, param, param_t)
    if cuda and direct_launch_ready():
        stream = _RAW_STREAM(dev)
        if _capturing():  # a graph keeps its own buffers (its private pool): replays never share one
            ws = _Workspace(plan, bs, vocab, probs.device)
            return _ordinary(probs, param, param_t, plan, spec, ws, out, bind=stream, keep=None)
        key = (plan, spec, dev, stream)
        if out is not None:
            _note_fast(plan, bs, vocab, spec, stream, key)
        ws = _WORKSPACES.pop(key, None)
        if ws is None or ws.calls is None:
            ws = ws or _Workspace(plan, bs, vocab, probs.device)
            return _ordinary(probs, param, param_t, plan, spec, ws, out, bind=stream, keep=key)
        p_ptr = probs.data_ptr()
        param_ptr, param_scalar = (p_ptr, param) if param_t is None else (param_t.data_ptr(), 0)
        if out is None:
            _bound_launches(ws.calls, None, ws.packed, p_ptr, param_ptr, param_scalar, 0)
        elif ws.graphs is None:
            _bound_launches(ws.calls, ws.write, ws.packed, p_ptr, param_ptr, param_scalar, out.data_ptr())
        else:
            gkey = (p_ptr, param_ptr, param_scalar, out.data_ptr())
            graph = ws.graphs.get(gkey)
            if graph is not None:
                _REPLAY(graph)
                ws.hits += 1
            else:
                _eager_call(ws, gkey, dev)
        _WORKSPACES[key] = ws  # back, as the newest
        return ws
    key = (plan, spec, dev, None)
    ws = _WORKSPACES.pop(key, None) or _Workspace(plan, bs, vocab, probs.device)
    return _ordinary(probs, param, param_t, plan, spec, ws, out, bind=None, keep=key)


def _bound_launches(calls, write, packed: bool, p_ptr: int, param_ptr: int, param_scalar, out_ptr: int) -> None:
    if packed:
        for launch, rest in calls:
            launch((p_ptr, param_ptr, param_scalar, *rest))
        if write is not None:
            write[0]((p_ptr, out_ptr, *write[1]))
    else:
        for launch, rest in calls:
            launch(p_ptr, param_ptr, param_scalar, *rest)
        if write is not None:
            write[0](p_ptr, out_ptr, *write[1])


def _eager_call(ws: _Workspace, gkey: tuple, dev: int) -> None:
    """An eager call whose addresses have no graph yet: launch it, or (seen often enough) capture it
    into a CUDA graph on a side stream (nothing runs while capturing) and replay that."""
    t = ws.plan.tuning
    seen = ws.seen.get(gkey, 0) + 1
    if t.eager_graph_after == 0 or seen < t.eager_graph_after:
        if len(ws.seen) >= 4 * max(t.eager_graphs_kept, 1):
            ws.seen.clear()
        ws.seen[gkey] = seen
        _bound_launches(ws.calls, ws.write, ws.packed, *gkey)
        return
    ws.seen.pop(gkey, None)
    if ws.captures >= 4 * max(t.eager_graphs_kept, 1) and ws.hits < 4 * ws.captures:  # addresses keep changing
        ws.graphs = None
        _bound_launches(ws.calls, ws.write, ws.packed, *gkey)
        return
    side = _side_stream(dev)
    calls, write, packed = ws.bound(side.cuda_stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            _bound_launches(calls, write, packed, *gkey)
        finally:
            graph.capture_end()
    ws.captures += 1
    while len(ws.graphs) >= t.eager_graphs_kept:
        ws.graphs.pop(next(iter(ws.graphs)))
    if t.eager_graphs_kept:
        ws.graphs[gkey] = graph
    graph.replay()  # on the caller's stream


_SIDE_STREAMS: dict[int, torch.cuda.Stream] = {}


def _side_stream(dev: int):
    """A stream (per device) that eager-call graphs are captured on; nothing ever runs on it."""
    stream = _SIDE_STREAMS.get(dev)
    if stream is None:
        stream = _SIDE_STREAMS[dev] = torch.cuda.Stream(device=dev)
    return stream


def _ordinary(probs, param, param_t, plan, spec, ws: _Workspace, out, *, bind, keep) -> _Workspace:
    """Launch through ``kernel[grid](...)`` (compiling on first use; the interpreter's only path),
    note the compiled kernels per specialization, and bind the workspace to them (``bind``: the
    stream) for the next calls; ``keep``: the key the workspace is cached under (None: not kept)."""
    param_ptr, param_scalar = (probs, param) if param_t is None else (param_t, 0)
    lock = _INTERPRETER_LOCK if INTERPRETED else contextlib.nullcontext()
    compiled = []
    steps = (*plan.launches, plan.write) if out is not None else plan.launches
    for step in steps:
        head = (probs, out) if step.args == "write" else (probs, param_ptr, param_scalar)
        with lock:
            compiled.append(step.kernel[step.grid](*head, *ws.args(step, False), **step.meta))
    if bind is not None and out is not None and all(c is not None for c in compiled):
        plan.compiled.setdefault(spec, tuple(compiled))
    if bind is not None and spec in plan.compiled:
        ws.bind(plan.compiled[spec], bind)
    if keep is not None:
        _keep(keep, ws)
    return ws
