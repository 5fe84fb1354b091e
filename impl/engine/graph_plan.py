"""Which batch sizes graph mode captures, and what a step larger than all of them does.

A verify step runs one request per slot in flight, so ``num_slots`` bounds its
batch. :func:`plan_graphs` derives the captured batch sizes from it -- powers
of two below ``num_slots``, and ``num_slots`` itself -- unless the user names
them (``python -m impl.e2e --capture-sizes 1,2,4``). Every step then fits a
captured tier; with user sizes whose largest is below ``num_slots``, a step with
more requests than the largest size runs eagerly, and the engine counts those
steps (``VerifyGraphRunner.eager_steps``) so the CLI reports them. Sizes above
``num_slots`` can never be used and are dropped (capture is done up front, so
each size costs one capture). docs/design.md §7.5.

This module must never import torch or the engine: the CLI plans before any heavy import.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_CAPTURE_SIZES = 16  # graphs captured per run: each holds static buffers and a memory pool


@dataclass(frozen=True)
class GraphPlan:
    capture_batch_sizes: tuple[int, ...]  # ascending, each <= num_slots
    num_slots: int

    @property
    def largest(self) -> int:
        return self.capture_batch_sizes[-1]

    def fits(self, batch: int) -> bool:
        """Whether a verify step of ``batch`` requests replays a graph (else it runs eagerly)."""
        return batch <= self.largest

    @property
    def eager_batches(self) -> range:
        """The step batch sizes that run eagerly (empty when the plan covers every slot)."""
        return range(self.largest + 1, self.num_slots + 1)

    def describe(self) -> str:
        text = f"capture batch sizes {','.join(map(str, self.capture_batch_sizes))}"
        if self.eager_batches:
            text += f" (steps with {self.eager_batches.start}-{self.num_slots} requests run eagerly)"
        return text


def derived_capture_sizes(num_slots: int) -> tuple[int, ...]:
    """Powers of two below ``num_slots``, then ``num_slots``: 16 -> (1, 2, 4, 8, 16), 6 -> (1, 2, 4, 6)."""
    if not isinstance(num_slots, int) or isinstance(num_slots, bool) or num_slots < 1:
        raise ValueError(f"num_slots must be a positive int, got {num_slots!r}")
    sizes, b = [], 1
    while b < num_slots:
        sizes.append(b)
        b *= 2
    return (*sizes, num_slots)


def parse_capture_sizes(text: str) -> tuple[int, ...]:
    """``"1,2,4"`` -> (1, 2, 4); ValueError with one line for anything else."""
    parts = [p.strip() for p in text.split(",")]
    try:
        sizes = tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"expected comma-separated positive integers like 1,2,4,8, got {text!r}") from None
    if not sizes or any(s < 1 for s in sizes):
        raise ValueError(f"expected comma-separated positive integers like 1,2,4,8, got {text!r}")
    if len(set(sizes)) > MAX_CAPTURE_SIZES:
        raise ValueError(f"at most {MAX_CAPTURE_SIZES} sizes (one CUDA graph each), got {len(set(sizes))}")
    return sizes


def plan_graphs(num_slots: int, requested: tuple[int, ...] | None = None) -> GraphPlan:
    """The captured sizes for a run with ``num_slots`` slots: ``requested`` (sorted, deduplicated,
    sizes above ``num_slots`` dropped) or :func:`derived_capture_sizes`. ValueError when
    ``requested`` leaves nothing to capture."""
    derived = derived_capture_sizes(num_slots)
    if requested is None:
        return GraphPlan(derived, num_slots)
    if any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in requested):
        raise ValueError(f"capture sizes must be positive ints, got {requested!r}")
    usable = tuple(sorted({s for s in requested if s <= num_slots}))
    if not usable:
        raise ValueError(f"every capture size in {','.join(map(str, requested))} exceeds the {num_slots} "
                         "slot(s) in flight: no step could replay a graph")
    return GraphPlan(usable, num_slots)
