"""The shift of a pass's split (kernels.py _split_shift) in closed form, against its definition.

A pass splits a row's key range [lo, hi) into NB sub-ranges: sub-range d of a key is (key - lo) >> s,
with s the smallest shift such that (hi - lo - 1) >> s < NB. The kernel reads s off the exponent of
(hi - lo - 1) / NB in fp64 instead of trying 32 shifts one after another (renorm v28). Here the
closed form runs in a probe kernel on widths that sit on every power of two and its neighbours, on
random ranges over the whole key space, on one-key ranges and on an empty range, and must give the
shift the definition gives, for every split the plan uses.
"""
from __future__ import annotations

import pytest
import torch

import impl.kernels.renorm.kernels as rk
from ci.registration import register
from impl.kernels._backend import tl, triton
from impl.platform import default_device

DEV = default_device()
KEY_MAX = 0x7F800000  # +inf's key: no finite key reaches it


@triton.jit
def _shifts_of(lo_ptr, hi_ptr, out_ptr, n, NB: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    ok = i < n
    lo = tl.load(lo_ptr + i, mask=ok, other=0)
    hi = tl.load(hi_ptr + i, mask=ok, other=0)
    tl.store(out_ptr + i, rk._split_shift(lo, hi, NB), mask=ok)  # elementwise: one range a lane


def _defined_shift(lo: int, hi: int, nb: int) -> int:
    s = 0
    while (hi - lo - 1) >> s >= nb:
        s += 1
    return s


def _ranges() -> list[tuple[int, int]]:
    """[lo, hi) pairs: width hi - lo - 1 at 0, every power of two and both its neighbours up to the
    whole key space; random pairs; lo == hi (no key: width -1, shift 0)."""
    g = torch.Generator().manual_seed(7)
    widths = sorted({w for b in range(31) for w in ((1 << b) - 1, 1 << b, (1 << b) + 1)} | {0, KEY_MAX - 1})
    pairs = []
    for w in widths:
        lo = int(torch.randint(0, max(1, KEY_MAX - w - 1), (1,), generator=g))
        pairs.append((lo, lo + w + 1))
    ends = torch.randint(0, KEY_MAX + 1, (64, 2), generator=g)
    pairs += [(int(a), int(b)) for a, b in ends.sort(dim=1).values.tolist() if a < b]
    pairs += [(0, 0), (12345, 12345), (0, 1), (KEY_MAX - 1, KEY_MAX)]
    return pairs


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("nb", [4, 16], ids=["4-way", "16-way"])
def test_the_split_shift_is_the_smallest_shift_that_fits_nb_sub_ranges(nb):
    assert {4, 16} >= {rk.UNFIT_SPLIT.value, rk.NB_MAX.value}  # every split the plan makes is tested here
    pairs = _ranges()
    lo = torch.tensor([a for a, _ in pairs], dtype=torch.int32)
    hi = torch.tensor([b for _, b in pairs], dtype=torch.int32)
    block = 1 << (len(pairs) - 1).bit_length()
    out = torch.full((len(pairs),), -1, dtype=torch.int32, device=DEV)  # poison: a range left unwritten fails
    _shifts_of[(1,)](lo.to(DEV), hi.to(DEV), out, len(pairs), NB=nb, BLOCK=block)
    got = out.cpu().tolist()
    want = [_defined_shift(a, b, nb) for a, b in pairs]
    wrong = [(a, b, g, w) for (a, b), g, w in zip(pairs, got, want) if g != w]
    assert not wrong, wrong[:5]
    assert max(want) >= 27 and min(want) == 0  # the probe reaches both ends of the shifts
