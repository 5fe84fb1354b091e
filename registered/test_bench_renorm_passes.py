"""impl.bench.renorm_passes: the bytes each renorm launch is charged, from a call's per-row state.

The GPU table divides these bytes by one read plus one write of the rows; here a real call (the
interpreter on CPU) and a hand-written state check the accounting line by line: the first pass and
the write read every row, a compaction try reads only the rows no earlier try took and writes the
candidates it copied, the finish reads a compacted row's candidates and an uncompacted row's full row.
"""
from __future__ import annotations

import dataclasses

import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.bench.renorm_passes import launch_bytes
from impl.kernels.renorm import api
from impl.platform import default_device
from registered.renorm_tunings import SMALL_SHAPES

DEV = default_device()


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_a_hand_written_state_is_charged_launch_by_launch():
    """Top-p on the finish path: two compaction tries around a 4-way pass. Row 0 fits the first try,
    row 1 the second, row 2 never (its finish reads the full row)."""
    vocab = 1000
    plan = rplan._plan(3, vocab, True, True, renorm.RenormTuning(finish_min_rows=1))
    assert [step.args for step in plan.launches] == ["first", "compact", "pass", "compact", "finish"]
    state = torch.zeros(3, int(rk.STATE_W), dtype=torch.int64)
    state[:, int(rk.COMPACTED)] = torch.tensor([1, 2, 0])
    state[:, int(rk.NCAND)] = torch.tensor([30, 40, 0])
    row = 4 * vocab
    assert launch_bytes(plan, state, vocab) == [
        ("first pass", 3 * row, 0), ("compact (try 1)", 3 * row, 4 * 30),
        ("4-way pass (uncompacted rows)", 2 * row, 0), ("compact (try 2)", 2 * row, 4 * 40),
        ("finish", 4 * 30 + 4 * 40 + row, 0), ("write", 3 * row, 3 * row)]


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=5)
def test_a_real_calls_state_gives_the_candidates_it_copied():
    """Top-k through the interpreter: the compaction's charge is the candidates the call really copied."""
    g = torch.Generator().manual_seed(0)
    vocab = 700
    probs = torch.softmax(3 * torch.randn(2, vocab, generator=g), -1).to(DEV)
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=1)
    plan = rplan._plan(2, vocab, False, True, tuning)
    state = api._select(probs, None, torch.tensor([5, 40]).to(DEV), plan)[0].cpu()
    assert state[:, int(rk.COMPACTED)].tolist() == [1, 1]
    ncand = state[:, int(rk.NCAND)].tolist()
    assert all(0 < n < vocab for n in ncand)
    got = dict((name, (read, written)) for name, read, written in launch_bytes(plan, state, vocab))
    assert got["compact (try 1)"] == (2 * 4 * vocab, 4 * sum(ncand))
    assert got["finish"] == (4 * sum(ncand), 0)
