"""Top-p's probe (RenormTuning.probe_range, impl/kernels/renorm/probe.py): a sampled guess of the pivot's range
in place of the first pass, checked by the first compaction.

A guess may only change how fast a row finishes, never its result. So every test runs rows whose route is
known by construction, reads the route off the select's state (COMPACTED: 1 when the probed compaction took
the row, else the passes after it did), and holds the output to the oracle and, bit for bit, to the default
path's. The routes: a guess that holds and fits; a guess too high (a row weighing less than 1, whose floor
holds the pivot: the probe takes a row's mass as at least 1); candidates overflowing a chunk's row of the
layout (a flat row); and rows with no mass, NaNs, p = 0 and p = 1. Two layouts a vocabulary ordered by
frequency gives: candidates crowded into one chunk's span (the compaction deals its programs blocks spread over
the row) and mass away from each chunk's middle (the probe samples lines spread over each chunk).
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import impl.kernels as K
import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
import reference as R
from ci.registration import register
from impl.kernels._backend import tl, triton
from impl.kernels.renorm import api
from impl.platform import default_device
from impl.testing.op_table import RENORM, mismatch
from registered.renorm_tunings import PATH_VOCAB, SMALL_SHAPES

DEV = default_device()
VOCAB = PATH_VOCAB  # three chunks: the layout has rows from several programs
ROWS = 8


def _tuning(**changes) -> renorm.RenormTuning:
    """The probe from ROWS rows on, with a scratch whose chunk rows hold about half a chunk (flat rows overflow)."""
    base = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES)
    layout_block = base.finish[1][0]
    return dataclasses.replace(base, **{"probe_range": (False, True), "one_attempt_rows": 1 << 30,
                                        "large_batch_rows": (64, ROWS),
                                        "finish_min_rows": (1, 2), "huge_batch_rows": (256, 1 << 20),
                                        "candidate_capacity": 2 * layout_block, "probe_sample": 64,
                                        "probe_budget": 16, **changes})


def _spread(g: torch.Generator, n: int, mean: float) -> torch.Tensor:
    return mean * (0.5 + torch.rand(n, generator=g))  # distinct values around mean: no ties at the pivot


def _rows(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    probs = torch.empty(ROWS, VOCAB)
    where = int(torch.randint(VOCAB, (1,), generator=g))
    probs[0] = _spread(g, VOCAB, 0.1 / VOCAB)  # HOLDS: one key of 0.9 over a light floor, p = 0.5
    probs[0, where] = 0.9
    probs[1] = _spread(g, VOCAB, 0.15 / VOCAB)  # TOO HIGH: a row of mass 0.2, its pivot in the floor
    probs[1, where] = 0.05
    # OVERFLOWS: flat within one of the probe's cuts ([1, 1.5) x 2^-11), so its range holds every key however it
    # trims: more than a chunk's row of the layout holds (about half a chunk) at any chunk length
    probs[2] = 2.0 ** -11 * (1.1 + 0.2 * torch.rand(VOCAB, generator=g))
    probs[3] = 0.0  # no mass
    probs[4] = torch.softmax(3 * torch.randn(VOCAB, generator=g), 0)  # the bench's kind, NaNs on every 7th entry
    probs[4, ::7] = float("nan")
    probs[5] = torch.softmax(3 * torch.randn(VOCAB, generator=g), 0)  # p = 0
    probs[6] = torch.softmax(3 * torch.randn(VOCAB, generator=g), 0)  # p = 1
    probs[7] = 1e3 * torch.softmax(3 * torch.randn(VOCAB, generator=g), 0)  # mass 1000
    return probs, torch.tensor([0.5, 0.5, 0.9, 0.9, 0.9, 0.0, 1.0, 0.9])


HOLDS, TOO_HIGH, OVERFLOWS = 0, 1, 2


def _state(probs: torch.Tensor, p: torch.Tensor, tuning: renorm.RenormTuning) -> torch.Tensor:
    plan = rplan._plan(probs.shape[0], probs.shape[1], True, True, tuning)
    assert plan.launches[0].args == "probe", [launch.args for launch in plan.launches]
    return api._select(probs, None, p, plan)[0]


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=30)
@pytest.mark.parametrize("seed", [1, 2])
def test_a_probed_row_takes_its_route_and_every_row_matches_the_oracle(seed):
    tuning = _tuning()
    probs, p = _rows(seed)
    probs, p = probs.to(DEV), p.to(DEV)
    state = _state(probs, p, tuning).cpu()
    by = state[:, int(rk.COMPACTED)].tolist()
    assert by[HOLDS] == 1, f"a guess that holds and fits is the probed compaction's: {by}"
    assert state[HOLDS, int(rk.NCAND)] == 1, f"the 0.9 key alone is a candidate: {state[HOLDS].tolist()}"
    assert by[TOO_HIGH] != 1, f"a guess above the pivot must fall back: {by}"
    assert by[OVERFLOWS] != 1, f"a flat row overflows its chunk rows: {by}"
    assert by[3] != 1, f"a row with no mass has no pivot above any cut: {by}"
    out = K.top_p_renorm(probs, p, tuning=tuning)
    problem = mismatch(RENORM, out, R.top_p_renorm(probs.cpu(), p.cpu()))
    assert problem is None, f"routes {by}: {problem}"
    default = dataclasses.replace(tuning, probe_range=False)
    assert rplan._plan(ROWS, VOCAB, True, True, default).launches[0].args == "first"
    same = K.top_p_renorm(probs, p, tuning=default)
    assert torch.equal(out, same), f"routes {by}: the probe changed a result bit, rows " \
        f"{(out != same).any(1).nonzero().flatten().tolist()}"


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=15)
def test_a_scalar_p_takes_the_probe_too():
    tuning = _tuning()
    probs, _ = _rows(3)
    probs = probs.to(DEV)
    out = K.top_p_renorm(probs, 0.93, tuning=tuning)
    problem = mismatch(RENORM, out, R.top_p_renorm(probs.cpu(), 0.93))
    assert problem is None, problem


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_plan_probes_top_p_from_large_batch_rows_in_one_layout_row_a_chunk():
    tuning = _tuning()
    plan = rplan._plan(ROWS, VOCAB, True, True, tuning)
    regions = 1 << (plan.chunks - 1).bit_length()
    assert [launch.args for launch in plan.launches] == ["probe", "compact", "pass", "compact", "finish"]
    first, second, finish = plan.launches[1], plan.launches[3], plan.launches[4]
    assert first.meta["REGIONS"] == regions and first.meta["MASSES"] and second.meta["REGIONS"] == 0
    assert first.meta["TRIM"] and not second.meta["TRIM"] and plan.launches[0].meta["TRIM"]
    untrimmed = rplan._plan(ROWS, VOCAB, True, True, dataclasses.replace(tuning, probe_trim=False))
    assert not untrimmed.launches[0].meta["TRIM"] and not untrimmed.launches[1].meta["TRIM"]
    assert first.meta["LAYOUT_BLOCK"] == finish.meta["BLOCK"] == tuning.finish[1][0]
    assert finish.meta["ROWS"] == regions and finish.meta["REGIONS"] and not finish.meta["FIRST_SPLIT"]
    assert plan.launches[0].meta["SAMPLE"] == tuning.probe_sample and plan.launches[0].grid == (ROWS,)
    for bs, top_p, changes in ((ROWS - 1, True, {}), (ROWS, False, {}), (ROWS, True, {"probe_range": False}),
                               (ROWS, True, {"finish": ((256, 4), (32 * regions // 2, 4))})):
        other = rplan._plan(bs, VOCAB, top_p, True, dataclasses.replace(tuning, **changes))
        assert other.launches[0].args == "first", (bs, top_p, changes)
        assert all(launch.meta.get("REGIONS", 0) in (0, False) for launch in other.launches), (bs, top_p, changes)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("changes, word", [
    ({"probe_range": True}, "top-p's alone"),
    ({"probe_range": (False, True), "finish_split": (16, 16), "finish_warp_rows": False}, "finish_split 4"),
    ({"probe_range": (False, True), "compact_attempts": 1}, "compact_attempts >= 2"),
    ({"probe_range": (False, True), "one_attempt_rows": (1 << 30, 256)}, "no one_attempt_rows"),
    ({"probe_range": (False, 1)}, "bool"),
    ({"probe_sample": 48}, "power of two"),
    ({"probe_sample": 16}, ">= 32"),
    ({"probe_budget": -1}, ">= 0"),
    ({"probe_budget": True}, ">= 0"),
    ({"probe_trim": 1}, "bool"),
])
def test_the_tuning_refuses_a_probe_it_cannot_run(changes, word):
    with pytest.raises(ValueError, match="probe") as err:
        dataclasses.replace(renorm.DEFAULT_TUNING, **changes)
    assert word in str(err.value), err.value


@triton.jit
def _range_loop_kernel(src, out, n, lo, hi, first_end, masses, STOP: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK: tl.constexpr):
    # the finish's passes over src[0:n) in natural order, the first split ending at first_end; masses: the fp64
    # level (mass below lo) and goal (target)
    level = tl.load(masses)
    goal = tl.load(masses + 1)
    rows_n = rk._row_counts(n, ROWS, BLOCK)
    lo, hi, level, n, _ = rk._range_loop(src, n, rows_n, 0, first_end, lo, hi, level, goal, tl.full([], 1, tl.int32),
                                         STOP, True, 4, BLOCK, False, False, ROWS, True)
    tl.store(out + tl.arange(0, 2), tl.where(tl.arange(0, 2) == 0, lo, hi).to(tl.int64))


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_first_split_ending_below_the_range_counts_the_keys_past_it_in_its_last_sub_range(seed):
    """The probe's split ends where it guesses the pivot: keys past it belong to the last sub-range. Here they
    hold the pivot and the last sub-range proper holds no key: counted nowhere, the pass would see no mass above
    its second sub-range and keep a range without the pivot."""
    g = torch.Generator().manual_seed(seed)
    light = 2.0 ** -20 * (1 + 0.2 * torch.rand(48, generator=g))  # within the first two of the 4 sub-ranges
    heavy = 0.05 * (1 + torch.rand(16, generator=g))  # far past the split's end
    x = torch.cat([light, heavy])[torch.randperm(64, generator=g)].float()
    keys = x.view(torch.int32).to(torch.int64)
    lo, hi = int(light.float().view(torch.int32).min()), int(keys.max()) + 1
    first_end = lo + 4 * (int(light.float().view(torch.int32).max()) + 1 - lo)  # light keys: sub-ranges 0 and 1
    p = 0.5
    pivot = _pivot_key(x.double(), p)
    assert pivot >= first_end, "the pivot must lie past the split's end"
    out = torch.zeros(2, dtype=torch.int64, device=DEV)
    masses = torch.tensor([0.0, (1 - p) * float(x.double().sum())], dtype=torch.float64, device=DEV)
    _range_loop_kernel[(1,)](x.to(DEV), out, 64, lo, hi, first_end, masses, STOP=2, ROWS=2, BLOCK=64, num_warps=2)
    got_lo, got_hi = out.tolist()
    assert got_lo <= pivot < got_hi, (got_lo, pivot, got_hi)


def _pivot_key(x: torch.Tensor, p: float) -> int:
    """Top-p's pivot by the sort-based rule (docs/design.md §3.9), as an int key."""
    ascending = x.sort().values
    at = int((ascending.cumsum(0) < (1 - p) * x.sum()).sum().clamp(max=len(x) - 1))
    return int(ascending[at].float().view(torch.int32))


