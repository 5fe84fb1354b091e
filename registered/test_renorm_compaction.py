"""top_k / top_p renorm: compaction, the finish kernel, the plain passes, the first split's ranges.

Batches of RenormTuning.finish_min_rows rows or more try, after the first pass and after
each full pass that follows, to copy a row's keys in its current range into a scratch of
candidate_capacity values; the finish kernel then completes each row from its candidates, or
from its full row when it never fit. Smaller batches compact once into a whole-row scratch.
With a tiny capacity, one batch holds rows compacted by the first attempt, rows compacted
later, and rows never compacted; the per-row state (which attempt compacted the row) proves
each path really ran, and the result must still match the exact oracle. Small batches end by
gathering the keys still in range and sorting them, or (too many) running range passes over
them: both are forced and checked the same way. Rows above 1 and below 2^-24 exercise the
widest ranges the first split leaves. The op table's samples are small batches (the plain
path); here they also run through the finish path.
"""
from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

import impl.kernels as K
import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from impl.kernels.renorm import api
import reference as R
from ci.registration import register
from registered.renorm_tunings import PATH_VOCAB, SMALL_SHAPES
from registered.schedule import per_commit_share
from impl.platform import default_device
from impl.testing.op_table import RENORM, case_id, cases, clone_kwargs, mismatch, run_op, run_reference

DEV = default_device()
# Per commit on cpu these path tests run a covering share of their parameters and inner path settings
# (registered/schedule.py per_commit_share): every path and every top-k / top-p class once; the cross product
# runs in nightly/cpu/kernels.
CAP = 8
VOCAB = PATH_VOCAB  # three chunks: candidates from several programs per row


