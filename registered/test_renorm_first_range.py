"""Top-p's first choice of buckets from its fp32 sums, on crafted sums at the edge of its rounding bound.

The first pass sums in fp32 each chunk's mass and its entries clamped at each bucket's start c_b;
_first_range takes c_b x (keys >= c_b) off the clamped sum to get the mass below c_b, and widens
its choice by the rounding bound of the clamped sum (relative delta of that sum, which may be far
larger than the mass below c_b). Here the sums are handed to _first_range directly: a mass below
c_4 a few deltas of the target away must keep both buckets it may fall between, and one a thousand
deltas away must not. A bound taken on the mass below c_b alone (too small) or none fails here.
"""
from __future__ import annotations

import pytest
import torch

import impl.kernels.renorm.kernels as rk
from ci.registration import register
from impl.kernels._backend import tl, triton
from impl.platform import default_device

DEV = default_device()
CHUNK_LEN, BLOCK = 1024, 32


@triton.jit
def _first_range_of(counts_ptr, mass_ptr, out_ptr, top_key, goal, chunk_len, V, BLOCK: tl.constexpr):
    c = tl.arange(0, 2)
    bins = tl.arange(0, 8)
    counts_of = tl.load(counts_ptr + c[:, None] * 8 + bins[None, :])
    mass = tl.load(mass_ptr + bins)
    _, _, b_lo, b_hi, _ = rk._first_range(counts_of, mass, top_key, tl.full([], 0.0, tl.float64) + goal, chunk_len,
                                          V, True, BLOCK)
    tl.store(out_ptr, b_lo)
    tl.store(out_ptr + 1, b_hi)


def _chosen_buckets(deltas_off: float) -> tuple[int, int]:
    """(b_lo, b_hi) for a row of n3 keys in bucket 3 and n4 keys equal to c_4 = 2^-18, p = 0.75, whose
    mass below c_4 is the target times (1 + deltas_off x delta)."""
    assert rk.first_pass_buckets(True) == (8, 24)
    steps = -(-CHUNK_LEN // BLOCK)
    delta = rk.MARGIN_SCALE.value * (steps + BLOCK) * 2.0 ** -24
    c = [2.0 ** (2 * b - 26) for b in range(8)]
    n3, n4 = 1000, 3 << 16  # c_4 x n4 = 0.75
    # mass below c_4 = L; total = L + 0.75; target = 0.25 x total; L = target x (1 + k delta)
    k = deltas_off * delta
    below = 0.25 * 0.75 * (1 + k) / (1 - 0.25 * (1 + k))
    total = below + c[4] * n4
    counts = torch.zeros(2, 8, dtype=torch.float64)
    counts[0, 3], counts[0, 4] = n3, n4
    sums = [total] + [below + c[b] * n4 if b == 4 else c[b] * (n3 + n4) if b <= 3 else total for b in range(1, 8)]
    out = torch.full((2,), -1, dtype=torch.int32, device=DEV)
    top_key = int(torch.tensor(c[4], dtype=torch.float32).view(torch.int32))
    _first_range_of[(1,)](counts.to(DEV), torch.tensor(sums, dtype=torch.float64, device=DEV), out, top_key, 0.75,
                          CHUNK_LEN, 1 << 20, BLOCK=BLOCK)
    b_lo, b_hi = out.tolist()
    return b_lo, b_hi


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("deltas_off, want", [(-1000.0, (4, 4)), (-2.5, (3, 4)), (2.5, (3, 4)), (1000.0, (3, 3))],
                         ids=["far-below", "just-below", "just-above", "far-above"])
def test_first_range_widens_by_the_clamped_sums_rounding(deltas_off, want):
    """The exact rule keeps bucket 4 when the mass below c_4 is under the target, else bucket 3. The
    clamped sum S_4 = below + 0.75 is about 4x the target, so its rounding bound is about 4 deltas of
    the target: 2.5 deltas either side is uncertain (both buckets), 1000 is not (one)."""
    assert _chosen_buckets(deltas_off) == want
