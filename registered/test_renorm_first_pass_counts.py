"""The renorm first pass's bucket counts, at the limit of its per-lane counter fields.

Each lane of a first-pass program counts its keys per fixed bucket in one int64, a field per bucket
(top-k: 16 one-octave buckets in 4-bit fields, so at most 15 loop steps a program; top-p: 8
two-octave buckets in 8-bit fields, at most 255), and the program adds the fields of its lanes in
16-bit groups. Here a tuning makes every program take exactly the most steps its fields allow, on rows
whose keys all fall in one bucket (every field of that bucket full: the top bucket, the last bucket
of the int64's lower half, whose full field reaches bit 31, and bucket 1) and on mixed rows, and each
program's counts (its partial words, after the first launch alone) are compared with a loop over its
chunk. A field one bit too narrow, a group mask that drops a bit, a carry across the two 32-bit
halves or a wrong bucket boundary fails here.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.kernels.renorm.workspace import _launch_all
from impl.platform import default_device

DEV = default_device()
BLOCK = 32  # one segment a step: the smallest first-pass BLOCK


def _bucket_counts(chunk: torch.Tensor, top_p: bool) -> list[int]:
    """Keys per first-pass bucket, one entry at a time (NaN, inf, negative and -0.0 weigh 0: key 0)."""
    buckets, shift = rk.first_pass_buckets(top_p)
    weighed = torch.where(torch.isfinite(chunk) & (chunk > 0), chunk, torch.zeros_like(chunk))
    counts = [0] * buckets
    for key in weighed.view(torch.int32).tolist():
        counts[min(max((key - int(rk.FIRST_BASE)) >> shift, 0), buckets - 1)] += 1
    return counts


def _clamped_sums(chunk: torch.Tensor) -> list[float]:
    """Top-p's first-pass sums of a chunk in fp64, one entry at a time: the mass, then for each bucket b > 0 the
    entries clamped at its start 2^(2b - 26) (NaN, inf, negative and -0.0 weigh 0)."""
    buckets, _ = rk.first_pass_buckets(True)
    sums = [0.0] * buckets
    for x in chunk.double().tolist():
        x = x if math.isfinite(x) and x > 0 else 0.0
        sums[0] += x
        for b in range(1, buckets):
            sums[b] += min(x, 2.0 ** (2 * b - 26))
    return sums


def _rows(vocab: int, top_p: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    mixed = torch.softmax(3 * torch.randn(vocab, generator=g), -1)
    mixed[11] = float("nan")
    mixed[12] = -2.0
    top = torch.full((vocab,), 0.25)  # every key in the top bucket
    buckets, shift = rk.first_pass_buckets(top_p)
    low = torch.tensor([int(rk.FIRST_BASE) + (1 << shift) + 5], dtype=torch.int32).view(torch.float32)
    first = torch.full((vocab,), float(low))  # every key in bucket 1, just above its start
    last_low = torch.tensor([int(rk.FIRST_BASE) + ((buckets // 2 - 1) << shift) + 7], dtype=torch.int32)
    half_top = torch.full((vocab,), float(last_low.view(torch.float32)))  # the lower half's last bucket
    return torch.stack([top, first, mixed, torch.zeros(vocab), half_top])


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=30)
@pytest.mark.parametrize("top_p, grouped", [(False, False), (True, False), (True, True)],
                         ids=["top_k", "top_p", "top_p-grouped"])
@pytest.mark.parametrize("one_reduction", [False, True], ids=["a-reduction-each", "one-reduction"])
def test_first_pass_counts_fill_every_counter_field_exactly(top_p, grouped, one_reduction):
    """Both ways of adding the lanes' counts and sums across a program (first_pass_one_reduction), and top-p's
    grouped first pass (first_pass_group_sums: a field counts GROUP keys a step, so fewer steps fill it); top-p's
    fp32 sums (the chunk's mass, its entries clamped at each bucket's start) against an fp64 loop too."""
    steps = rk.first_pass_steps_max(top_p, grouped)
    assert steps == ((255 // int(rk.GROUP) if grouped else 255) if top_p else 15)
    chunk_len = steps * BLOCK  # a multiple of the 32-entry segment
    # two full chunks and a partial one (its padding is taken off bucket 0); the tuning's chunk_align
    # (at most 15 x BLOCK, either op's limit) divides chunk_len (3 x 21 x BLOCK when grouped), and 12 programs over
    # 5 rows make 3 chunks a row. Grouping needs the first pass without the segment maxima.
    vocab = 2 * chunk_len + (chunk_len - 17 if grouped else chunk_len * 6 // 7 if top_p else 17)
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, chunk_align=(3 if grouped else 15) * BLOCK,
                                 first_pass=(BLOCK, 1), large_batch_first_pass=(BLOCK, 1), target_programs=12,
                                 segment_maxima=not grouped, segment_maxima_rows=1,
                                 first_pass_one_reduction=one_reduction, first_pass_group_sums=grouped)
    probs = _rows(vocab, top_p)
    rows = probs.shape[0]
    plan = rplan._plan(rows, vocab, top_p, True, tuning)
    assert plan.launches[0].sizes[1:] == (chunk_len, 3) and plan.launches[0].meta["BLOCK"] == BLOCK
    first_only = dataclasses.replace(plan, launches=plan.launches[:1])
    param = (torch.full((rows,), 0.5) if top_p else torch.full((rows,), 7)).to(DEV)
    ws = _launch_all(probs.to(DEV), None, param, first_only, None)
    buckets, _ = rk.first_pass_buckets(top_p)
    got = ws.part[:, :, :buckets].cpu()
    for row in range(rows):
        for chunk in range(3):
            want = _bucket_counts(probs[row, chunk * chunk_len:(chunk + 1) * chunk_len], top_p)
            assert got[row, chunk].long().tolist() == want, (row, chunk)
            if top_p:
                sums = ws.part[row, chunk, int(rk.MASS_AT):int(rk.MASS_AT) + buckets].cpu().tolist()
                want_sums = _clamped_sums(probs[row, chunk * chunk_len:(chunk + 1) * chunk_len])
                for b, (s, w) in enumerate(zip(sums, want_sums)):
                    assert abs(s - w) <= 1e-5 * w + 1e-30, (row, chunk, b, s, w)
    assert plan.launches[0].meta["ONE_REDUCTION"] is one_reduction
    assert plan.launches[0].meta["GROUPED"] is grouped
    assert got[0, 0].long().tolist()[-1] == chunk_len, "row 0 fills the top bucket's field in every lane"
    assert got[4, 0].long().tolist()[buckets // 2 - 1] == chunk_len, "row 4 fills the lower half's last field"


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=6)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
@pytest.mark.parametrize("segment_maxima", [True, False], ids=["map", "no-map"])
def test_loads_a_step_ahead_change_no_bit(top_p, segment_maxima):
    """prefetch_first_pass / prefetch_compact / prefetch_write / prefetch_finish only move loads
    earlier: on chunks of several steps with a partial last block, and a finish that runs range passes
    to the end over candidates of several blocks (moving them to the front as it goes), the output is
    bit-identical to the plain loads' and equal to the oracle's (a prefetch that read the wrong block or
    the wrong segments, skipped the first or the last, or read a block before the front reached it,
    changes the output)."""
    import reference as R
    from impl.testing.op_table import RENORM, mismatch

    g = torch.Generator().manual_seed(4)
    vocab = 5 * 4 * BLOCK + 19  # chunks of several BLOCK steps (few programs), a partial last block
    probs = torch.softmax(3 * torch.randn(3, vocab, generator=g), -1)
    probs[1, :300] = probs[1, 300:600]  # ties across blocks
    param = torch.tensor([0.9, 0.5, 0.99]) if top_p else torch.tensor([5, 40, 300])
    base = dataclasses.replace(renorm.DEFAULT_TUNING, chunk_align=4 * BLOCK, first_pass=(BLOCK, 1),
                               compact=(BLOCK, 1), target_programs=3, finish_min_rows=1,
                               segment_maxima=segment_maxima, segment_maxima_rows=1, write=(BLOCK, 1),
                               finish=(BLOCK, 1), finish_sort=(0, 0), prefetch_first_pass=False,
                               prefetch_compact=False, prefetch_write=False, prefetch_finish=False)
    op, ref = (renorm.top_p_renorm, R.top_p_renorm) if top_p else (renorm.top_k_renorm, R.top_k_renorm)
    plain = op(probs.to(DEV), param.to(DEV), tuning=base).cpu()
    ahead = op(probs.to(DEV), param.to(DEV),
               tuning=dataclasses.replace(base, prefetch_first_pass=True, prefetch_compact=True,
                                          prefetch_write=True, prefetch_finish=True)).cpu()
    first = rplan._plan(3, vocab, top_p, True, dataclasses.replace(base, prefetch_first_pass=True)).launches[0]
    assert first.meta["PREFETCH"] and first.sizes[1] >= 4 * BLOCK and vocab % first.sizes[1], "several steps"
    assert torch.equal(plain.view(torch.int32), ahead.view(torch.int32))
    problem = mismatch(RENORM, ahead, ref(probs, param))
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("rows_through", ["finish", "small-batch"])
def test_grouped_first_pass_changes_no_output_bit(rows_through):
    """first_pass_group_sums changes the order of top-p's fp32 first-pass sums (a group's entries are added in the
    thread first), which only widens or keeps the pivot's range within its rounding bound: the output must be the
    ungrouped first pass's bit for bit and the oracle's, on rows with NaN, inf, negative and subnormal entries, ties
    across groups, entries above 1, a zero row, and p of 0 and 1, through both the finish and the small-batch path."""
    import reference as R
    from impl.testing.op_table import RENORM, mismatch

    g = torch.Generator().manual_seed(11)
    vocab = 7 * 4 * BLOCK + 13  # several steps a program, a partial last group and block
    probs = torch.softmax(3 * torch.randn(8, vocab, generator=g), -1)
    probs[1, :200] = probs[1, 200:400]  # ties across groups and blocks
    probs[2, ::5] = float("nan")
    probs[2, 1::7] = float("inf")
    probs[2, 2::9] = -0.5
    probs[3] = torch.rand(vocab, generator=g) * 2.0 ** -130  # subnormal entries only
    probs[4] = 1 + 5 * torch.rand(vocab, generator=g)  # every entry above 1 (the top bucket)
    probs[5] = 0.0
    probs[6, 3::11] = 2.0 ** -24  # entries exactly at a bucket start
    param = torch.tensor([0.9, 0.5, 0.95, 0.9, 0.3, 0.9, 0.999, 1.0])
    probs[7] = torch.softmax(torch.randn(vocab, generator=g), -1)
    param[0] = 0.0
    base = dataclasses.replace(renorm.DEFAULT_TUNING, chunk_align=4 * BLOCK, first_pass=(BLOCK, 1),
                               large_batch_first_pass=(BLOCK, 1), compact=(BLOCK, 1), target_programs=8,
                               finish_min_rows=1 if rows_through == "finish" else 10**9, segment_maxima=False,
                               write=(BLOCK, 1), finish=(4 * BLOCK, 1))
    grouped = dataclasses.replace(base, first_pass_group_sums=True)
    first = rplan._plan(len(probs), vocab, True, True, grouped).launches[0]
    assert first.meta["GROUPED"] and first.sizes[1] >= 4 * BLOCK and vocab % first.sizes[1], "several steps"
    plain = renorm.top_p_renorm(probs.to(DEV), param.to(DEV), tuning=base).cpu()
    got = renorm.top_p_renorm(probs.to(DEV), param.to(DEV), tuning=grouped).cpu()
    assert torch.equal(plain.view(torch.int32), got.view(torch.int32)), (plain != got).any(1)
    problem = mismatch(RENORM, got, R.top_p_renorm(probs, param))
    assert problem is None, problem