def _rows(seed: int) -> torch.Tensor:
    """Rows built so that each compaction path is taken (see the asserts on the state)."""
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    spread = lambda n: torch.randperm(VOCAB, generator=g)[:n]  # noqa: E731  (positions in every chunk)
    p = 1e-5 * rand(7, VOCAB)  # a floor below 2^-16: the first split's top bucket [2^-12, ...) holds only what is set
    p[0, spread(5)] = 0.1 + 0.05 * rand(5)  # five large entries: fit the scratch from the first compacting pass
    p[1, spread(40)] = 2.0 ** (-12 + 4 * rand(40))  # forty across the top bucket: fit only once the range narrows
    p[2] = 1.0  # every entry ties: never fits
    p[3] = 0.0  # zero mass: all zeros out; never fits (top-p), a pivot of 0 copies nothing (top-k)
    p[4] = 1e6 * (1 + rand(VOCAB))  # above 1: the first split's widest range [2^-8, inf)
    p[5] = 1e-9 * rand(VOCAB)  # below 2^-24: the first split's bottom range
    p[6, spread(VOCAB // 2)] = 0.25  # a wide tie block above small values
    return p


def _params(top_p: bool) -> torch.Tensor:
    if top_p:
        return torch.tensor([0.5, 0.6, 0.7, 0.9, 0.8, 0.3, 0.95])
    return torch.tensor([3, 20, 40, 7, 150, 9, 64])


def _tuning(**changes) -> renorm.RenormTuning:
    # segment maxima at these small batches too: top-k's compaction reads only the listed segments
    return dataclasses.replace(renorm.DEFAULT_TUNING, **{**SMALL_SHAPES, "segment_maxima_rows": 1, **changes})


def _state(probs: torch.Tensor, param: torch.Tensor, top_p: bool, tuning: renorm.RenormTuning) -> torch.Tensor:
    plan = rplan._plan(probs.shape[0], probs.shape[1], top_p, True, tuning)
    return api._select(probs, None, param, plan)[0]


def _compacted_by(probs: torch.Tensor, param: torch.Tensor, top_p: bool, tuning: renorm.RenormTuning) -> list[int]:
    """The pass that compacted each row (0: never), read from the select's state."""
    return _state(probs, param, top_p, tuning)[:, int(rk.COMPACTED)].tolist()


SEEDS_X_TOP_P = [pytest.param(seed, top_p, id=f"{seed}-{'top_p' if top_p else 'top_k'}")
                 for seed in (1, 2) for top_p in (False, True)]


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=25)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=60)
@pytest.mark.parametrize("seed, top_p", per_commit_share(SEEDS_X_TOP_P, [SEEDS_X_TOP_P[0], SEEDS_X_TOP_P[3]]))
def test_compaction_paths_match_the_oracle(seed, top_p):
    tuning = _tuning(candidate_capacity=CAP, finish_min_rows=2, compact_attempts=3)  # three chances to fit
    probs, param = _rows(seed), _params(top_p)
    by = _compacted_by(probs.to(DEV), param.to(DEV), top_p, tuning)
    assert by[0] == 1, f"row 0 should fit from the first attempt: {by}"
    assert by[1] > 1, f"row 1 should fit only on a later attempt: {by}"
    assert by[2] == 0, f"a tied row must never fit {CAP} slots: {by}"
    # top-k's zero row: its pivot is 0, known when the last attempt narrows it (kernels.py _narrow), no copy
    assert by[3] == (0 if top_p else 3), f"the zero row: {by}"
    assert rplan._split(len(probs), VOCAB, tuning, top_p)[1] >= 3, "rows should span several chunks"
    oracle, op = (R.top_p_renorm, K.top_p_renorm) if top_p else (R.top_k_renorm, K.top_k_renorm)
    problem = mismatch(RENORM, op(probs.to(DEV), param.to(DEV), tuning=tuning), oracle(probs, param))
    assert problem is None, f"compacted by pass {by}: {problem}"


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("seed", [5, 10])
def test_top_p_first_compaction_splits_like_the_pass_it_replaces(seed):
    """Below large_batch_rows, top-p's first compaction splits the rows that did not fit itself (no pass
    launch before the second attempt). The same batch with the pass launch (large_batch_rows at the
    batch: same split, other shapes) must leave every state word and output bit the same, and row 1 must
    fit on the second attempt, so the split really fed it: twelve entries across one octave above 2^-12
    (more than the scratch's 8 in the first range, about 3 in each quarter of it) over a floor too light
    to move the first range, whatever order the first pass sums in."""
    g = torch.Generator().manual_seed(seed)
    probs, param = _rows(seed), _params(True)
    probs[1] = 1e-9 * torch.rand(VOCAB, generator=g)
    octave = (torch.arange(12) + torch.rand(12, generator=g)) / 13
    probs[1, torch.randperm(VOCAB, generator=g)[:12]] = 2.0 ** -12 * (1 + octave)
    probs, param = probs.to(DEV), param.to(DEV)
    split = _tuning(candidate_capacity=CAP, finish_min_rows=2, compact_attempts=2)
    with_pass = dataclasses.replace(split, large_batch_rows=(split.large_batch_rows[0], len(probs)))
    kinds = lambda t: [launch.args for launch in rplan._plan(len(probs), VOCAB, True, True, t).launches]  # noqa: E731
    assert kinds(split) == ["first", "compact", "compact", "finish"], kinds(split)
    assert kinds(with_pass) == ["first", "compact", "pass", "compact", "finish"], kinds(with_pass)
    state, state_with_pass = (_state(probs, param, True, t)[:, :int(rk.FIRST_TICKET)] for t in (split, with_pass))
    by = state[:, int(rk.COMPACTED)].tolist()
    assert by[1] == 2, f"row 1 should fit on the second attempt, fed by the split: {by}"
    assert torch.equal(state, state_with_pass), f"state words differ in rows {(state != state_with_pass).any(1)}"
    out = K.top_p_renorm(probs, param, tuning=split)
    assert torch.equal(out, K.top_p_renorm(probs, param, tuning=with_pass))
    problem = mismatch(RENORM, out, R.top_p_renorm(probs.cpu(), param.cpu()))
    assert problem is None, problem


