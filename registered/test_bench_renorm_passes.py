"""impl.bench.renorm_passes: the bytes each renorm launch is charged, from a call's per-row state.

The GPU table divides these bytes by one read plus one write of the rows; here a real call (the
interpreter on CPU) and a hand-written state check the accounting line by line: the first pass reads
every row and writes its segment maxima; a compaction try reads only the rows no earlier try took (their
maxima and the segments at or above the range's start; top-p's first try, every key) and writes the
candidates it copied; the finish reads a compacted row's candidates and an uncompacted row's full row; the
write reads the maxima and the segments at or above the pivot, and writes every row.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.bench.renorm_passes import launch_bytes
from impl.kernels.renorm.workspace import _launch_all
from impl.platform import default_device
from registered.renorm_tunings import SMALL_SHAPES

DEV = default_device()


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("split_by", ["compaction", "pass"])
def test_a_hand_written_state_is_charged_launch_by_launch(split_by):
    """Top-p on the finish path: two compaction tries. Row 0 fits the first try, row 1 the second, row 2
    never (its finish reads the full row). The first try weighs every key (full rows) and, below
    large_batch_rows, reads the rows it did not take again to split them; from large_batch_rows a 4-way
    pass reads them instead. The second try and the write read the map and the segments at or above
    their threshold."""
    vocab = 1000  # 31 segments of 32 entries and one of 8
    large_batch_rows = 1 if split_by == "pass" else 128
    plan = rplan._plan(3, vocab, True, True, renorm.RenormTuning(finish_min_rows=1, segment_maxima=True,
                                                                       segment_maxima_rows=1,
                                                                       large_batch_rows=large_batch_rows))
    split_launch = ["pass"] if split_by == "pass" else []
    assert [step.args for step in plan.launches] == ["first", "compact", *split_launch, "compact", "finish"]
    state = torch.zeros(3, int(rk.STATE_W), dtype=torch.int64)
    state[:, int(rk.COMPACTED)] = torch.tensor([1, 2, 0])
    state[:, int(rk.NCAND)] = torch.tensor([30, 40, 0])
    state[:, int(rk.COMPACTED_FROM)] = torch.tensor([50, 50, 0])
    state[:, int(rk.LO)] = torch.tensor([100, 60, 0])  # the pivots
    seg_max = torch.full((3, 32), 5, dtype=torch.int32)
    seg_max[0, [0, 31]] = 100
    seg_max[1, 3], seg_max[1, 31] = 70, 55
    row, map_bytes, line, tail = 4 * vocab, 4 * 32, 4 * 32, 4 * 8
    split = [("4-way pass (uncompacted rows)", 2 * row, 0)] if split_by == "pass" else []
    first_try_reads = 3 * row + (2 * row if split_by == "compaction" else 0)
    assert launch_bytes(plan, state, vocab, seg_max) == [
        ("first pass", 3 * row, 3 * map_bytes), ("compact (try 1)", first_try_reads, 4 * 30), *split,
        ("compact (try 2)", (map_bytes + line + tail) + (map_bytes + row), 4 * 40),
        ("finish", 4 * 30 + 4 * 40 + row, 0),
        ("write", (map_bytes + line + tail) + (map_bytes + line) + (map_bytes + row), 3 * row)]


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=5)
def test_a_real_calls_state_gives_the_candidates_it_copied():
    """Top-k through the interpreter: the compaction's charge is the candidates the call really copied,
    and the segments it and the write read are the ones at or above the range's start and the pivot."""
    g = torch.Generator().manual_seed(0)
    vocab = 700
    probs = torch.softmax(3 * torch.randn(2, vocab, generator=g), -1).to(DEV)
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=1, segment_maxima_rows=1)
    plan = rplan._plan(2, vocab, False, True, tuning)
    ws = _launch_all(probs, None, torch.tensor([5, 40]).to(DEV), plan, None)
    state, seg_max = ws.state.cpu(), ws.seg.cpu()
    assert state[:, int(rk.COMPACTED)].tolist() == [1, 1]
    ncand = state[:, int(rk.NCAND)].tolist()
    assert all(0 < n < vocab for n in ncand)
    got = dict((name, (read, written)) for name, read, written in launch_bytes(plan, state, vocab, seg_max))
    keys = probs.cpu().view(torch.int32)
    lines = [sum(4 * int(((keys[r, j:j + 32] >= lo).any())) * len(keys[r, j:j + 32]) for j in range(0, vocab, 32))
             for r, lo in enumerate(state[:, int(rk.COMPACTED_FROM)].tolist())]
    assert got["compact (try 1)"] == (2 * 4 * 22 + sum(lines), 4 * sum(ncand))
    assert 0 < sum(lines) < 2 * 4 * vocab, "the range's start skips some segments and keeps others"
    assert got["finish"] == (4 * sum(ncand), 0)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_without_the_segment_maxima_the_compaction_and_the_write_read_whole_rows():
    vocab = 1000
    plan = rplan._plan(2, vocab, False, True, renorm.RenormTuning(finish_min_rows=1, segment_maxima=False))
    state = torch.zeros(2, int(rk.STATE_W), dtype=torch.int64)
    state[:, int(rk.COMPACTED)] = 1
    state[:, int(rk.NCAND)] = 10
    state[:, int(rk.LO)] = 100
    seg_max = torch.zeros(2, 32, dtype=torch.int32)  # left by an earlier call: not read
    row = 4 * vocab
    assert launch_bytes(plan, state, vocab, seg_max) == [
        ("first pass", 2 * row, 0), ("compact (try 1)", 2 * row, 2 * 4 * 10), ("finish", 2 * 4 * 10, 0),
        ("write", 2 * row, 2 * row)]


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_top_ps_probe_is_charged_its_sample_and_the_compaction_every_row():
    """With top-p's probe in place of the first pass: the probe reads SAMPLE entries of each chunk (the last
    chunk's, what it holds), and the first compaction still reads every row in full."""
    vocab = 800
    tuning = renorm.RenormTuning(probe_range=(False, True), one_attempt_rows=1 << 30, large_batch_rows=(64, 1),
                                 finish_min_rows=1, probe_sample=64, chunk_align=256, large_batch_programs=8)
    plan = rplan._plan(2, vocab, True, True, tuning)
    probe = plan.launches[0]
    assert probe.args == "probe" and probe.sizes[1:] == (256, 4), probe.sizes  # chunks of 256, the last 32
    state = torch.zeros(2, int(rk.STATE_W), dtype=torch.int64)
    state[:, int(rk.COMPACTED)] = 1
    state[:, int(rk.NCAND)] = 10
    got = launch_bytes(plan, state, vocab, torch.zeros(2, 32, dtype=torch.int32))
    assert got[0] == ("probe", 2 * 4 * (3 * 64 + 32), 0)
    assert got[1] == ("compact (try 1)", 2 * 4 * vocab, 2 * 4 * 10)
