"""impl.bench.renorm_segment_share: the CPU model of what top-k's compaction and write read through the
segment maxima. Every threshold it models is a lower bound of the pivot (so the write's share is the
smallest), and its one-octave start is the one the kernels really compact from (a real call's state,
through the interpreter on CPU), the first pass's own buckets (rk.first_pass_buckets)."""
from __future__ import annotations

import dataclasses

import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.bench.renorm_segment_share import _bucket_start, measure
from impl.kernels.renorm.workspace import _launch_all
from impl.platform import default_device
from registered.renorm_tunings import SMALL_SHAPES

DEV = default_device()


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=2)
def test_every_modelled_start_is_at_or_below_the_pivot():
    rows = measure(rows=4, vocab=5000, ks=(3, 40, 700), seed=1)
    for k in (3, 40, 700):
        mine = {r["start"]: r for r in rows if r["k"] == k}
        assert set(mine) == {"two-octave bucket", "one-octave bucket", "k-th segment max", "the pivot (the write)"}
        assert all(r["below_pivot"] for r in mine.values())
        write = mine["the pivot (the write)"]
        assert all(write["segments_read"] <= r["segments_read"]
                   and write["candidates_per_row"] <= r["candidates_per_row"] for r in mine.values())
        assert mine["one-octave bucket"]["segments_read"] <= mine["two-octave bucket"]["segments_read"]
        assert write["candidates_per_row"] >= k  # ties may add keys, never fewer than k


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=5)
def test_the_one_octave_start_is_where_the_kernels_compact_from():
    g = torch.Generator().manual_seed(2)
    vocab = 700
    probs = torch.softmax(3 * torch.randn(3, vocab, generator=g), -1)
    k = torch.tensor([5, 40, 200])
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=1, segment_maxima_rows=1)
    plan = rplan._plan(3, vocab, False, True, tuning)
    state = _launch_all(probs.to(DEV), None, k.to(DEV), plan, None).state.cpu()
    assert state[:, int(rk.COMPACTED)].tolist() == [1, 1, 1]
    keys = probs.view(torch.int32)
    pivot = torch.stack([keys[r].topk(int(k[r])).values[-1] for r in range(3)])
    assert state[:, int(rk.LO)].tolist() == pivot.tolist()
    assert rk.first_pass_buckets(False) == (16, 23)  # one octave (1 << 23 in key space), 16 buckets
    assert state[:, int(rk.COMPACTED_FROM)].tolist() == _bucket_start(pivot, 1, 16).tolist()


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=3)
def test_the_top_p_model_keeps_what_the_oracle_keeps():
    """The model's top-p pivot (fp64 sums) keeps exactly the oracle's kept set (exact sums) on the bench's
    kind of rows, and each top-p start is at or below that pivot, the write reading the fewest segments."""
    import reference as R
    from impl.bench.renorm_segment_share import _top_p_pivot

    g = torch.Generator().manual_seed(6)
    probs = torch.softmax(3 * torch.randn(3, 2000, generator=g), -1)
    for p in (0.5, 0.9, 0.95):
        pivot = _top_p_pivot(probs, p)
        kept = probs.view(torch.int32) >= pivot[:, None]
        assert torch.equal(kept, R.top_p_renorm(probs, torch.full((3,), p)) != 0), p
    rows = measure(rows=4, vocab=5000, ks=(), seed=1, ps=(0.9, 0.95))
    for p in (0.9, 0.95):
        mine = {r["start"]: r for r in rows if r.get("p") == p}
        assert set(mine) == {"two-octave bucket", "one-octave bucket", "the pivot (the write)"}
        assert all(r["below_pivot"] for r in mine.values())
        assert (mine["the pivot (the write)"]["segments_read"] <= mine["one-octave bucket"]["segments_read"]
                <= mine["two-octave bucket"]["segments_read"])