ONE_ATTEMPT = [pytest.param(1, {"compact_attempts": 1}, id="1-compact_attempts"),
               pytest.param(2, {"one_attempt_rows": (1 << 30, 7)}, id="2-one_attempt_rows")]


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("seed, one", ONE_ATTEMPT)
def test_top_p_single_compaction_narrows_the_rows_that_do_not_fit(seed, one):
    """With one compaction attempt (compact_attempts 1, or a batch from one_attempt_rows), top-p's first
    compaction, which weighs every key, is also the last: the rows that do not fit its scratch are narrowed in
    that launch (16 weighed sub-ranges, the finish then copying the kept one from the row), on a ticket word of
    their own drawn after the masses' ticket, since the narrowing's last program needs the exact mass below the
    range the masses' last program stores. Every row must match the oracle, twice on the same workspace (both
    tickets reset), and each row that did not fit must have been narrowed: its chosen sub-range is one of
    _narrow's, at LOW_AT and above."""
    probs, param = _rows(seed).to(DEV), _params(True).to(DEV)
    single = _tuning(candidate_capacity=CAP, finish_min_rows=2, **one)
    plan = rplan._plan(len(probs), VOCAB, True, True, single)
    assert [launch.args for launch in plan.launches] == ["first", "compact", "finish"]
    compact = plan.launches[1].meta
    assert compact["MASSES"] and compact["NARROW"] and compact["NARROW_TICKET"] == compact["TICKET"] + 1, compact
    state = _state(probs, param, True, single)
    by, chosen = state[:, int(rk.COMPACTED)].tolist(), state[:, int(rk.CHOSEN)].tolist()
    assert by[0] == 1 and all(b == 0 for b in by[1:]), f"row 0 alone fits {CAP} slots: {by}"
    assert all(c >= int(rk.LOW_AT) for c in chosen[1:]), f"rows 1-6 narrowed in the compaction: chosen {chosen}"
    assert not state[:, int(rk.FIRST_TICKET):].any(), "every ticket word back at 0 for the next call"
    want = R.top_p_renorm(probs.cpu(), param.cpu())
    for call in range(2):
        problem = mismatch(RENORM, K.top_p_renorm(probs, param, tuning=single), want)
        assert problem is None, f"call {call}: {problem}"


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_one_attempt_rows_takes_one_attempt_from_its_batch_on():
    """one_attempt_rows is by rows and by op: on the bench's vocabulary, top-p below it keeps compact_attempts'
    pass and second compaction, from it one compaction that narrows (and draws its own ticket word); top-k,
    whose setting stays out of reach, keeps its plan at every batch."""
    tuning = dataclasses.replace(renorm.DEFAULT_TUNING, compact_attempts=(1, 2), one_attempt_rows=(1 << 30, 128))
    kinds = lambda bs, top_p, t: [launch.args for launch in rplan._plan(bs, 129280, top_p, True, t).launches]  # noqa: E731
    for bs in (64, 128, 256):
        assert kinds(bs, False, tuning) == kinds(bs, False, renorm.DEFAULT_TUNING), bs
        assert tuning.attempts(bs, True) == (1 if bs >= 128 else 2), bs
        launches = rplan._plan(bs, 129280, True, True, tuning).launches
        compacts = [launch.meta for launch in launches if launch.args == "compact"]
        if bs < 128:
            assert kinds(bs, True, tuning) == kinds(bs, True, renorm.DEFAULT_TUNING), bs
            assert len(compacts) == 2 and not compacts[0]["NARROW"] and compacts[1]["NARROW"], bs
        else:
            assert [launch.args for launch in launches] == ["first", "compact", "finish"], bs
            assert compacts[0]["NARROW"] and compacts[0]["NARROW_TICKET"] == compacts[0]["TICKET"] + 1, bs


TOP_K_TOP_P = [pytest.param(False, id="top_k"), pytest.param(True, id="top_p")]


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=40)
@pytest.mark.parametrize("top_p", per_commit_share(TOP_K_TOP_P, TOP_K_TOP_P[1:]))
def test_finish_and_small_batch_paths_agree(top_p):
    """Same batch through compaction + finish (rows that never fit included) and through the
    small-batch passes (one compaction into a whole-row scratch, then (chunk, row) programs)."""
    probs, param = _rows(5).to(DEV), _params(top_p).to(DEV)
    op = K.top_p_renorm if top_p else K.top_k_renorm
    finish = _tuning(candidate_capacity=CAP, finish_min_rows=2)
    by = _compacted_by(probs, param, top_p, finish)
    assert 0 in by and 1 in by, f"need compacted and never-fitting rows: {by}"
    finished = op(probs, param, tuning=finish)
    small = _tuning(candidate_capacity=CAP, finish_min_rows=10**9)
    by = _compacted_by(probs, param, top_p, small)
    assert set(by) == {1}, f"the small-batch scratch holds any row: {by}"
    assert torch.equal(finished, op(probs, param, tuning=small))
    oracle = R.top_p_renorm if top_p else R.top_k_renorm
    problem = mismatch(RENORM, finished, oracle(probs.cpu(), param.cpu()))
    assert problem is None, problem


