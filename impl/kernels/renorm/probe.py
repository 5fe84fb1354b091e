"""Top-p's probe: a key range for the pivot guessed from a sample of each row, in place of the first pass.

Imports the kernels' helpers and state words (impl/kernels/renorm/kernels.py); the plan launches it
(impl/kernels/renorm/plan.py, RenormTuning.probe_range).

The first pass reads every entry to bound the pivot's range; the first compaction then reads every entry
again for the exact fp64 masses. The probe reads a sample instead (SAMPLE entries of each chunk, in lines of
32 spread evenly over it, a few percent of the row) and guesses a start lo with every key >= lo a candidate.
The compaction checks the guess exactly, with the masses it sums anyway: the pivot is >= lo when the mass
below lo stays under (1 - p) x the row's mass, and the candidates fit when no program copied more than its row
of the finish's layout holds. A row that fails either falls back to the passes after the compaction (slower,
still exact). A guess never decides a result, only how fast it comes.

The guess: lo is the highest cut (half an octave apart, key i << 22) whose estimated mass below stays under
PROBE_MARGIN x (1 - p) x the row's estimated mass; and no higher than the lowest cut whose estimated keys at
or above it fit the budget (RenormTuning.probe_budget), when that cut is lower (fewer candidates cost little,
and a lower lo is safer). The row's mass is taken as at least 1: a sample misses a peak (one key holding most
of the mass) with high odds, and probability rows weigh 1. A row whose sample says more (an unnormalized row)
is taken at its sample, each chunk's sample sum capped at twice the mean of the others but the largest, so
that one sampled peak does not count for its whole chunk.
"""
from __future__ import annotations

from impl.kernels._backend import tl, triton
from impl.kernels.renorm.kernels import (
    CHOSEN, CHOSEN_COUNT, FIRST_TICKET, HI, KEY_END, LO, RANGE_SLOT, SPLIT_END, _after_the_launch_before, _goal,
    _load_keys, _row_words,
)

PROBE_MARGIN = tl.constexpr(0.8)  # the share of the target mass the estimated mass below lo may reach
CUT_SHIFT = tl.constexpr(22)  # cut i is key i << 22: half an octave apart (an octave is 1 << 23)
CUTS = tl.constexpr(512)  # cuts 0 .. 511 cover every key (+inf's is 510 << 22)
CUTS_LOG2 = tl.constexpr(9)
SAMPLE_LINE = tl.constexpr(32)  # the sample's lines: 32 entries (128 bytes) read together


