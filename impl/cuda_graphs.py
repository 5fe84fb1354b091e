"""CUDA-graph capture: the one warm-up + capture routine every caller uses.

``capture_graph(fn, device=..., warmup=N)`` runs ``fn`` ``N`` times on a side
stream (the side stream first waits for the current one), so Triton compiles
its kernels and the caching allocator settles outside the capture; the current
stream then waits for the side stream, and ``fn`` is captured ``calls`` times
into one ``torch.cuda.CUDAGraph``. The graph and what the last captured call
returned (the static output that replays overwrite) come back together.

Callers: :class:`impl.verify_step.VerifyStep` (``capture``), the engine's
verify graphs (:mod:`impl.engine.graph`) and the benchmark timer
(:func:`impl.bench.timing.graph_replay_us`). Graph mode is described in
docs/design.md §7.5; what may run inside a graph in docs/design.md §3 (G).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from impl.validation import check_positive_int


class CapturedGraph(NamedTuple):
    graph: torch.cuda.CUDAGraph
    output: object  # what the last captured call of fn returned (static: replays overwrite it)


def _check_args(fn: object, device: torch.device | str, *, warmup: object, calls: object) -> None:
    """Argument checks, before anything touches CUDA (so they hold on any machine)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    check_positive_int("warmup", warmup, minimum=0)
    check_positive_int("calls", calls)
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"CUDA graph capture needs a CUDA device, got device={str(device)!r}")


def capture_graph(
    fn: Callable[[], object],
    *,
    device: torch.device | str,
    warmup: int,
    calls: int = 1,
    synchronize: bool = False,
) -> CapturedGraph:
    """Warm ``fn`` up ``warmup`` times on a side stream, then capture ``calls`` calls of it.

    ``synchronize``: wait for the whole device after the warm-up (the benchmark
    timer does, so no warm-up work overlaps the capture). ``fn`` must be
    graph safe (no host sync, static shapes).
    """
    _check_args(fn, device, warmup=warmup, calls=calls)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):  # Triton compilation, allocator pools: outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(side)
    if synchronize:
        torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    output = None
    with torch.cuda.graph(graph):
        for _ in range(calls):
            output = fn()
    return CapturedGraph(graph, output)
