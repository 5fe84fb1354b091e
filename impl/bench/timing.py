"""Timers: device-event medians on GPU, CUDA-graph replays for small sizes, wall clock on CPU."""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

from impl.cuda_graphs import capture_graph


def on_gpu() -> bool:
    return torch.cuda.is_available()


def median_us(fn: Callable[[], object], *, warmup_ms: float = 25, rep_ms: float = 100) -> float:
    """Median time of one call in microseconds (device events on GPU)."""
    if on_gpu():
        import triton.testing

        return 1e3 * triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    fn()  # warm-up (interpreter compile, allocator)
    samples = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(samples)


def graph_replay_us(fn: Callable[[], object], *, calls_per_graph: int = 50, replays: int = 20) -> float:
    """Per-call time of ``fn`` captured ``calls_per_graph`` times into one CUDA graph.

    Replaying a graph removes the CPU launch gaps, which dominate at small sizes;
    the median over ``replays`` graph replays is divided by the calls per graph.
    """
    if not on_gpu():
        return median_us(fn)
    # warm up outside capture (Triton compiles here), then wait for the whole device
    graph = capture_graph(fn, device="cuda", warmup=3, calls=calls_per_graph, synchronize=True).graph
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls_per_graph)
    return statistics.median(times)
