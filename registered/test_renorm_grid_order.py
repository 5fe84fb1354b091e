"""Renorm launches that walk their (chunk, row) grid last to first (RenormTuning.reversed_launches), and
how many (chunk, row) programs the plan aims for by rows (RenormTuning.target_programs).

Reversing a launch only changes which rows its programs reach first (so it begins on the rows the
launch before it left in the L2): every program must still cover exactly one (chunk, row), the
plan must reverse exactly the launches named, and the output must not change by one bit.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.kernels._backend import tl, triton
from impl.kernels.renorm.tuning import REVERSIBLE_LAUNCHES
from impl.platform import default_device

DEV = default_device()


@triton.jit
def _record_chunk_and_row(out_ptr, REVERSED: tl.constexpr):
    chunk, row = rk._chunk_and_row(REVERSED)
    slot = tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)
    tl.store(out_ptr + 2 * slot, chunk)
    tl.store(out_ptr + 2 * slot + 1, row)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("reversed_", [False, True], ids=["forward", "reversed"])
def test_each_program_takes_one_chunk_and_row(reversed_):
    """Program (i, j) of a (chunks, rows) grid takes (i, j), or reversed (chunks - 1 - i, rows - 1 - j):
    every (chunk, row) exactly once either way."""
    chunks, rows = 3, 5
    poison = -7
    out = torch.full((rows * chunks * 2,), poison, dtype=torch.int32, device=DEV)
    _record_chunk_and_row[(chunks, rows)](out, REVERSED=reversed_)
    got = out.view(rows, chunks, 2).cpu()
    for j in range(rows):
        for i in range(chunks):
            want = [chunks - 1 - i, rows - 1 - j] if reversed_ else [i, j]
            assert got[j, i].tolist() == want, (i, j, got[j, i].tolist())
    taken = {tuple(pair) for pair in got.view(-1, 2).tolist()}
    assert taken == {(i, j) for i in range(chunks) for j in range(rows)}


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_plan_reverses_the_launches_named(top_p):
    """Each name reverses its launches (every compaction for "compact") and no other; by op."""
    base = dataclasses.replace(renorm.DEFAULT_TUNING, finish_min_rows=1, compact_attempts=2, reversed_launches=())

    def reversed_kinds(tuning):
        plan = rplan._plan(64, 4096, top_p, True, tuning)
        return [(launch.args, launch.meta.get("REVERSED")) for launch in (*plan.launches, plan.write)]

    forward = reversed_kinds(base)
    assert all(flag in (False, None) for _, flag in forward), forward
    for name in REVERSIBLE_LAUNCHES:
        kind = {"first pass": "first", "compact": "compact", "write": "write"}[name]
        got = reversed_kinds(dataclasses.replace(base, reversed_launches=(name,)))
        assert [flag for args, flag in got if args == kind] and all(flag for args, flag in got if args == kind), got
        assert not any(flag for args, flag in got if args != kind), got
    other_op = ((), ("compact",)) if not top_p else (("compact",), ())
    assert not any(flag for _, flag in reversed_kinds(dataclasses.replace(base, reversed_launches=other_op)))


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("bad", [("compaction",), "write", (("write",),), (("write",), ("first pass",), ()), (1,)])
def test_reversed_launches_refuses_unknown_names(bad):
    with pytest.raises(ValueError, match="reversed_launches"):
        renorm.RenormTuning(reversed_launches=bad)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=6)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
@pytest.mark.parametrize("segment_maxima", [True, False], ids=["map", "no-map"])
def test_walking_the_grid_backwards_changes_no_bit(top_p, segment_maxima):
    """Every reversible launch reversed, on several chunks and rows (ties across chunks, a flat row
    that overflows a small scratch), and the write's stores marked first out of the L2: bit-identical
    to the forward grid, and the oracle's. The reductions' last ticket then falls to another chunk
    of each row."""
    import reference as R
    from impl.testing.op_table import RENORM, mismatch

    g = torch.Generator().manual_seed(11)
    vocab = 4 * 1024 + 19
    probs = torch.softmax(3 * torch.randn(4, vocab, generator=g), -1)
    probs[1, :300] = probs[1, 300:600]  # ties across chunks
    probs[3] = torch.softmax(0.05 * torch.randn(vocab, generator=g), -1)  # flat: overflows the scratch
    param = torch.tensor([0.9, 0.5, 0.99, 0.8]) if top_p else torch.tensor([5, 40, 300, 700])
    base = dataclasses.replace(renorm.DEFAULT_TUNING, chunk_align=1024, target_programs=8, finish_min_rows=1,
                               candidate_capacity=512, segment_maxima=segment_maxima, segment_maxima_rows=1)
    op, ref = (renorm.top_p_renorm, R.top_p_renorm) if top_p else (renorm.top_k_renorm, R.top_k_renorm)
    forward = op(probs.to(DEV), param.to(DEV), tuning=base).cpu()
    backward = op(probs.to(DEV), param.to(DEV),
                  tuning=dataclasses.replace(base, reversed_launches=REVERSIBLE_LAUNCHES,
                                             write_evict_first=True)).cpu()
    assert rplan._plan(4, vocab, top_p, True, base).chunks >= 2, "several chunks a row"
    assert torch.equal(forward.view(torch.int32), backward.view(torch.int32))
    problem = mismatch(RENORM, backward, ref(probs, param))
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_target_programs_by_rows():
    """target_programs is a pair by rows: below target_programs_rows the first, from it the second (below
    large_batch_rows); one int sets both. The plan's chunks follow: cdiv(programs, rows) when the row allows."""
    t = dataclasses.replace(renorm.DEFAULT_TUNING, target_programs=(512, 1024), target_programs_rows=64,
                            large_batch_rows=1 << 20, chunk_align=32, first_pass=(512, 1))
    vocab = 1 << 15  # 1024 steps of 32: the first pass's counter fields need at least 5 chunks
    assert rplan._plan(32, vocab, False, True, t).chunks == 512 // 32
    assert rplan._plan(63, vocab, False, True, t).chunks == -(-512 // 63)
    assert rplan._plan(64, vocab, False, True, t).chunks == 1024 // 64
    both = dataclasses.replace(t, target_programs=384)
    assert both.target_programs == (384, 384)
    assert rplan._plan(32, vocab, False, True, both).chunks == 384 // 32
    assert rplan._plan(64, vocab, False, True, both).chunks == 384 // 64