RENORM_CASES = [c for c in cases(large=False) if c[0].name in ("top_k_renorm", "top_p_renorm")]


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=40)
@pytest.mark.parametrize("case", RENORM_CASES, ids=case_id)
def test_op_samples_through_the_finish_path(case):
    """Every op-table edge case (ties, clamped k and p, scalars, zero rows) via compaction + finish."""
    tuning = _tuning(finish_min_rows=1)
    op, sample = case
    kwargs = sample.make(DEV)
    assert rplan._steps(len(kwargs["probs"]), op.name == "top_p_renorm", tuning)[-1][0] == "finish"
    got = run_op(op, functools.partial(op.impl, tuning=tuning), clone_kwargs(kwargs))
    for g, w in zip(got, run_reference(op, kwargs), strict=True):
        problem = mismatch(op.compare, g, w)
        assert problem is None, problem


def _finished_by(probs: torch.Tensor, param: torch.Tensor, top_p: bool, tuning: renorm.RenormTuning) -> list[int]:
    """How the small-batch gather found each row's pivot (0: its range was one key already)."""
    return _state(probs, param, top_p, tuning)[:, int(rk.FINISHED_BY)].tolist()


# top-p runs both (its range loop stores BELOW_MASS: a line only top-p x looped reaches); top-k the cheap loop
SMALL_BATCH_SORT_CAPS = {False: per_commit_share((4, 4096), (4,)), True: (4, 4096)}


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=60)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_small_batch_gather_paths_match_the_oracle(top_p):
    """Small batches gather the keys their passes left in range, then sort them (at most
    sort_capacity) or run range passes over them. One pass leaves many keys in range; with 4 sort
    slots those rows loop, with room for a whole row every row sorts. The state proves which ran; both agree with
    each other and with the exact oracle."""
    probs, param = _rows(3).to(DEV), _params(top_p).to(DEV)
    op = K.top_p_renorm if top_p else K.top_k_renorm
    outputs = {}
    sorted_, looped = int(rk.SORTED), int(rk.LOOPED)
    for sort_cap in SMALL_BATCH_SORT_CAPS[top_p]:
        path = looped if sort_cap == 4 else sorted_
        tuning = _tuning(finish_min_rows=10**9, small_batch_passes=1, sort_capacity=sort_cap)
        by = _finished_by(probs, param, top_p, tuning)
        assert path in by, f"sort capacity {sort_cap}: finished by {by}"
        assert sort_cap < VOCAB or looped not in by, f"every row fits {sort_cap} sort slots: {by}"
        outputs[path] = op(probs, param, tuning=tuning)
    assert len(outputs) < 2 or torch.equal(outputs[looped], outputs[sorted_])
    oracle = R.top_p_renorm if top_p else R.top_k_renorm
    for out in outputs.values():
        problem = mismatch(RENORM, out, oracle(probs.cpu(), param.cpu()))
        assert problem is None, problem


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=8)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_small_batch_gather_runs_on_its_passes_blocks(top_p):
    """The gather places each program's keys by the counts the last pass took over the same share of
    the candidates, so it must run on the passes' BLOCK: the narrow pass's for 4-way passes, the wide
    pass's for wider ones (here of different sizes, so the shares differ). Every result equals the
    oracle's."""
    g = torch.Generator().manual_seed(8)
    probs = torch.softmax(3 * torch.randn(3, VOCAB, generator=g), -1).to(DEV)
    param = (torch.tensor([0.9, 0.5, 0.99]) if top_p else torch.tensor([5, 40, 300])).to(DEV)
    op, oracle = (K.top_p_renorm, R.top_p_renorm) if top_p else (K.top_k_renorm, R.top_k_renorm)
    for wide_split in (4, 16):
        tuning = _tuning(finish_min_rows=10**9, small_batch_passes=1, wide_split=wide_split, narrow_pass=(64, 2),
                         wide_pass=((128, 4), (128, 4)))
        launches = rplan._plan(3, VOCAB, top_p, True, tuning).launches
        blocks = {step.args: step.meta["BLOCK"] for step in launches if step.args in ("pass", "gather")}
        assert blocks == {"pass": 64 if wide_split == 4 else 128, "gather": blocks["pass"]}, blocks
        assert launches[-1].grid[0] > 1, "several programs share a row's candidates"
        problem = mismatch(RENORM, op(probs, param, tuning=tuning), oracle(probs.cpu(), param.cpu()))
        assert problem is None, f"{wide_split}-way passes: {problem}"


