"""The lossless verdict: one rule for the CLI, the tests and the benchmark (docs/design.md §7.3).

The engine and the reference decoder compute the same logits up to a measured
error (``MEASURED_LOGIT_ERROR``: max |engine - reference| over every compared
logit, both presets, eager and graph, on the H200 and on CPU, with
``python -m impl.engine.logit_error``). Two tokens whose reference logits are
closer than twice that error can swap places without any defect, so a token
the greedy engine picks differently is a *near-tie* when the reference's
top-two gap there is at most ``NEAR_TIE_MARGIN`` = ``2 * SAFETY`` x the
measured error; past it the two sequences have different contexts and nothing
more is compared for that request.

Verdicts and the CLI's exit codes (``python -m impl.e2e``):

* ``yes`` (0): every request's tokens equal the reference's;
* ``near-tie`` (0): requests diverge only at a reference near-tie; every token
  before it is equal -- consistent with the contract, which claims nothing there;
* ``no`` (1): some request diverges where the reference gap exceeds the
  margin (or where no gap is known): a real defect;
* (2 is the CLI's usage error; sampling runs print ``n/a`` and exit 0 when
  every token is valid, 1 when not).

A test holds the contract on a run whose reference has no near-tie at all
(``full_check``), so equality there is a check everywhere, not luck.

This module must never import torch or the engine.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Max |engine logit - reference logit| measured on 2026-12-02 (python -m impl.engine.logit_error,
# docs/design.md §7.3): H200, torch 2.11, both presets, eager and graph; CPU torch backend.
MEASURED_LOGIT_ERROR = 5e-4
SAFETY = 2  # x 2 below: two logits each off by the error can swap when their gap is below twice it
NEAR_TIE_MARGIN = 2 * SAFETY * MEASURED_LOGIT_ERROR

EXIT_CODES = {"yes": 0, "near-tie": 0, "no": 1}


@dataclass(frozen=True)
class Verdict:
    word: str  # "yes" | "near-tie" | "no"
    near_ties: dict[int, tuple[int, float]] = field(default_factory=dict)  # rid -> (token index, reference gap)
    defects: dict[int, tuple[int, float | None]] = field(default_factory=dict)  # rid -> (index, gap or None)
    margin: float = NEAR_TIE_MARGIN

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.word]

    @property
    def line(self) -> str:
        """The CLI's ``lossless:`` line."""
        def where(items):
            return ", ".join(f"request {rid} token {i} (gap {'unknown' if g is None else f'{g:.3g}'})"
                             for rid, (i, g) in sorted(items.items()))
        if self.word == "yes":
            return "lossless: yes"
        if self.word == "near-tie":
            return (f"lossless: yes up to reference near-ties (top-2 gap <= {self.margin:.3g}, docs/design.md §7.3) "
                    f"at {where(self.near_ties)}; every earlier token equal, later tokens not compared")
        extra = f"; near-ties at {where(self.near_ties)}" if self.near_ties else ""
        return (f"lossless: no (first mismatch at {where(self.defects)}, above the near-tie margin "
                f"{self.margin:.3g}){extra}")


def lossless_verdict(mismatches: dict[int, int], gaps: dict[int, float], *,
                     margin: float = NEAR_TIE_MARGIN) -> Verdict:
    """``mismatches``: request -> first differing token index; ``gaps``: request -> the reference's
    top-two logit gap at that token (absent when unknown, e.g. a non-decoder reference)."""
    near, defects = {}, {}
    for rid, idx in mismatches.items():
        gap = gaps.get(rid)
        if gap is not None and gap <= margin:
            near[rid] = (idx, gap)
        else:
            defects[rid] = (idx, gap)
    word = "no" if defects else ("near-tie" if near else "yes")
    return Verdict(word, near, defects, margin)


def full_check(min_reference_gap: float, *, margin: float = NEAR_TIE_MARGIN) -> bool:
    """Whether every reference token was decided by more than the margin (a test's seed must be)."""
    return min_reference_gap > margin
