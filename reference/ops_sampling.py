"""Oracle for top-k / top-p renormalisation (docs/design.md §3.9) in exact rational arithmetic.

Sort the row, find the pivot, keep entries >= pivot (ties kept), divide by the
kept mass (zero mass -> zeros). Fractions make the cumulative-mass test exact.
top-p measures mass relative to the row's total (identical to docs/design.md's "1 - p"
for rows that sum to 1); p means the fp32 value nearest to it, whether a Python float or
an fp32 or fp64 tensor (docs/design.md §3.9), then exact arithmetic.
At an exact boundary (cumulative mass == target) the entry reaching it survives.
Out-of-contract values (decided once, the same on every backend, §10.7): NaN, +-inf and
negative entries weigh 0 and are never kept; a row with no positive mass gives zeros; a
NaN in a tensor p means 1 (keep every positive entry).
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import torch


def _per_row(param, bs, cast):
    if isinstance(param, torch.Tensor):
        return [cast(v) for v in param.tolist()]
    return [cast(param)] * bs


def _fp32(value: float) -> float:
    """The fp32 value nearest ``value`` (a finite value within fp32's range)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _clean(row: list[float]) -> list[float]:
    return [x if 0 < x < math.inf else 0.0 for x in row]  # NaN compares False: NaN weighs 0 too


def _renormalise(row: list[float], pivot: float) -> list[float]:
    kept = [Fraction(x) if x >= pivot else Fraction(0) for x in row]
    mass = sum(kept)
    return [float(x / mass) if mass > 0 else 0.0 for x in kept]


def top_k_renorm(probs, k, *, tuning=None):
    """``tuning`` (the kernels' launch plan) is accepted and ignored: the oracle has none."""
    out = []
    for row, k_r in zip(probs.tolist(), _per_row(k, probs.shape[0], int)):
        row = _clean(row)
        k_r = min(max(k_r, 1), len(row))
        pivot = sorted(row, reverse=True)[k_r - 1]  # the k-th largest
        out.append(_renormalise(row, pivot))
    return torch.tensor(out, dtype=torch.float32).reshape(probs.shape)


def top_p_renorm(probs, p, *, tuning=None):
    """``tuning`` (the kernels' launch plan) is accepted and ignored: the oracle has none."""
    out = []
    for row, p_r in zip(probs.tolist(), _per_row(p, probs.shape[0], float)):
        row = _clean(row)
        # NaN p: keep the whole row. Else p's fp32 value, clamped: clamping first gives the same value
        # (rounding to fp32 is monotone and keeps 0 and 1) and keeps huge values packable.
        p_r = 1.0 if p_r != p_r else _fp32(min(max(p_r, 0.0), 1.0))
        target = (1 - Fraction(p_r)) * sum(Fraction(x) for x in row)
        pivot, cumulative = float("inf"), Fraction(0)
        for x in sorted(row):  # ascending: the smallest entries go first
            cumulative += Fraction(x)
            if cumulative >= target:
                pivot = x  # first entry whose cumulative mass reaches the target survives
                break
        out.append(_renormalise(row, pivot))
    return torch.tensor(out, dtype=torch.float32).reshape(probs.shape)