FINISH_SORTS = {False: per_commit_share((0, 2, 4096), (0, 2)), True: per_commit_share((0, 2, 4096), (4096,))}


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@register(suite="kernels", hardware="cpu", schedule="nightly", est_time=90)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_finish_sorts_or_runs_passes_to_the_end(top_p):
    """The finish kernel runs range passes over a row's candidates until at most finish_sort remain,
    then sorts them; finish_sort 0 runs passes to the end. Rows that never fit loop over their full
    row either way (but top-k rows the compaction narrowed to a LOW bucket, whose keys the finish
    copies: NCAND > 0). The state proves which ran; every setting keeps the same entries, as the oracle."""
    probs, param = _rows(4).to(DEV), _params(top_p).to(DEV)
    op = K.top_p_renorm if top_p else K.top_k_renorm
    outputs = []
    for sort in FINISH_SORTS[top_p]:
        tuning = _tuning(finish_min_rows=2, candidate_capacity=64, finish_sort=(sort, sort))
        state = _state(probs, param, top_p, tuning)
        by, fits = state[:, int(rk.FINISHED_BY)].tolist(), state[:, int(rk.COMPACTED)].tolist()
        copied = state[:, int(rk.NCAND)].tolist()
        assert (int(rk.SORTED) in by) == (sort > 0), f"finish_sort {sort}: finished by {by}"
        assert all(b == 0 for b, f, n in zip(by, fits, copied, strict=True) if f == 0 and n == 0), \
            f"rows that never fit sort nothing: {by}"
        outputs.append(op(probs, param, tuning=tuning))
    oracle = (R.top_p_renorm if top_p else R.top_k_renorm)(probs.cpu(), param.cpu())
    for out in outputs:  # sums in another order may round the scale differently: same kept sets, exact
        assert torch.equal(out > 0, outputs[0] > 0)
        problem = mismatch(RENORM, out, oracle)
        assert problem is None, problem


def _first_range(probs: torch.Tensor, param: torch.Tensor, top_p: bool) -> list[tuple[int, int]]:
    """Each row's key range [LO, HI) after the first pass alone."""
    plan = rplan._plan(probs.shape[0], probs.shape[1], top_p, True, _tuning(finish_min_rows=1))
    first = dataclasses.replace(plan, launches=plan.launches[:1])
    state = api._select(probs, None, param, first)[0]
    return [(int(lo), int(hi)) for lo, hi in state[:, [int(rk.LO), int(rk.HI)]].tolist()]


