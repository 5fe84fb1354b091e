"""The renorm first pass's segment maxima: the map the compaction and the write skip segments by.

The first pass stores, per row, the largest key (int32 bits of the value as the select weighs it: NaN,
+-inf, negative and -0.0 entries weigh 0) of every 32 consecutive entries. A map entry too low would
drop kept entries (the op tests catch that as a wrong output); here the map itself is compared with a
torch computation, on a workspace whose map was poisoned after an earlier call, with a vocabulary whose
last segment is partial and chunks that split the row; a threshold equal to a segment's maximum must
read that segment; the write fills every entry of a poisoned output (it skips reading segments,
not writing them); and every plan's chunks stay whole segments within the first pass's counters.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.kernels.renorm.workspace import _launch_all
from impl.platform import default_device
from registered.renorm_tunings import PATH_VOCAB, SMALL_SHAPES

DEV = default_device()


def _expected(probs: torch.Tensor) -> torch.Tensor:
    """Per row, the largest key of each 32 entries: written for obviousness, one segment at a time."""
    seg = int(rk.SEG)
    rows, vocab = probs.shape
    out = torch.empty(rows, -(-vocab // seg), dtype=torch.int32)
    for r in range(rows):
        for j in range(0, vocab, seg):
            part = probs[r, j:j + seg].double()
            weighed = torch.where(torch.isfinite(part) & (part > 0), part, torch.zeros_like(part)).float()
            out[r, j // seg] = int(weighed.view(torch.int32).max())
    return out


def _rows(seed: int, vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(3 * torch.randn(3, vocab, generator=g), -1)
    p[0, 5] = float("nan")
    p[0, 40:72] = -1.0  # a whole segment of negatives: its maximum is key 0
    p[1, 7] = float("inf")
    p[1, 100] = -0.0
    p[2, -3:] = 0.5  # the largest keys in the partial last segment
    return p


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=4)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_every_segment_maximum_is_rewritten_by_each_call(top_p):
    vocab = PATH_VOCAB + 17  # a partial last segment
    assert vocab % int(rk.SEG), "the vocabulary must end in a partial segment"
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=1, segment_maxima=True,
                                 segment_maxima_rows=1)
    plan = rplan._plan(3, vocab, top_p, True, tuning)
    assert plan.chunks > 1, "chunks must split the row (segments from several programs)"
    param = (torch.tensor([0.9, 0.5, 0.99]) if top_p else torch.tensor([5, 40, 3])).to(DEV)
    first = _launch_all(_rows(1, vocab).to(DEV), None, param, plan, None)
    first.seg.fill_(0x7FFFFFFF)  # a segment the next call leaves unwritten keeps a key above every real one
    probs = _rows(2, vocab)
    ws = _launch_all(probs.to(DEV), None, param, plan, None)
    assert ws is first, "the second call must reuse the poisoned workspace"
    assert torch.equal(ws.seg.cpu(), _expected(probs))


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=4)
@pytest.mark.parametrize("finish_min_rows", [1, 10**9], ids=["finish", "small-batch"])
def test_a_segment_whose_maximum_is_exactly_the_threshold_is_read(finish_min_rows):
    """The k-th largest entry is 2^-12, the first pass's bucket boundary (so the compaction's lo) and
    the pivot (the write's threshold), alone in its segment: the compaction and the write must both read
    a segment whose largest key equals their threshold. Oracle: reference.top_k_renorm."""
    import reference as R
    from impl.testing.op_table import RENORM, mismatch

    vocab = PATH_VOCAB
    probs = torch.full((2, vocab), 1e-7)
    probs[:, [3, 300, vocab - 2]] = torch.tensor([0.3, 0.2, 0.1])
    probs[:, 100] = 2.0 ** -12  # segment 3 (entries 96..127): every other entry is 1e-7
    k = torch.tensor([4, 4])
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=finish_min_rows,
                                 segment_maxima=True, segment_maxima_rows=1)
    got = renorm.top_k_renorm(probs.to(DEV), k.to(DEV), tuning=tuning).cpu()
    problem = mismatch(RENORM, got, R.top_k_renorm(probs, k))
    assert problem is None, problem
    assert got[0, 100] > 0, "the entry at the threshold is kept"


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_every_plan_keeps_the_first_pass_counters_and_the_segments_whole(top_p):
    """Host-side plan arithmetic over vocabularies up to 2^24 and batches up to 4096: the first pass's
    programs read at most first_pass_steps_max blocks per lane (its counter fields: 15 for top-k's
    4-bit ones, 255 for top-p's 8-bit ones) and at most FIELD_SUM_MAX entries with padding (its 16-bit
    sums), chunks are whole segments and cover the row."""
    seg, sum_max = int(rk.SEG), int(rk.FIELD_SUM_MAX)
    assert rk.first_pass_steps_max(top_p) == (255 if top_p else 15)
    grouped = dict(first_pass_group_sums=True, segment_maxima=False)  # top-p's fields count 4 keys a step: 63 steps
    tunings = [renorm.DEFAULT_TUNING, dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES),
               renorm.RenormTuning(chunk_align=32, first_pass=(32, 1), large_batch_first_pass=(64, 2)),
               renorm.RenormTuning(chunk_align=32768, first_pass=(32768, 8), large_batch_first_pass=(16384, 8)),
               renorm.RenormTuning(**grouped), renorm.RenormTuning(chunk_align=32, first_pass=(32, 1),
                                                                   large_batch_first_pass=(64, 2), **grouped)]
    for tuning in tunings:
        for vocab in (1, 31, 32, 33, 1000, 129280, 151936, 1 << 20, (1 << 24) + 7):
            for bs in (1, 7, 64, 256, 4096):
                plan = rplan._plan(bs, vocab, top_p, True, tuning)
                first = plan.launches[0]
                assert first.args == "first"
                chunk_len, chunks = first.sizes[1], first.sizes[2]
                block = first.meta["BLOCK"]
                where = f"{tuning} vocab {vocab} rows {bs}"
                assert chunk_len % seg == 0 and chunks * chunk_len >= vocab > (chunks - 1) * chunk_len, where
                field_max = rk.first_pass_steps_max(top_p, first.meta["GROUPED"])
                assert first.meta["GROUPED"] == (top_p and tuning.first_pass_group_sums), where
                assert -(-chunk_len // block) <= field_max, where
                assert -(-chunk_len // block) * block <= sum_max, where


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("segment_maxima", [True, False], ids=["map", "no-map"])
def test_the_write_fills_every_entry_of_a_poisoned_output(segment_maxima):
    """The write skips reading the segments below the pivot but must still write their zeros: the
    output starts as NaN, and every entry must end equal to the oracle's."""
    import reference as R
    from impl.testing.op_table import RENORM, mismatch

    probs = _rows(3, PATH_VOCAB + 17)
    k = torch.tensor([5, 40, 3])
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=1,
                                 segment_maxima=segment_maxima, segment_maxima_rows=1)
    plan = rplan._plan(3, probs.shape[1], False, True, tuning)
    out = torch.full(probs.shape, float("nan")).to(DEV)
    _launch_all(probs.to(DEV), None, k.to(DEV), plan, out)
    got = out.cpu()
    assert not got.isnan().any(), "entries the write left unwritten"
    problem = mismatch(RENORM, got, R.top_k_renorm(probs, k))
    assert problem is None, problem
