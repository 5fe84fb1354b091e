"""impl.bench.renorm_inputs: its kept-set definition is the oracle's, its families are the rows they
say they are, and the kernels keep the definition's set on every family (interpreter on CPU, compiled
on the GPU) at small sizes, ties and one-token rows included."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import impl
import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
import reference as R
from ci.registration import register
from impl.bench.renorm_inputs import FAMILIES, SETTINGS, kept_by_definition
from impl.kernels.renorm.workspace import _launch_all
from impl.platform import default_device
from registered.renorm_tunings import PATH_VOCAB, SMALL_SHAPES

DEV = default_device()
LOW_END = int(rk.LOW_END)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_fp64_definition_keeps_what_the_exact_oracle_keeps(family):
    probs = FAMILIES[family][1](3, 600, torch.Generator().manual_seed(7))
    for op, value in [*SETTINGS, ("top_k", 1), ("top_p", 0.5)]:
        oracle = getattr(R, f"{op}_renorm")(probs, torch.full((3,), value)) != 0
        assert torch.equal(kept_by_definition(probs, op, value), oracle), (family, op, value)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=3)
def test_each_family_is_the_row_it_describes():
    vocab, gen = 20000, torch.Generator().manual_seed(3)
    rows = {name: make(4, vocab, gen) for name, (_, make) in FAMILIES.items()}
    for name, probs in rows.items():
        assert probs.dtype == torch.float32 and probs.shape == (4, vocab), name
        assert bool((probs >= 0).all()) and torch.allclose(probs.double().sum(1), torch.ones(4, dtype=torch.float64),
                                                           atol=1e-3), name

    def kept(name, p):
        return kept_by_definition(rows[name], "top_p", p).sum(1).double().median().item()

    # flat keeps far more than the control, peaked far fewer; one token holds 85-95%: p = 0.9 keeps a
    # handful of rows' worth at most and p = 0.8 the token alone
    assert kept("softmax1", 0.9) > 4 * kept("softmax3", 0.9) > 16 * kept("softmax6", 0.9)
    assert kept("softmax0.1", 0.9) > kept("softmax1", 0.9)
    assert kept("one-token", 0.8) == 1
    top = rows["one-token"].max(1).values
    assert bool(((top > 0.84) & (top < 0.96)).all())
    # bf16 rounding leaves ties: far fewer distinct values than entries
    assert rows["bf16-rounded"][0].unique().numel() < vocab // 4 < rows["softmax3"][0].unique().numel()
    # uniform: one value, 1 / vocab, across every row
    assert rows["uniform"].unique().tolist() == [torch.tensor(1.0 / vocab, dtype=torch.float32).item()]
    # zipf: the largest entry is 1 / H(vocab, 1.1) of the row, the same in every row (permuted ranks)
    weights = torch.arange(1, vocab + 1, dtype=torch.float64) ** -1.1
    assert torch.allclose(rows["zipf1.1"].max(1).values.double(), (weights[0] / weights.sum()).expand(4), rtol=1e-6)
    # sorted3: the control's kind of row, largest entry first: non-increasing, keeping what the control keeps
    assert bool((rows["sorted3"][:, 1:] <= rows["sorted3"][:, :-1]).all())
    assert kept("sorted3", 0.9) > 4 * kept("softmax6", 0.9) and kept("softmax1", 0.9) > 4 * kept("sorted3", 0.9)


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_kernels_keep_the_definitions_set_on_every_family(family):
    """Small shapes through both of each op's paths (finish and small-batch), on rows unlike the
    bench's: the kept set is the definition's and the output the exact oracle's (within fp32 rounding)."""
    rows, vocab = 3, PATH_VOCAB
    probs = FAMILIES[family][1](rows, vocab, torch.Generator().manual_seed(11))
    for finish_min_rows in (1, 1 << 20):
        tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, finish_min_rows=finish_min_rows)
        for op, value in SETTINGS:
            param = torch.full((rows,), value, dtype=torch.float32 if op == "top_p" else torch.int32)
            out = getattr(impl, f"{op}_renorm")(probs.to(DEV), param.to(DEV), tuning=tuning).cpu()
            want = kept_by_definition(probs, op, value)
            assert torch.equal(out != 0, want), (family, op, value, finish_min_rows)
            oracle = getattr(R, f"{op}_renorm")(probs, param)
            torch.testing.assert_close(out, oracle, rtol=2e-6, atol=1e-12)


