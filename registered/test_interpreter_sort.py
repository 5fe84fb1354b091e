"""The interpreter's stand-in for ``tl.sort`` (impl/kernels/interpreter_sort.py) sorts as ``tl.sort`` does.

Under Triton's interpreter the renorm kernels sort through numpy; this test runs Triton's own
``tl.sort`` (interpreted too, on a small tile: it costs seconds per thousand keys there) and the
stand-in on the same keys and holds them equal, and both equal to torch's sort. Compiled, the
stand-in is ``tl.sort`` itself and the test checks it against torch on the GPU.
"""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.kernels._backend import tl, triton
from impl.kernels.interpreter_sort import sort_ascending
from impl.platform import default_device

DEV = default_device()


@triton.jit
def _both_sorts(src, by_stand_in, by_tl_sort, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(src + i)
    tl.store(by_stand_in + i, sort_ascending(x))
    tl.store(by_tl_sort + i, tl.sort(x))


def _keys(seed: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.int32:  # renorm's keys: fp32 bits, ties, and the "no key" filler 0x7FFFFFFF
        keys = torch.randint(-(2**31), 2**31 - 1, (n,), generator=g, dtype=torch.int64).to(torch.int32)
        keys[: n // 4] = 0x7FFFFFFF
        keys[n // 4: n // 2] = keys[n // 2]
        return keys[torch.randperm(n, generator=g)]
    keys = torch.randn(n, generator=g).to(dtype)
    keys[::5] = keys[1]
    return keys


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32], ids=["int32", "float32"])
@pytest.mark.parametrize("n", [16, 64])
def test_stand_in_sorts_as_tl_sort_does(n, dtype):
    for seed in range(3):
        keys = _keys(seed, n, dtype).to(DEV)
        got = torch.full_like(keys, 7)  # poison: an unwritten lane shows
        want = torch.full_like(keys, 7)
        _both_sorts[(1,)](keys, got, want, N=n)
        expected = torch.sort(keys.cpu()).values
        assert torch.equal(want.cpu(), expected), f"tl.sort itself disagrees with torch (seed {seed})"
        assert torch.equal(got.cpu(), expected), f"the stand-in disagrees with tl.sort (seed {seed})"

