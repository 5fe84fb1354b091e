"""Per-step, per-component time of the speculative loop: host and GPU, off unless asked for.

Code marks what it does with ``with section("metadata"):`` (one of
:data:`COMPONENTS`); the mark costs one context-variable read when no timer
is active. ``with StepTimer(device).active():`` turns the marks on; the engine
calls ``begin_step`` / ``end_step`` around each step (after its device sync),
and every step gets, per component:

* host microseconds, exclusive: a section nested in another (the pool writes
  inside the target forward) is charged to the inner component only;
* GPU microseconds (CUDA only), exclusive the same way: the time between two
  CUDA events recorded around the section. When the host is slower than the GPU,
  that span includes the GPU waiting for the next launch, so on a host-bound
  step it tracks the host time; on a GPU-bound step it is the kernels' time.

``other`` is the rest of the step's wall time (Python bookkeeping and the
host syncs that read results back). Nothing is recorded while a CUDA graph is
being captured (events may not be recorded into a capture). Docs:
docs/design.md §7.6. This module must never import the engine, ``ci/`` or
``registered/``.
"""
from __future__ import annotations

import contextlib
import contextvars
import statistics
import time
from dataclasses import dataclass, field

import torch

COMPONENTS = ("metadata", "draft", "model", "writes", "renorm", "accept")
OTHER = "other"

_ACTIVE: contextvars.ContextVar["StepTimer | None"] = contextvars.ContextVar("dspark_step_timer", default=None)


def active_timer() -> "StepTimer | None":
    """The timer of the enclosing ``StepTimer.active()`` block, or None."""
    return _ACTIVE.get()


@contextlib.contextmanager
def section(name: str):
    """Charge what runs inside to component ``name`` of the active timer (no-op without one)."""
    timer = _ACTIVE.get()
    if timer is None or (timer.gpu and torch.cuda.is_current_stream_capturing()):
        yield
        return
    with timer.measure(name):
        yield


@dataclass
class _Open:
    name: str
    start: float
    child_host: float = 0.0
    events: tuple | None = None
    children: list = field(default_factory=list)  # indices of closed child records


class StepTimer:
    """Collects per-step component times; ``steps`` holds one dict per step:
    ``{"wall_us", "host_us": {component: us}, "gpu_us": {component: us}}``."""

    def __init__(self, device: torch.device | str = "cpu"):
        if str(device) != "cpu" and torch.device(device).type not in ("cuda", "cpu"):
            raise ValueError(f"StepTimer device must be cpu or cuda, got {device!r}")
        self.gpu = torch.device(device).type == "cuda"
        self.steps: list[dict] = []
        self._stack: list[_Open] = []
        self._closed: list[tuple[str, float, tuple | None, list]] = []  # name, exclusive host s, events, children
        self._step_start: float | None = None
        self._step_events: tuple | None = None

    @contextlib.contextmanager
    def active(self):
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def _event(self):
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    @contextlib.contextmanager
    def measure(self, name: str):
        if name not in COMPONENTS:
            raise ValueError(f"section name must be one of {COMPONENTS}, got {name!r}")
        rec = _Open(name, time.perf_counter(), events=(self._event(),) if self.gpu else None)
        self._stack.append(rec)
        try:
            yield
        finally:
            self._stack.pop()
            end_ev = self._event() if self.gpu else None
            total = time.perf_counter() - rec.start
            self._closed.append((name, total - rec.child_host, (rec.events[0], end_ev) if self.gpu else None,
                                 rec.children))
            if self._stack:
                self._stack[-1].child_host += total
                self._stack[-1].children.append(len(self._closed) - 1)

    def begin_step(self) -> None:
        self._closed = []
        self._step_start = time.perf_counter()
        self._step_events = self._event() if self.gpu else None

    def end_step(self) -> None:
        """Close the step; call after the step's device sync (so every event has completed)."""
        if self._step_start is None:
            return
        wall = time.perf_counter() - self._step_start
        host = dict.fromkeys(COMPONENTS, 0.0)
        gpu = dict.fromkeys(COMPONENTS, 0.0)
        if self.gpu:
            end = self._event()
            end.synchronize()
            spans = [ev[0].elapsed_time(ev[1]) * 1e3 for _, _, ev, _ in self._closed]
            gpu_total = self._step_events.elapsed_time(end) * 1e3
        for i, (name, exclusive, _, children) in enumerate(self._closed):
            host[name] += exclusive * 1e6
            if self.gpu:
                gpu[name] += max(0.0, spans[i] - sum(spans[c] for c in children))
        host[OTHER] = max(0.0, wall * 1e6 - sum(host.values()))
        record = {"wall_us": wall * 1e6, "host_us": host}
        if self.gpu:
            gpu[OTHER] = max(0.0, gpu_total - sum(gpu.values()))
            record["gpu_us"] = gpu
            record["gpu_span_us"] = gpu_total
        self.steps.append(record)
        self._step_start = None

    def summary(self) -> dict:
        """Median per step over the recorded steps: wall, and host / GPU per component."""
        if not self.steps:
            return {}
        keys = (*COMPONENTS, OTHER)
        out = {"steps": len(self.steps), "wall_us": statistics.median(s["wall_us"] for s in self.steps),
               "host_us": {k: statistics.median(s["host_us"][k] for s in self.steps) for k in keys}}
        if self.gpu:
            out["gpu_us"] = {k: statistics.median(s["gpu_us"][k] for s in self.steps) for k in keys}
            out["gpu_span_us"] = statistics.median(s["gpu_span_us"] for s in self.steps)
        return out


def format_summary(summary: dict) -> str:
    """One line per measure: median us per step for each component."""
    if not summary:
        return "no steps timed"
    keys = (*COMPONENTS, OTHER)
    lines = [f"per-step median over {summary['steps']} steps, wall {summary['wall_us']:.0f} us"]
    lines.append("  host us: " + ", ".join(f"{k} {summary['host_us'][k]:.0f}" for k in keys))
    if "gpu_us" in summary:
        lines.append("  gpu us:  " + ", ".join(f"{k} {summary['gpu_us'][k]:.0f}" for k in keys))
    return "\n".join(lines)