def _low_bucket(key: int) -> int:
    """Top-k's LOW bucket of a key below 2^-25, by its definition (kernels.py): zero alone, then
    15 - floor(sqrt(2 d)) for a key d octaves below 2^-25 (exact integer square root)."""
    return 0 if key == 0 else 15 - math.isqrt(2 * (101 - (key >> 23)))


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
def test_a_top_k_pivot_below_the_first_buckets_is_narrowed_to_one_low_bucket():
    """Rows whose k-th largest key lies below 2^-25 with more keys there than the scratch holds: one row
    per biased exponent E of a key by the pivot (0: subnormal, to 101: just below 2^-25), and rows with
    fewer than k positive keys. Each is narrowed to its pivot's LOW bucket and the finish copies exactly
    that bucket's keys, from the bucket's first key (a pivot of 0 copies none and counts as compacted);
    the output is the oracle's. Without the narrowing these rows finish from their full row."""
    vocab, k, cap = 256, 40, 128
    exponents = list(range(0, 102, 3)) + [1, 2, 98, 100, 101]
    g = torch.Generator().manual_seed(4)
    rows = []
    for e in exponents:
        keys = torch.zeros(vocab, dtype=torch.int32)
        keys[0] = 127 << 23  # 1.0: the row's largest by far
        spread = torch.randint(-2, 2, (100,), generator=g).clamp(-e, 101 - e)  # exponents by e, below 2^-25
        keys[1:101] = ((e + spread) << 23) | torch.randint(0, 1 << 23, (100,), generator=g, dtype=torch.int32)
        keys[1] = (e << 23) | 5  # one key at E itself
        rows.append(keys[torch.randperm(vocab, generator=g)])
    zero_rows = torch.zeros(2, vocab)
    zero_rows[0, :10] = torch.rand(10, generator=g)  # 10 positive keys, k = 40: the pivot is 0
    zero_rows[1, 50:80] = 1e-30
    probs = torch.cat([torch.stack(rows).view(torch.float32), zero_rows])
    param = torch.full((probs.shape[0],), k, dtype=torch.int32)
    for kw in ({}, dict(segment_maxima_rows=1, large_batch_rows=1)):
        tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, **kw, candidate_capacity=cap)
        plan = rplan._plan(probs.shape[0], vocab, False, True, tuning)
        state = _launch_all(probs.to(DEV), None, param.to(DEV), plan, None).state.cpu()
        for r in range(probs.shape[0]):
            keys = probs[r].view(torch.int32)
            pivot = int(keys.topk(k).values[-1])
            assert int(state[r, int(rk.LO)]) == pivot, r
            start, copied = int(state[r, int(rk.COMPACTED_FROM)]), int(state[r, int(rk.NCAND)])
            if pivot == 0:
                assert (int(state[r, int(rk.COMPACTED)]), start, copied) == (1, 0, 0), r
                continue
            assert start <= pivot and _low_bucket(start) == _low_bucket(pivot), r
            assert start == 1 or _low_bucket(start - 1) != _low_bucket(pivot), r  # the bucket's first key
            same = sum(1 for x in keys.tolist() if 0 < x < LOW_END and _low_bucket(x) == _low_bucket(pivot))
            assert copied == same <= cap, r
        out = impl.top_k_renorm(probs.to(DEV), param.to(DEV), tuning=tuning).cpu()
        torch.testing.assert_close(out, R.top_k_renorm(probs, param), rtol=2e-6, atol=0)


def _split_shift(lo: int, hi: int) -> int:
    """A 16-way split's shift, by its definition (kernels.py _split_shift): the smallest s with
    (hi - lo - 1) >> s < 16."""
    s = 0
    while (hi - lo - 1) >> s >= 16:
        s += 1
    return s


