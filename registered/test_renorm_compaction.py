"""top_k / top_p renorm: the candidate-compaction path and its overflow fallback.

Rows compact the entries sharing the pivot's exponent into a fixed-capacity scratch
(impl.kernels.renorm.CANDIDATE_CAPACITY); a row with more candidates must fall back
to full-row passes. A tiny capacity puts both kinds of rows in one batch, and the
result must still match the exact oracle.
"""
from __future__ import annotations

import pytest
import torch

import impl.kernels as K
import impl.kernels.renorm as renorm
import reference as R
from ci.registration import register
from impl.platform import default_device
from registered.op_table import RENORM, mismatch

DEV = default_device()
CAP = 8


def _mixed_rows(seed: int, vocab: int = 256) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(6, vocab, generator=g) ** 3  # skewed: sparse at the top, crowded low down
    p[0, 3] = 40.0  # a lone spike: its exponent bin holds one entry
    p[1] = 1.0  # every entry ties: any candidate bin overflows
    p[2, : vocab // 2] = 0.25  # a wide tie block above random small values
    p[2, vocab // 2:] *= 0.1
    p[3] = 0.0  # zero mass
    p[4, : vocab // 4] = 0.0  # exact zeros
    return p / p.sum(-1, keepdim=True).clamp_min(1e-30)


def _pivot_bins(probs: torch.Tensor, want: torch.Tensor) -> list[tuple[int, int]]:
    """Per row with mass: (entries equal to the pivot, entries sharing its fp32 exponent)."""
    out = []
    for row, kept in zip(probs, want):
        if not bool((kept != 0).any()):
            continue
        pivot = row[kept != 0].min()
        exponent = lambda t: t.view(torch.int32) >> 23  # noqa: E731
        out.append((int((row == pivot).sum()), int((exponent(row) == exponent(pivot)).sum())))
    return out


def _check_both_paths(probs, want):
    bins = _pivot_bins(probs, want)
    assert any(ties > CAP for ties, _ in bins), f"no overflowing row in the sample: {bins}"
    assert any(same_exp <= CAP for _, same_exp in bins), f"no row fitting the scratch: {bins}"


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=4)
@pytest.mark.parametrize("seed", [1, 2])
def test_top_k_candidate_overflow_falls_back_exactly(monkeypatch, seed):
    monkeypatch.setattr(renorm, "CANDIDATE_CAPACITY", CAP)
    probs = _mixed_rows(seed)
    k = torch.tensor([2, 5, 40, 7, 150, 1])
    want = R.top_k_renorm(probs, k)
    _check_both_paths(probs, want)
    problem = mismatch(RENORM, K.top_k_renorm(probs.to(DEV), k.to(DEV)), want)
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=4)
@pytest.mark.parametrize("seed", [3, 4])
def test_top_p_candidate_overflow_falls_back_exactly(monkeypatch, seed):
    monkeypatch.setattr(renorm, "CANDIDATE_CAPACITY", CAP)
    probs = _mixed_rows(seed)
    p = torch.tensor([0.1, 0.5, 0.7, 0.9, 0.95, 0.0])
    want = R.top_p_renorm(probs, p)
    _check_both_paths(probs, want)
    problem = mismatch(RENORM, K.top_p_renorm(probs.to(DEV), p.to(DEV)), want)
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=4)
def test_compacted_and_plain_passes_agree(monkeypatch):
    """Same batch with and without compaction (the plain passes are the batch-1 path)."""
    probs = _mixed_rows(5).to(DEV)
    k, p = torch.tensor([3, 9, 60, 2, 100, 1], device=DEV), torch.tensor([0.2, 0.6, 0.8, 0.9, 0.99, 0.0], device=DEV)
    compacted = K.top_k_renorm(probs, k), K.top_p_renorm(probs, p)
    monkeypatch.setattr(renorm, "COMPACT_MIN_ROWS", 10**9)
    plain = K.top_k_renorm(probs, k), K.top_p_renorm(probs, p)
    for a, b in zip(compacted, plain):
        assert torch.equal(a, b)