def _key(value: float) -> int:
    return int(torch.tensor(value, dtype=torch.float32).view(torch.int32))


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=10)
def test_top_p_first_pass_widens_its_range_near_the_target():
    """Top-p's first pass weighs its buckets in fp32 and keeps every bucket the pivot may be in, given
    the rounding. Row 0 puts the mass below the bucket of 2^-10 at exactly (1 - p) x the row's mass:
    the exact rule keeps 2^-20's bucket, so the range must reach from there to the row's largest key.
    Row 1 is far from any boundary: one bucket. Both agree with the exact oracle."""
    probs = torch.zeros(2, 2100)
    probs[0, :1024] = 2.0 ** -20  # 1024 x 2^-20 = 2^-10: half the row's mass, the target at p = 0.5
    probs[0, 1500] = 2.0 ** -10
    probs[1, :1000] = 2.0 ** -19
    probs[1, 1500:1510] = 2.0 ** -4
    param = torch.tensor([0.5, 0.5])
    ranges = _first_range(probs.to(DEV), param.to(DEV), True)
    assert ranges[0] == (_key(2.0 ** -20), _key(2.0 ** -10) + 1), f"row 0 not widened: {ranges}"
    assert ranges[1] == (_key(2.0 ** -12), _key(2.0 ** -4) + 1), f"row 1: the top bucket alone: {ranges}"
    for tuning in (_tuning(finish_min_rows=1), _tuning(finish_min_rows=10**9)):
        got = K.top_p_renorm(probs.to(DEV), param.to(DEV), tuning=tuning)
        problem = mismatch(RENORM, got, R.top_p_renorm(probs, param))
        assert problem is None, problem
        assert bool((got[0] > 0).sum() == 1025), "the exact boundary keeps the entry that reaches it"


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name, value", [("small_batch_passes", 0), ("sort_capacity", 1000), ("short_sort", 0),
                                         ("finish_sort", (256, 3)), ("first_pass", (2, 1)), ("compact", (32768, 8)),
                                         ("wide_split", 32), ("finish_split", (16, 3)), ("candidate_capacity", 0),
                                         ("write", (1000, 8)), ("finish_min_rows", (4, 0)),
                                         ("small_batch_programs", 0), ("large_batch_rows", (64, 0)),
                                         ("chunk_align", 1000), ("large_batch_compact", (16, 1)),
                                         ("segment_maxima", "yes"), ("segment_maxima_rows", 0),
                                         ("chunk_align", 65536), ("large_batch_first_pass", (16, 4)),
                                         ("huge_batch_compact", (16, 1)), ("huge_batch_rows", (0, 256)),
                                         ("prefetch_compact", (True, "no")), ("narrow_pass", (256, 3)),
                                         ("wide_pass", ((256, 4), (96, 4))), ("finish", ((512, 4), (1024, 6))),
                                         ("gather_warps", 3), ("prefetch_write", 1),
                                         ("prefetch_finish", (False, None)), ("finish_first_split", (-1, 256)),
                                         ("finish_first_split", True), ("target_programs", (512, 0)),
                                         ("target_programs", True), ("target_programs_rows", 0),
                                         ("write_evict_first", (True, "no")), ("dependent_launch_rows", (128, -1)),
                                         ("dependent_launch_rows", True), ("write_preload", (True, "no")),
                                         ("finish_warp_rows", (True, True)), ("finish_warp_rows", (False, 1)),
                                         ("one_attempt_rows", (1 << 30, 0)), ("one_attempt_rows", "256"),
                                         ("first_pass_group_sums", 1)])
def test_tuning_refuses_bad_settings(name, value):
    """The gather places its keys by the last pass's per-chunk counts (a plan needs a pass), tl.sort
    sizes and launch shapes are powers of two, passes split at most NB_MAX ways, the launches that read
    or write the segment maxima span whole segments: a bad setting is
    refused when the tuning is built, never run, by a message that starts with the field's name."""
    with pytest.raises(ValueError, match=rf"^RenormTuning\.{name} "):
        dataclasses.replace(renorm.DEFAULT_TUNING, **{name: value})


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_ops_refuse_a_tuning_of_the_wrong_type():
    probs = torch.rand(2, 8, device=DEV)
    with pytest.raises(TypeError, match="tuning"):
        K.top_k_renorm(probs, 2, tuning={"finish_min_rows": 1})


class _FakeCompiled:
    function, packed_metadata = "fn", "meta"

    def __init__(self, log):
        self.log = log

    def run(self, *call):
        self.log.append(("direct", call))