def _front_loaded(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows whose candidates all sit in the first chunk's span, as a vocabulary ordered by frequency puts them:
    more heavy keys than one chunk's row of the layout holds, fewer than the rows of all chunks hold. Heavy keys
    lie within one half-octave (between two of the probe's cuts), so its lo is their cut and they are the
    candidates, all of them."""
    g = torch.Generator().manual_seed(seed)
    probs = _spread(g, ROWS * VOCAB, 0.1 / VOCAB).view(ROWS, VOCAB)
    heavy = int(1.5 * _room())
    probs[:, :heavy] = 2.0 ** -8 * (1 + 0.3 * torch.rand(ROWS, heavy, generator=g))
    probs[1::2] = probs[1::2].flip(1)  # and in the last chunk's span (a vocabulary ordered the other way)
    return probs, torch.full((ROWS,), 0.5)


def _room() -> int:
    tuning = _tuning()
    plan = rplan._plan(ROWS, VOCAB, True, True, tuning)
    meta = plan.launches[1].meta
    return (plan.cap // meta["LAYOUT_BLOCK"]) * (meta["LAYOUT_BLOCK"] // meta["REGIONS"])


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=15)
@pytest.mark.parametrize("seed", [4])
def test_candidates_crowded_into_one_chunks_span_still_fit_the_probed_layout(seed):
    """The probed compaction deals each program blocks spread over the whole row, not one contiguous chunk, so a
    row whose candidates crowd one span of it (token ids ordered by frequency) spreads them over every program's
    row of the layout and is taken; contiguous chunks would overflow the first chunk's row and fall back."""
    tuning = _tuning(large_batch_compact=((128, 1), (64, 1)))  # blocks of 64: several to each program
    probs, p = _front_loaded(seed)
    probs, p = probs.to(DEV), p.to(DEV)
    heavy = int(1.5 * _room())
    state = _state(probs, p, tuning).cpu()
    by = state[:, int(rk.COMPACTED)].tolist()
    assert by == [1] * ROWS, f"every row is the probed compaction's: {by}"
    assert state[:, int(rk.NCAND)].tolist() == [heavy] * ROWS, state[:, int(rk.NCAND)].tolist()
    out = K.top_p_renorm(probs, p, tuning=tuning)
    problem = mismatch(RENORM, out, R.top_p_renorm(probs.cpu(), p.cpu()))
    assert problem is None, problem


def _mass_off_centre(seed: int, window: int, width: int) -> torch.Tensor:
    """One row a window start: in every chunk, `width` large keys from `window` on hold 0.4 of the mass and
    smaller keys everywhere else 0.6, so at p = 0.5 the pivot lies among the smaller keys. A sample that sees
    mostly large keys guesses lo at their cut, above the pivot."""
    g = torch.Generator().manual_seed(seed)
    chunk_len = rplan._plan(ROWS, VOCAB, True, True, _tuning()).launches[0].sizes[1]
    within = torch.arange(VOCAB) % chunk_len  # each entry's place in its chunk
    large = (within >= window) & (within < window + width)
    row = torch.where(large, 0.4 / int(large.sum()), 0.6 / int((~large).sum())).double()
    return (row * (0.95 + 0.1 * torch.rand(VOCAB, generator=g, dtype=torch.float64))).float()


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("seed", [5])
def test_the_probes_sample_spans_each_chunk_so_mass_off_its_centre_is_seen(seed):
    """The probe samples lines spread over each chunk: wherever in it the large keys sit, it sees smaller keys
    too, and its lo stays at or below the pivot (the exact mass below lo under the target). A sample from one
    block of the chunk's middle sees the large keys alone when they sit there, and guesses too high.

    The large keys span a quarter of each chunk, the stride of the sample's 4 lines, so a full chunk's sample
    holds them in the share the chunk does wherever they sit (a narrower span can cover a whole line and be
    over-sampled: the sample is spread, not dense)."""
    from impl.bench.renorm_probe_guess import first_launch

    tuning = _tuning(probe_sample=128)  # 4 lines of each chunk
    chunk_len = rplan._plan(ROWS, VOCAB, True, True, tuning).launches[0].sizes[1]
    width = chunk_len * 32 // tuning.probe_sample
    windows = [i * (chunk_len - width) // (ROWS - 1) for i in range(ROWS)]
    probs = torch.stack([_mass_off_centre(seed, w, width) for w in windows])
    p = torch.full((len(windows),), 0.5)
    state, _ = first_launch(probs.to(DEV), p.to(DEV), tuning, ROWS)
    lo = state[:, int(rk.LO)].cpu()
    x = probs.double()
    below = torch.where(probs.view(torch.int32) < lo[:, None], x, torch.zeros_like(x)).sum(1)
    held = below < 0.5 * x.sum(1)
    assert held.all(), f"guesses above the pivot at windows {[w for w, h in zip(windows, held) if not h]}"


def _sampled(length: int, sample: int) -> torch.Tensor:
    """The places in a chunk of `length` entries the probe samples (probe.py): every entry of a chunk no longer
    than the sample, else one line of 32 from the middle of each of sample / 32 equal strata of its whole lines."""
    if length <= sample:
        return torch.arange(length)
    lines = sample // 32
    strata = torch.tensor([((2 * i + 1) * (length // 32)) // (2 * lines) for i in range(lines)])
    return (strata[:, None] * 32 + torch.arange(32)[None, :]).flatten()


def _trim_misses(seed: int) -> torch.Tensor:
    """A row whose sample over-weights its small keys: every sampled entry but two a chunk holds a small key (0.3
    of the mass in all), large keys (0.7) sit mostly where the probe does not look. The two seen a chunk are the
    lightest large keys (3 x a small one: above the small keys' cut), so the estimate puts nine tenths of the
    row's mass in the small keys and the pivot's end at their cut, with more than the budget's keys (estimated:
    the seen large ones, each weighing a chunk's length over the sample) past it, so the probe trims there,
    while the pivot lies among the large keys."""
    g = torch.Generator().manual_seed(seed)
    tuning = _tuning()
    chunk_len = rplan._plan(ROWS, VOCAB, True, True, tuning).launches[0].sizes[1]
    seen = torch.cat([start + _sampled(min(chunk_len, VOCAB - start), tuning.probe_sample)
                      for start in range(0, VOCAB, chunk_len)])
    large_seen = seen[torch.randperm(len(seen), generator=g)[:2 * len(range(0, VOCAB, chunk_len))]]
    unseen = torch.ones(VOCAB, dtype=torch.bool)
    unseen[seen] = False
    large_unseen = unseen.nonzero().flatten()[torch.randperm(int(unseen.sum()), generator=g)[:22]]
    row = torch.zeros(VOCAB, dtype=torch.float64)
    small = seen[~torch.isin(seen, large_seen)]
    row[small] = 0.3 / len(small) * (1 + 0.1 * torch.rand(len(small), generator=g, dtype=torch.float64))
    row[large_seen] = 0.9 / len(small) * (1 + 0.1 * torch.rand(len(large_seen), generator=g, dtype=torch.float64))
    rest = 0.7 - float(row[large_seen].sum())
    row[large_unseen] = rest / len(large_unseen) * (1 + 0.1 * torch.rand(len(large_unseen), generator=g,
                                                                             dtype=torch.float64))
    return row.float()


def _three_tiers(seed: int) -> torch.Tensor:
    """A row the probe trims and the compaction takes at any chunk length: keys in three of the probe's cuts,
    shuffled. Half the entries hold about 4% of the mass (the floor), a fifth about 24% (the pivot's tier: at p =
    0.9 the pivot is among them) and the rest about 72% (kept), each tier one octave or more above the one below.
    Estimated from the sample, the mass below the pivot's tier stays under PROBE_MARGIN x (1 - p) and the mass
    below the next cut passes (1 - p) / PROBE_MARGIN, so lo and the end bound that tier alone; past it lie many
    keys (the kept tier), so the range is trimmed, and a fifth of each program's keys fit its row of the layout.
    Values sit in the middle of their cuts, the unit a power of two at least 1 / VOCAB (row mass >= 1)."""
    g = torch.Generator().manual_seed(seed)
    unit = 2.0 ** math.ceil(math.log2(1 / VOCAB))
    tier = torch.full((VOCAB,), 2)
    order = torch.randperm(VOCAB, generator=g)
    tier[order[: VOCAB // 2]] = 0
    tier[order[VOCAB // 2: VOCAB // 2 + VOCAB // 5]] = 1
    scale = torch.tensor([unit / 16, unit, 2 * unit], dtype=torch.float64)[tier]
    return (scale * (1.2 + 0.1 * torch.rand(VOCAB, generator=g, dtype=torch.float64))).float()


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("seed", [6])
def test_a_trimmed_range_is_taken_when_the_pivot_lies_below_its_end_and_falls_back_when_not(seed):
    """probe_trim: the probe ends the range where it guesses the pivot ends when many keys lie past that; the
    compaction copies [lo, end) only and checks the exact mass below the end reaches the target. Rows 0-3
    (_three_tiers, p = 0.9) are trimmed and taken with fewer candidates than keys >= lo; rows 4-7 are
    trimmed below their pivot (_trim_misses) and must fall back: accepting them would end the finish's search
    below the pivot."""
    from impl.bench.renorm_probe_guess import first_launch

    tuning = _tuning()
    probs = torch.cat([torch.stack([_three_tiers(seed + r) for r in range(4)]),
                       torch.stack([_trim_misses(seed + r) for r in range(4)])])
    p = torch.tensor([0.9] * 4 + [0.5] * 4)
    probs, p = probs.to(DEV), p.to(DEV)
    probed, _ = first_launch(probs, p, tuning, ROWS)
    lo, end = probed[:, int(rk.LO)].cpu(), probed[:, int(rk.HI)].cpu()
    assert bool((end < int(rk.KEY_END)).all()), f"every row's range is trimmed: {end.tolist()}"
    state = _state(probs, p, tuning).cpu()
    by = state[:, int(rk.COMPACTED)].tolist()
    assert by[:4] == [1] * 4 and 1 not in by[4:], f"routes {by}"
    at_or_above = (probs.cpu().view(torch.int32) >= lo[:, None]).sum(1)
    assert bool((state[:4, int(rk.NCAND)] < at_or_above[:4]).all()), (state[:4, int(rk.NCAND)], at_or_above[:4])
    out = K.top_p_renorm(probs, p, tuning=tuning)
    problem = mismatch(RENORM, out, R.top_p_renorm(probs.cpu(), p.cpu()))
    assert problem is None, f"routes {by}: {problem}"
    same = K.top_p_renorm(probs, p, tuning=dataclasses.replace(tuning, probe_range=False))
    assert torch.equal(out, same), f"routes {by}: rows {(out != same).any(1).nonzero().flatten().tolist()}"


ROUTE_TESTS = "takes_its_route or crowded or off_its_centre or trimmed_range"


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=240)
def test_the_route_tests_take_their_routes_at_the_compiled_shapes_too():
    """The route tests above, rerun in a subprocess at the shapes and vocabulary they have compiled
    (registered/compiled_shapes.py): rows built at the interpreter's quarter shapes alone took other routes on
    the GPU, where no CPU job looked."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "registered.compiled_shapes",
                          "-q", "-k", ROUTE_TESTS, str(Path(__file__).resolve())],
                         cwd=root, env=env, capture_output=True, text=True, timeout=900)
    tail = (run.stdout + run.stderr)[-3000:]
    assert run.returncode == 0, tail
    counts = re.findall(r"(\d+) (passed|failed|skipped|deselected|error)", run.stdout.splitlines()[-1])
    assert ("5", "passed") in counts and not any(word in ("failed", "skipped", "error") for _, word in counts), tail
    # every route test ran and passed: two route seeds, crowded candidates, mass windows, the trim