def _overflowing_rows(vocab: int, g: torch.Generator) -> torch.Tensor:
    """Rows whose pivot's range overflows a small scratch at every attempt: near-flat (softmax of
    0.05 x randn: every key within an octave), uniform (one key), and three values repeated across
    the row inside one octave (ties a 16-way split cannot separate)."""
    flat = torch.softmax(0.05 * torch.randn(2, vocab, generator=g, dtype=torch.float64), -1).float()
    uniform = torch.full((1, vocab), 1.0 / vocab)
    three = torch.tensor([1.0, 1.25, 1.5])[torch.randint(0, 3, (1, vocab), generator=g)] * 1e-3
    return torch.cat([flat, uniform, three])


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=30)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_a_range_still_overflowing_at_the_last_attempt_is_narrowed_to_its_pivots_sub_range(top_p):
    """The last compaction attempt narrows a row that still does not fit: to the 16-way sub-range of
    its range holding the pivot (the pivot taken from the oracle), cut to the range's smallest and
    largest key; CHOSEN_COUNT counts the keys left in it and the finish copies exactly those when
    they fit. A uniform row collapses to its one key. Outputs are the oracle's. Without the narrowing
    every row here finishes from its full row (one program, a pass over the row per 16-way step)."""
    vocab, cap = PATH_VOCAB, 64
    probs = _overflowing_rows(vocab, torch.Generator().manual_seed(5))
    values = [0.3, 0.9, 0.9, 0.5] if top_p else [5, 100, 350, 200]
    param = torch.tensor(values, dtype=torch.float32 if top_p else torch.int32)
    oracle = (R.top_p_renorm if top_p else R.top_k_renorm)(probs, param)
    narrowed = 0
    for kw in ({}, dict(segment_maxima_rows=1, large_batch_rows=1)):
        tuning = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, **kw, candidate_capacity=cap,
                                     finish_min_rows=1)
        plan = rplan._plan(probs.shape[0], vocab, top_p, True, tuning)
        last = max(i for i, launch in enumerate(plan.launches) if launch.args == "compact")
        assert plan.launches[last].meta["NARROW"], "the finish path's last compaction narrows"

        def state_after(n_launches):
            part = dataclasses.replace(plan, launches=plan.launches[:n_launches])
            ws = _launch_all(probs.to(DEV), None, param.to(DEV), part, None)
            state = ws.state.cpu()
            return state, state.view(torch.float64)

        before, _ = state_after(last)
        after, fafter = state_after(last + 1)
        final, _ = state_after(len(plan.launches))
        for r in range(probs.shape[0]):
            keys = probs[r].view(torch.int32).long()
            lo0, hi0 = int(before[r, int(rk.LO)]), int(before[r, int(rk.HI)])
            if int(before[r, int(rk.COMPACTED)]) or int(before[r, int(rk.CHOSEN_COUNT)]) <= cap:
                continue
            narrowed += 1
            pivot = int(keys[oracle[r] != 0].min())
            s = _split_shift(lo0, hi0)
            sub_lo = lo0 + ((pivot - lo0) >> s << s)
            sub_hi = min(sub_lo + (1 << s), hi0)
            inside = keys[(keys >= lo0) & (keys < hi0)]
            lo1, hi1 = max(sub_lo, int(inside.min())), min(sub_hi, int(inside.max()) + 1)
            assert (int(after[r, int(rk.LO)]), int(after[r, int(rk.HI)])) == (lo1, hi1), (r, kw)
            n_in = int(((keys >= lo1) & (keys < hi1)).sum())
            assert int(after[r, int(rk.CHOSEN_COUNT)]) == n_in, (r, kw)
            if top_p:
                below = probs[r].double()[keys < lo1].sum().item()
                assert math.isclose(float(fafter[r, int(rk.BELOW_MASS)]), below, rel_tol=1e-12, abs_tol=1e-300), r
            else:
                assert int(after[r, int(rk.ABOVE_COUNT)]) == int((keys >= hi1).sum()), (r, kw)
            if r == 2:  # uniform: one key
                assert hi1 - lo1 == 1
            if n_in <= cap:  # the finish copied exactly the sub-range's keys
                assert (int(final[r, int(rk.NCAND)]), int(final[r, int(rk.COMPACTED_FROM)])) == (n_in, lo1), (r, kw)
        out = getattr(impl, f"{'top_p' if top_p else 'top_k'}_renorm")(probs.to(DEV), param.to(DEV), tuning=tuning)
        torch.testing.assert_close(out.cpu(), oracle, rtol=2e-6, atol=1e-12)
    assert narrowed >= 6, f"rows should overflow the scratch at their last attempt: {narrowed} of 8"