class _FakeKernel:
    """Stands in for a jitted kernel: ``kernel[grid](*args, **meta)`` compiles, launches, returns the
    compiled kernel (as JITFunction.run does)."""
    arg_names = ["x_ptr", "n", "BLOCK", "FLAG"]

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def launch(*args, **meta):
            self.log.append(("ordinary", grid, args, meta))
            return _FakeCompiled(self.log)
        return launch


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_launch_cache_reuses_the_compiled_kernel_per_key():
    """The first launch of a key goes through kernel[grid] and keeps the compiled kernel; later
    launches of that key call its launcher with the grid padded to 3-D, the stream, and every
    argument followed by the constexprs in parameter order; another key compiles again; without
    a stream (interpreter, launch hooks) every launch is ordinary."""
    from impl.kernels._backend import LaunchCache

    kernel, cache, stream = _FakeKernel(), LaunchCache(), object()
    meta = {"FLAG": True, "BLOCK": 64, "num_warps": 4}
    cache.launch("a", stream, kernel, (3, 2), ("x", 7), meta)
    cache.launch("a", stream, kernel, (3, 2), ("y", 7), meta)
    cache.launch("b", stream, kernel, (5,), ("z", 1), meta)
    cache.launch("a", None, kernel, (3, 2), ("w", 7), meta)
    kinds = [entry[0] for entry in kernel.log]
    assert kinds == ["ordinary", "direct", "ordinary", "ordinary"]
    assert kernel.log[1][1] == (3, 2, 1, stream, "fn", "meta", None, None, None, "y", 7, 64, True)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_backend_gate_cache_follows_the_environment(monkeypatch):
    """launch_mode caches the kernel_backend gate per raw environment value: a changed, invalid or
    removed variable takes effect on the very next call (nothing to refresh)."""
    from impl.gates import GateError
    from impl.kernels._backend import launch_mode

    probs = torch.rand(2, 8)
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    assert launch_mode(probs) == "torch"
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "bogus")
    with pytest.raises(GateError, match="DSPARK_KERNEL_BACKEND"):
        launch_mode(probs)
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "triton-interpret")
    assert launch_mode(probs) == "triton"
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    assert launch_mode(probs) == "torch"


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_compaction_shape_steps_up_with_the_batch(top_p):
    """Below large_batch_rows the compaction runs `compact`, from there `large_batch_compact`, from
    huge_batch_rows `huge_batch_compact` (by op), with the op's prefetch setting."""
    t = dataclasses.replace(renorm.DEFAULT_TUNING, compact=((64, 2), (64, 4)), large_batch_compact=((128, 1), (256, 1)),
                            huge_batch_compact=((512, 1), (1024, 1)), large_batch_rows=(8, 16),
                            huge_batch_rows=(32, 64), prefetch_compact=(False, True))
    steps = [(7, 15, 0), (8, 16, 1), (31, 63, 1), (32, 64, 2), (300, 300, 2)]
    shapes = [t.compact, t.large_batch_compact, t.huge_batch_compact]
    for rows_k, rows_p, tier in steps:
        plan = rplan._plan(rows_p if top_p else rows_k, 4096, top_p, True, t)
        compact = next(launch for launch in plan.launches if launch.args == "compact")
        assert (compact.meta["BLOCK"], compact.meta["num_warps"]) == shapes[tier][top_p], (rows_k, rows_p)
        assert compact.meta["PREFETCH"] is top_p


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_finish_moves_nothing_first_below_its_row_bound(top_p):
    """finish_first_split (by op): batches below it take the finish whose first pass moves nothing;
    the default keeps top-p's off from 256 rows (two finish programs an SM), top-k's on everywhere."""
    t = dataclasses.replace(renorm.DEFAULT_TUNING, finish_first_split=(8, 16), finish_min_rows=1)  # all finish
    for rows, on in [(1, True), (7, True), (8, top_p), (15, top_p), (16, False), (300, False)]:
        finish = rplan._plan(rows, 4096, top_p, True, t).launches[-1]
        assert finish.args == "finish" and finish.meta["FIRST_SPLIT"] is on, rows
    default = {rows: rplan._plan(rows, 129280, top_p, True, renorm.DEFAULT_TUNING).launches[-1].meta["FIRST_SPLIT"]
               for rows in (32, 64, 128, 255, 256, 512)}
    assert default == {rows: not top_p or rows < 256 for rows in default}


def _sub_range(lo: int, hi: int, key: int, ways: int) -> tuple[int, int]:
    """The sub-range of [lo, hi) holding key when a pass splits it `ways` ways, by its definition
    (kernels.py _split_shift: the smallest s with (hi - lo - 1) >> s < ways; sub-range d starts at
    lo + d << s)."""
    s = 0
    while (hi - lo - 1) >> s >= ways:
        s += 1
    start = lo + ((key - lo) >> s << s)
    return start, min(start + (1 << s), hi)