@triton.jit
def _probe_kernel(
    probs_ptr, param_ptr, param_scalar, state_ptr, fstate_ptr, V, chunk_len, num_chunks,
    PARAM_IS_TENSOR: tl.constexpr, TICKET: tl.constexpr, CHUNKS_P2: tl.constexpr, SAMPLE: tl.constexpr,
    BUDGET: tl.constexpr, TRIM: tl.constexpr = False, PDL: tl.constexpr = False,
):
    # One program a row: sample, guess lo, and write every state word a call reads (as the first pass's
    # last program does, its ticket reset): [lo, hi) (hi KEY_END, or with TRIM the guessed end), CHOSEN_COUNT 0
    # (the compaction's copies are bounded by their rows of the finish's layout, not by a count), and SPLIT_END.
    tl.static_assert(TICKET == FIRST_TICKET, "the probe is a call's first launch")
    _after_the_launch_before(PDL)
    row = tl.program_id(0)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    c = tl.arange(0, CHUNKS_P2)
    start = c * chunk_len
    length = tl.maximum(tl.minimum(chunk_len, V - start), 0)
    taken = tl.minimum(length, SAMPLE)
    # A chunk longer than the sample gives SAMPLE // SAMPLE_LINE whole lines, one from the middle of each equal
    # stratum of its lines (rows with a trend along the vocabulary, as ids ordered by frequency give them, are
    # sampled across it); a shorter chunk gives every entry.
    j = tl.arange(0, SAMPLE)
    LINES: tl.constexpr = SAMPLE // SAMPLE_LINE
    stratum = ((2 * (j // SAMPLE_LINE) + 1)[None, :] * (length // SAMPLE_LINE)[:, None]) // (2 * LINES)
    at = tl.where((length > SAMPLE)[:, None], stratum * SAMPLE_LINE + (j % SAMPLE_LINE)[None, :], j[None, :])
    live = (c[:, None] < num_chunks) & (j[None, :] < taken[:, None])
    x, key = _load_keys(probs_ptr + row.to(tl.int64) * V + start[:, None] + at, live)
    weight = tl.where(c < num_chunks, length.to(tl.float32) / tl.maximum(taken, 1).to(tl.float32), 0.0)
    # The row's estimated mass, each chunk's sample capped at twice the mean of the others but the largest.
    sums = tl.sum(x, axis=1)
    others = (tl.sum(sums, axis=0) - tl.max(sums, axis=0)) / tl.maximum(num_chunks - 1, 1)
    capped = tl.where(num_chunks > 1, tl.minimum(sums, 2.0 * others), sums)
    estimate = tl.sum(sums + (weight - 1.0) * capped, axis=0)
    goal = _goal(param_ptr, param_scalar, row, V, True, PARAM_IS_TENSOR)
    target = ((1.0 - goal) * tl.maximum(estimate, 1.0)).to(tl.float32)
    # Three binary searches over the cuts, side by side: the highest cut whose estimated mass below stays
    # under PROBE_MARGIN x the target (invariant: cut mass_lo's does, cut mass_hi's does not; cut 0 has none
    # below it); the same under the target / PROBE_MARGIN (where the finish's first split ends: the pivot
    # likely lies between the two); and the lowest cut whose estimated keys at or above it fit the budget
    # (cut 511's: none).
    mass_lo = tl.zeros([], tl.int32)
    mass_hi = tl.full([], CUTS, tl.int32)
    end_lo = tl.zeros([], tl.int32)
    end_hi = tl.full([], CUTS, tl.int32)
    count_lo = tl.zeros([], tl.int32)
    count_hi = tl.full([], CUTS - 1, tl.int32)
    for _ in tl.static_range(CUTS_LOG2):
        mid_mass = (mass_lo + mass_hi) // 2
        mid_end = (end_lo + end_hi) // 2
        mid_count = (count_lo + count_hi) // 2
        below = tl.sum(tl.sum(tl.where(key < (mid_mass << CUT_SHIFT), x, 0.0), axis=1) * weight, axis=0)
        below_end = tl.sum(tl.sum(tl.where(key < (mid_end << CUT_SHIFT), x, 0.0), axis=1) * weight, axis=0)
        above = tl.sum(tl.sum((live & (key >= (mid_count << CUT_SHIFT))).to(tl.float32), axis=1) * weight, axis=0)
        under = below < target * PROBE_MARGIN
        mass_lo = tl.where(under, mid_mass, mass_lo)
        mass_hi = tl.where(under, mass_hi, mid_mass)
        under_end = below_end < target / PROBE_MARGIN
        end_lo = tl.where(under_end, mid_end, end_lo)
        end_hi = tl.where(under_end, end_hi, mid_end)
        fits = above <= BUDGET
        count_hi = tl.where(fits, mid_count, count_hi)
        count_lo = tl.where(fits, count_lo, mid_count + 1)
    lo = tl.minimum(mass_lo, count_hi) << CUT_SHIFT
    lo = tl.where(target > 0.0, lo, 0)  # p = 1 keeps every key
    split_end = tl.maximum(tl.minimum(end_hi, CUTS - 1) << CUT_SHIFT, lo + 1)  # the first cut past the pivot's estimate
    # TRIM: the range ends at split_end too when the keys past it are many (estimated above the budget), so the
    # compaction copies [lo, split_end) only and checks that the pivot lies below its end; few keys past it cost
    # little to copy, and on peaked rows (few keys near the pivot) the estimate of that end is the noisiest.
    past = tl.sum(tl.sum((live & (key >= split_end)).to(tl.float32), axis=1) * weight, axis=0)
    hi = tl.where(TRIM & (target > 0.0) & (past > BUDGET), split_end, KEY_END)
    w = tl.arange(0, 16)
    words = tl.where(w == LO, lo.to(tl.int64), 0)
    words = tl.where(w == HI, hi.to(tl.int64), words)
    words = tl.where(w == CHOSEN, RANGE_SLOT, words)
    words = tl.where(w == CHOSEN_COUNT, 0, words)
    words = tl.where(w == SPLIT_END, split_end.to(tl.int64), words)
    tl.store(srow + w, words, mask=w <= TICKET)  # TICKET is FIRST_TICKET: words [0, FIRST_TICKET]
