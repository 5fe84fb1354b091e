"""Comparison rules of the op table, as data, and the one function that applies them.

Exact ops compare bit for bit (NaN payloads and -0.0 included); numeric ops compare
with ``torch.testing.assert_close`` in float64 under a declared rtol/atol. Imports torch
and reference.bits only.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from reference.bits import bits_view


@dataclass(frozen=True)
class Comparison:
    """How an op's output is compared with its oracle's."""

    doc: str  # the rule in words (the op report and failure messages print it)
    exact: bool = False  # bitwise equal; rtol/atol are then unused
    rtol: float = 0.0  # otherwise |got - want| <= atol + rtol * |want|, in float64
    atol: float = 0.0
    same_zeros: bool = False  # the set of zero entries must also match exactly (renorm: the kept set)


EXACT = Comparison("bitwise equal, same dtype and shape", exact=True)
# bf16 output vs a float64 oracle rounded to bf16: about two bf16 ulps (impl rounds from fp32, the oracle from fp64)
NORM_ROPE = Comparison("|impl - ref| <= 2**-6 * |ref| + 2**-6 (bf16 vs fp64 oracle)", rtol=2**-6, atol=2**-6)
RENORM = Comparison("non-zero pattern exact; values rtol 1e-5, atol 1e-7", rtol=1e-5, atol=1e-7, same_zeros=True)


def max_abs_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """Largest |got - want| over elements whose bits differ (equal bits, NaN or inf, count 0)."""
    if got.numel() == 0:
        return 0.0
    same = bits_view(got) == bits_view(want)
    if got.dtype.is_floating_point and got.element_size() == 1:  # fp8: measure in bytes
        got, want = bits_view(got), bits_view(want)
    diff = (got.double() - want.double()).abs().nan_to_num(nan=float("inf"))
    return float(torch.where(same, torch.zeros_like(diff), diff).max())


def _first_difference(bad: torch.Tensor, got: torch.Tensor, want: torch.Tensor) -> str:
    first = bad.nonzero()[0].tolist()
    return f"{int(bad.sum())} element(s) differ, first at {first}: {got[tuple(first)]} vs {want[tuple(first)]}"


def mismatch(cmp: Comparison, got: torch.Tensor, want: torch.Tensor) -> str | None:
    """None when ``got`` matches ``want`` under ``cmp``, else a short description."""
    got = got.cpu()
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {list(got.shape)} {got.dtype} != {list(want.shape)} {want.dtype}"
    if cmp.exact:
        bad = bits_view(got) != bits_view(want)
        return _first_difference(bad, got, want) if bool(bad.any()) else None
    if cmp.same_zeros:
        bad = (got != 0) != (want != 0)
        if bool(bad.any()):
            return "zero pattern differs: " + _first_difference(bad, got, want)
    try:
        torch.testing.assert_close(got.double(), want.double(), rtol=cmp.rtol, atol=cmp.atol)
    except AssertionError as exc:
        return " ".join(str(exc).split())
    return None