def _split_rows(seed: int) -> torch.Tensor:
    """Probability rows (softmax of 3 x, 1 x randn), bf16-rounded ones (ties across sub-ranges' keys)
    and a row of a few large entries over a floor (its candidates in one sub-range)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(5, VOCAB, generator=g, dtype=torch.float64) * torch.tensor([[3.0], [3.0], [1.0], [3.0], [1.0]])
    p = torch.softmax(logits, -1).float()
    p[3] = p[3].bfloat16().float()
    p[4] = 1e-5 * torch.rand(VOCAB, generator=g)
    p[4, torch.randperm(VOCAB, generator=g)[:30]] = 0.01 + 0.02 * torch.rand(30, generator=g)
    return p


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_finish_first_pass_over_its_candidates_moves_none(top_p):
    """The finish's first pass over more than finish_sort candidates counts (top-p: weighs in fp64)
    them in finish_split sub-ranges of their range and keeps the one holding the pivot (the
    oracle's), moving nothing: CHOSEN is that sub-range of the range the compaction copied,
    CHOSEN_COUNT the keys in it. Rows at or below finish_sort skip it (sorted at once). With
    finish_first_split off the finish's passes do it all. Outputs are the oracle's either way."""
    probs = _split_rows(11)
    param = torch.tensor([0.9, 0.95, 0.5, 0.9, 0.3]) if top_p else torch.tensor([50, 1000, 5, 200, 12])
    oracle = (R.top_p_renorm if top_p else R.top_k_renorm)(probs, param)
    op = K.top_p_renorm if top_p else K.top_k_renorm
    sort_cap, split_rows = 16, 0
    for kw in ({}, dict(large_batch_rows=1)):  # top-k: the compaction reads every key / the listed segments
        for split in (True, False):
            below = 99 if split else 0  # rows below which the first pass moves nothing
            tuning = _tuning(finish_min_rows=1, finish_first_split=(below, below), finish_sort=(sort_cap, sort_cap),
                             **kw)
            plan = rplan._plan(probs.shape[0], VOCAB, top_p, True, tuning)
            assert plan.launches[-1].args == "finish" and plan.launches[-1].meta["FIRST_SPLIT"] == split
            before = api._select(probs.to(DEV), None, param.to(DEV),
                                 dataclasses.replace(plan, launches=plan.launches[:-1]))[0].cpu()
            after = api._select(probs.to(DEV), None, param.to(DEV), plan)[0].cpu()
            for r in range(probs.shape[0]):
                keys = probs[r].view(torch.int32).long()
                lo0, hi0 = int(before[r, int(rk.LO)]), int(before[r, int(rk.HI)])
                assert int(before[r, int(rk.COMPACTED)]) == 1, (r, kw)
                n = int(((keys >= lo0) & (keys < hi0)).sum())
                assert int(after[r, int(rk.NCAND)]) == n, (r, kw)
                pivot = int(keys[oracle[r] != 0].min())
                assert int(after[r, int(rk.LO)]) == pivot, (r, kw, split)
                chosen = (int(after[r, int(rk.CHOSEN)]), int(after[r, int(rk.CHOSEN_COUNT)]))
                if split and n > sort_cap and hi0 - lo0 > 1:
                    split_rows += 1
                    ways = tuning.finish_split[top_p]
                    lo1, hi1 = _sub_range(lo0, hi0, pivot, ways)
                    width = _sub_range(lo0, hi0, lo0, ways)[1] - lo0
                    assert chosen == ((lo1 - lo0) // width, int(((keys >= lo1) & (keys < hi1)).sum())), (r, kw)
                else:  # the compaction's words, untouched by the finish
                    assert chosen == (int(before[r, int(rk.CHOSEN)]), int(before[r, int(rk.CHOSEN_COUNT)])), (r, kw)
            problem = mismatch(RENORM, op(probs.to(DEV), param.to(DEV), tuning=tuning), oracle)
            assert problem is None, (kw, split, problem)
    assert split_rows >= 6, f"most rows should hold more than {sort_cap} candidates: {split_rows} of 10 split"
