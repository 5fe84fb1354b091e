"""Triton kernels of the top-k / top-p renorm range select (host side: impl/kernels/renorm.py).

The pass, compaction, gather and write kernels run on a (chunk, row) grid
and read their chunk of a probability row or, once the row is compacted, their share
of its candidate scratch; the finish kernel runs one program per row, and the gather
kernel's last program per row sorts what it gathered. Per-row
state lives in one int64 buffer (fp64 words through a float64 view), addressed by
the word offsets below; a "pass" shrinks the row's key range [lo, hi) to the
sub-range holding the pivot. Keys are the int32 bit patterns of the (non-negative)
fp32 values: they order like the values. Every load goes through _load_probs, which
makes NaN and negative entries weigh 0, so they are never kept (the decided behaviour
for out-of-contract values, the same on the torch backend and the oracle).

Cross-program reductions use an atomic ticket: each program writes its partial
result, then takes a ticket; the program drawing the last ticket of its row has
seen every partial (acq_rel) and reduces them. Words a kernel reads at its start
are only written by that last program, after every other program of the row has
read them, so one launch never sees its own half-updated state.
"""
from __future__ import annotations

from impl.kernels._backend import tl, triton

# Per-row state: one int64 buffer of STATE_W words per row, fp64 words read through a float64
# view. Word offsets (constexpr, so kernels name them; host code reads them with int()):
LO = tl.constexpr(0)  # the key range [LO, HI) known to hold the pivot
HI = tl.constexpr(1)
ABOVE_COUNT = tl.constexpr(2)  # top-k: keys above the range
TARGET = tl.constexpr(3)  # top-p (fp64): the mass the dropped entries must stay below
BELOW_MASS = tl.constexpr(4)  # top-p (fp64): mass of the keys below the range
TOTAL = tl.constexpr(5)  # top-p (fp64): the row's mass
KEPT = tl.constexpr(6)  # top-k (fp64): the kept mass
CHOSEN = tl.constexpr(7)  # the last pass's chosen sub-range
CHOSEN_COUNT = tl.constexpr(8)  # keys in it
COMPACTED = tl.constexpr(9)  # 0, or the compaction attempt (from 1) that copied the row's candidates
NCAND = tl.constexpr(10)  # candidates copied
ABOVE_MASS = tl.constexpr(11)  # top-k (fp64): mass the compaction left above the candidates
FINISHED_BY = tl.constexpr(12)  # how the gather kernel found the pivot: 0 (range was one key), SORTED, LOOPED
SORTED = tl.constexpr(1)
LOOPED = tl.constexpr(2)
FIRST_TICKET = tl.constexpr(13)  # then one atomic ticket counter per reducing launch
MAX_LAUNCHES = 24
STATE_W = tl.constexpr(FIRST_TICKET + MAX_LAUNCHES)

# Per-(row, chunk) partials, PART_W fp64 words: counts at [0, NB), masses at [MASS_AT, MASS_AT + NB).
NB_MAX = tl.constexpr(16)  # most sub-ranges one pass splits into
MASS_AT = NB_MAX
PART_W = tl.constexpr(2 * 16)
# Words 4-way passes (and top-k's 16-way passes: no masses) leave free: the first pass's partial
# largest key; the compaction's partial smallest and largest copied key and top-k's mass above the
# range (the compaction's, and the small-batch gather's share of the kept mass).
MIN_KEY_SLOT = tl.constexpr(28)
MAX_KEY_SLOT = tl.constexpr(29)
TOP_KEY_SLOT = tl.constexpr(30)
ABOVE_SLOT = tl.constexpr(31)

KEY_NONE = tl.constexpr(0x7FFFFFFF)  # above every key (+inf's is 0x7F800000): "no key" for a minimum
KEY_END = tl.constexpr(0x7F800001)  # one past +inf's key
# The first pass splits every key at fixed octave boundaries instead of evenly: probability rows
# hold their mass, and their pivots, within a few octaves around 1/vocab, so after one pass the
# pivot's range is 8 octaves wide, not 64. Keys of 2^-24, 2^-16, 2^-8; the last range ends past
# the row's largest key (at most +inf).
SPLIT_1 = tl.constexpr(0x33800000)
SPLIT_2 = tl.constexpr(0x37800000)
SPLIT_3 = tl.constexpr(0x3B800000)


@triton.jit
def _keys(x):
    # Order-preserving int32 key of a non-negative float; -0.0 maps to +0.0's key.
    return tl.maximum(x.to(tl.int32, bitcast=True), 0)


@triton.jit
def _load_probs(ptrs, mask):
    # Probabilities as the select sees them: NaN and negative entries weigh 0 (never kept).
    x = tl.load(ptrs, mask=mask, other=0.0)
    return tl.where(x > 0.0, x, 0.0)


@triton.jit
def _row_words(state_ptr, fstate_ptr, row):
    # The row's state words: int64 and their fp64 view.
    return state_ptr + row * STATE_W, fstate_ptr + row * STATE_W


@triton.jit
def _partials(part_ptr, row, chunk, num_chunks):
    # The PART_W partial words of program (chunk, row).
    return part_ptr + (row * num_chunks + chunk) * PART_W


@triton.jit
def _source(probs_ptr, cand_ptr, srow, row, chunk, V, chunk_len, num_chunks, cap, BLOCK: tl.constexpr):
    # (pointer, start, end) this program scans: its chunk of the row or, for a compacted row,
    # its share (whole blocks) of the candidate scratch.
    src = probs_ptr + row.to(tl.int64) * V
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    if tl.load(srow + COMPACTED) != 0:
        n = tl.load(srow + NCAND).to(tl.int32)
        share = tl.cdiv(tl.cdiv(n, num_chunks), BLOCK) * BLOCK
        src = cand_ptr + row.to(tl.int64) * cap
        start = chunk * share
        end = tl.minimum(start + share, n)
    return src, start, end


@triton.jit
def _copy_in_range(src, start, end, lo, hi, dst, slot, SUM_ABOVE: tl.constexpr, KEY_SPAN: tl.constexpr,
                   BLOCK: tl.constexpr):
    # Append the values of src[start:end) whose keys lie in [lo, hi) to dst, from slot on, in
    # order (a block's cumsum places them: no atomics). Returns the next free slot and, when asked,
    # the fp64 mass of the keys >= hi (SUM_ABOVE) and the smallest and largest key copied (KEY_SPAN).
    above = tl.zeros([BLOCK], tl.float64)
    kmin = tl.full([BLOCK], KEY_NONE, tl.int32)
    kmax = tl.full([BLOCK], -1, tl.int32)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = _load_probs(src + offs, ok)
        key = _keys(x)
        take = ok & (key >= lo) & (key < hi)
        ones = take.to(tl.int32)
        tl.store(dst + slot + (tl.cumsum(ones, axis=0) - 1).to(tl.int64), x, mask=take)
        slot += tl.sum(ones, axis=0).to(tl.int64)
        if SUM_ABOVE:
            above += tl.where(ok & (key >= hi), x.to(tl.float64), 0.0)
        if KEY_SPAN:
            kmin = tl.minimum(kmin, tl.where(take, key, KEY_NONE))
            kmax = tl.maximum(kmax, tl.where(take, key, -1))
    return slot, tl.sum(above, axis=0), tl.min(kmin, axis=0), tl.max(kmax, axis=0)


@triton.jit
def _split_shift(lo, hi, NB: tl.constexpr):
    # Smallest s with (hi - lo - 1) >> s < NB: sub-range d of key is (key - lo) >> s.
    width = (hi - lo - 1).to(tl.int64)
    s = 0
    for _ in tl.static_range(32):
        s += ((width >> s) >= NB).to(tl.int32)
    return s


@triton.jit
def _bin_stats(src, start, end, lo, hi, s, front, FIRST: tl.constexpr, TOP_P: tl.constexpr, NB: tl.constexpr,
               FRONT: tl.constexpr, BLOCK: tl.constexpr):
    # Scan src[start:end): per sub-range of [lo, hi), the key count and (top-p) fp64 mass, and
    # (first pass) the largest key. Sub-range d of a key is (key - lo) >> s, or the FIRST_SPLIT
    # range it falls in on the first pass.
    # FRONT (one program owning src, `front` = 1): also move the keys in [lo, hi) to the front
    # of src, in order, so the next pass scans only them; returns how many, and (top-k) the fp64
    # mass of the dropped keys >= hi. Writes never pass the block just read.
    bins = tl.arange(0, NB)
    n_front = tl.zeros([], tl.int32)
    dropped_above = tl.zeros([BLOCK], tl.float64)
    # NB == 4 keeps one 1-D accumulator per sub-range (measured ~2x faster than a [BLOCK, NB] tile).
    c0 = tl.zeros([BLOCK], tl.int32)
    c1 = tl.zeros([BLOCK], tl.int32)
    c2 = tl.zeros([BLOCK], tl.int32)
    c3 = tl.zeros([BLOCK], tl.int32)
    m0 = tl.zeros([BLOCK], tl.float64)
    m1 = tl.zeros([BLOCK], tl.float64)
    m2 = tl.zeros([BLOCK], tl.float64)
    m3 = tl.zeros([BLOCK], tl.float64)
    counts = tl.zeros([NB], tl.int32)
    masses = tl.zeros([BLOCK, NB], tl.float64)
    top_key = tl.zeros([BLOCK], tl.int32)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = _load_probs(src + offs, ok)
        key = _keys(x)
        inside = ok & (key >= lo) & (key < hi)
        if FIRST:  # the fixed octave boundaries
            d = (key >= SPLIT_1).to(tl.int32) + (key >= SPLIT_2).to(tl.int32) + (key >= SPLIT_3).to(tl.int32)
            top_key = tl.maximum(top_key, tl.where(ok, key, 0))
        else:
            d = (key - lo) >> s
        if FRONT:
            move = (inside.to(tl.int32) & front) != 0  # front: int32 0/1 (a bool scalar & vector breaks the interpreter)
            ones = move.to(tl.int32)
            tl.store(src + n_front + tl.cumsum(ones, axis=0) - 1, x, mask=move)
            n_front += tl.sum(ones, axis=0)
            if not TOP_P:
                dropped_above += tl.where(((ok & (key >= hi)).to(tl.int32) & front) != 0, x.to(tl.float64), 0.0)
        if NB == 4:
            c0 += (inside & (d == 0)).to(tl.int32)
            c1 += (inside & (d == 1)).to(tl.int32)
            c2 += (inside & (d == 2)).to(tl.int32)
            c3 += (inside & (d == 3)).to(tl.int32)
            if TOP_P:
                xd = tl.where(inside, x.to(tl.float64), 0.0)
                m0 += tl.where(d == 0, xd, 0.0)
                m1 += tl.where(d == 1, xd, 0.0)
                m2 += tl.where(d == 2, xd, 0.0)
                m3 += tl.where(d == 3, xd, 0.0)
        else:
            counts += tl.histogram(d, NB, mask=inside)
            if TOP_P:
                hit = inside[:, None] & (d[:, None] == bins[None, :])
                masses += tl.where(hit, x.to(tl.float64)[:, None], 0.0)
    if NB == 4:
        counts = tl.where(bins == 0, tl.sum(c0, axis=0), tl.where(bins == 1, tl.sum(c1, axis=0),
                          tl.where(bins == 2, tl.sum(c2, axis=0), tl.sum(c3, axis=0))))
        mass = tl.where(bins == 0, tl.sum(m0, axis=0), tl.where(bins == 1, tl.sum(m1, axis=0),
                        tl.where(bins == 2, tl.sum(m2, axis=0), tl.sum(m3, axis=0))))
    else:
        mass = tl.sum(masses, axis=0)
    return counts, mass, tl.max(top_key, axis=0), n_front, tl.sum(dropped_above, axis=0)


@triton.jit
def _choose(counts, mass, lo, hi, s, level, goal, TOP_P: tl.constexpr, FIRST: tl.constexpr, NB: tl.constexpr):
    # The sub-range holding the pivot, from the row's counts (top-k) or fp64 masses (top-p).
    #   top-k: level = keys >= hi, goal = k: the highest d keeping >= k keys at or above it.
    #   top-p: level = mass of keys < lo, goal = target: the highest d whose strictly-lower mass
    #          stays < target; never past the highest sub-range holding mass (exact where rounded
    #          sums could tie: p = 0 makes target = total). d = 0 always may.
    # Returns (new lo, new hi, d, new level, keys in the new range).
    bins = tl.arange(0, NB)
    if TOP_P:
        top = tl.max(tl.where(mass > 0.0, bins, 0), axis=0)
        lower = tl.cumsum(mass, axis=0) - mass
        best = tl.max(tl.where((level + lower < goal) & (bins <= top), bins, 0), axis=0)
        level = level + tl.sum(tl.where(bins < best, mass, 0.0), axis=0)
    else:
        at_or_above = level + tl.sum(counts, axis=0) - (tl.cumsum(counts, axis=0) - counts)
        best = tl.max(tl.where(at_or_above >= goal, bins, 0), axis=0)
        level = level + tl.sum(tl.where(bins > best, counts, 0.0), axis=0)
    if FIRST:  # sub-range starts: 0 and the three octave boundaries
        first_split = tl.where(bins == 1, SPLIT_1, tl.where(bins == 2, SPLIT_2, SPLIT_3))
        bounds = tl.where(bins == 0, 0, first_split).to(tl.int64)
    else:
        bounds = lo.to(tl.int64) + (bins.to(tl.int64) << s.to(tl.int64))  # sub-range starts (no overflow)
    new_lo = tl.sum(tl.where(bins == best, bounds, 0), axis=0)
    next_start = tl.sum(tl.where(bins == best + 1, bounds, 0), axis=0)
    new_hi = tl.where(best == NB - 1, hi, tl.minimum(next_start, hi))
    n_in = tl.sum(tl.where(bins == best, counts, 0.0), axis=0)
    return new_lo, new_hi, best, level, n_in


@triton.jit
def _goal(param_ptr, param_scalar, row, V, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr):
    # The row's clamped parameter: p in [0, 1] (fp64; a NaN p keeps everything: 1) or k in
    # [1, V] (as fp64, compared with counts).
    if TOP_P:
        if PARAM_IS_TENSOR:
            p = tl.load(param_ptr + row).to(tl.float64)
            p = tl.where(p == p, p, 1.0)
        else:
            p = tl.full([], 0.0, tl.float64) + param_scalar
        return tl.minimum(tl.maximum(p, 0.0), 1.0)
    else:
        if PARAM_IS_TENSOR:
            k = tl.load(param_ptr + row).to(tl.int64)
        else:
            k = tl.full([], 0, tl.int64) + param_scalar
        return tl.minimum(tl.maximum(k, 1), V).to(tl.float64)


@triton.jit
def _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr):
    # What _choose compares: top-p (mass of the keys below the range, target mass); top-k (count
    # of the keys above the range, k), all fp64.
    if TOP_P:
        level = tl.load(frow + BELOW_MASS)
        goal = tl.load(frow + TARGET)
    else:
        level = tl.load(srow + ABOVE_COUNT).to(tl.float64)
        goal = _goal(param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
    return level, goal


@triton.jit
def _range_loop(src, n, lo, hi, level, goal, front, TOP_P: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    # One program runs passes over src[0:n) back to back until [lo, hi) is one key. With front
    # (int32 1, src private to this program) the keys still in range move to the front each pass,
    # so the scans shrink with the range. Returns (lo, hi, level, n, top-k's fp64 mass of the
    # moved-out keys above the range).
    above = tl.zeros([], tl.float64)
    while hi - lo > 1:
        s = _split_shift(lo, hi, NB)
        counts, mass, _, n_front, dropped = _bin_stats(src, 0, n, lo, hi, s, front, False, TOP_P, NB, True, BLOCK)
        new_lo, new_hi, _, level, _ = _choose(counts.to(tl.float64), mass, lo, hi, s, level, goal, TOP_P, False, NB)
        lo = new_lo.to(tl.int32)
        hi = new_hi.to(tl.int32)
        n = tl.where(front != 0, n_front, n)
        above += dropped  # zero unless front
        tl.debug_barrier()  # the moved candidates are visible to every thread of the next scan
    return lo, hi, level, n, above


@triton.jit
def _sorted_pivot(keys_src, n, level, goal, TOP_P: tl.constexpr, SORT_CAP: tl.constexpr):
    # The pivot among the n (<= SORT_CAP) keys of the range, by sorting them, as the sort-based
    # definition reads (docs/design.md §3.9): top-k, the (goal - level)-th largest (level keys lie above);
    # top-p, with level the mass below: the first whose inclusive cumulative mass reaches goal.
    # Returns (pivot key, fp64 mass of the keys below it, level included, fp64 mass of those >= it).
    i = tl.arange(0, SORT_CAP)
    valid = i < n
    x = tl.load(keys_src + i, mask=valid, other=0.0, cache_modifier=".cg")  # gathered: already clean
    keys = tl.sort(tl.where(valid, _keys(x), KEY_NONE))  # ascending; padding last
    m = tl.where(valid, keys.to(tl.float32, bitcast=True).to(tl.float64), 0.0)
    if TOP_P:
        reached = valid & (level + tl.cumsum(m, axis=0) >= goal)
        at = tl.min(tl.where(reached, i, n - 1), axis=0)  # n - 1 if rounding never reaches it
    else:
        at = tl.minimum(tl.maximum(n - (goal - level).to(tl.int32), 0), n - 1)
    pivot = tl.max(tl.where(i <= at, keys, 0), axis=0)  # keys[at]: ascending
    below = level + tl.sum(tl.where(valid & (keys < pivot), m, 0.0), axis=0)
    kept = tl.sum(tl.where(valid & (keys >= pivot), m, 0.0), axis=0)
    return pivot, below, kept


@triton.jit
def _pass_kernel(
    probs_ptr, cand_ptr, part_ptr, state_ptr, fstate_ptr, param_ptr, param_scalar, V, chunk_len, num_chunks,
    cap, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, FIRST: tl.constexpr, SKIP_COMPACTED: tl.constexpr,
    NB: tl.constexpr, TICKET: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
):
    # One select pass over (chunk, row) programs: split [lo, hi) into NB sub-ranges, count (top-k)
    # or weigh (top-p, fp64) the keys in each, and keep the sub-range holding the pivot. With
    # SKIP_COMPACTED, compacted rows are left to the finish kernel.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    if SKIP_COMPACTED:
        if tl.load(srow + COMPACTED) != 0:
            return
    if not FIRST:
        if tl.load(srow + HI) - tl.load(srow + LO) <= 1:  # the range is down to the pivot's key
            return
    if FIRST:
        lo = tl.full([], 0, tl.int32)
        hi = tl.full([], KEY_END, tl.int32)
        s = tl.full([], 0, tl.int32)
    else:
        lo = tl.load(srow + LO).to(tl.int32)
        hi = tl.load(srow + HI).to(tl.int32)
        s = _split_shift(lo, hi, NB)
    src, start, end = _source(probs_ptr, cand_ptr, srow, row, chunk, V, chunk_len, num_chunks, cap, BLOCK)
    counts, mass, top_key, _, _ = _bin_stats(src, start, end, lo, hi, s, 0, FIRST, TOP_P, NB, False, BLOCK)
    bins = tl.arange(0, NB)
    prow = _partials(part_ptr, row, chunk, num_chunks)
    tl.store(prow + bins, counts.to(tl.float64))
    if TOP_P:
        tl.store(prow + MASS_AT + bins, mass)
    if FIRST:
        tl.store(prow + TOP_KEY_SLOT, top_key.to(tl.float64))
    ticket = tl.atomic_add(srow + TICKET, 1)
    if ticket == num_chunks - 1:  # the row's last program: reduce the partials
        c = tl.arange(0, CHUNKS_P2)
        live = c < num_chunks
        rows_of = _partials(part_ptr, row, c, num_chunks)
        counts_of = rows_of[:, None] + bins[None, :]
        row_counts = tl.sum(tl.load(counts_of, mask=live[:, None], other=0.0, cache_modifier=".cg"), axis=0)  # exact (fp64)
        row_mass = tl.zeros([NB], tl.float64)
        if TOP_P:
            row_mass = tl.sum(tl.load(counts_of + MASS_AT, mask=live[:, None], other=0.0, cache_modifier=".cg"), axis=0)
            if FIRST:  # the first pass covers every key: its masses sum to the row's total
                total = tl.sum(row_mass, axis=0)
                tl.store(frow + TOTAL, total)
                tl.store(frow + TARGET, (1.0 - _goal(param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)) * total)
        level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
        new_lo, new_hi, best, level, n_in = _choose(row_counts, row_mass, lo, hi, s, level, goal, TOP_P, FIRST, NB)
        if FIRST:  # no key lies above the row's largest: end the range there
            row_top = tl.max(tl.load(rows_of + TOP_KEY_SLOT, mask=live, other=0.0, cache_modifier=".cg"), axis=0)
            new_hi = tl.minimum(new_hi, row_top.to(tl.int64) + 1)
        if TOP_P:
            tl.store(frow + BELOW_MASS, level)
        else:
            tl.store(srow + ABOVE_COUNT, level.to(tl.int64))
        tl.store(srow + LO, new_lo)
        tl.store(srow + HI, new_hi.to(tl.int64))
        tl.store(srow + CHOSEN, best.to(tl.int64))
        tl.store(srow + CHOSEN_COUNT, n_in.to(tl.int64))


@triton.jit
def _compact_kernel(
    probs_ptr, cand_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len, num_chunks, cap,
    TOP_P: tl.constexpr, ATTEMPT: tl.constexpr, ADAPT: tl.constexpr, TICKET: tl.constexpr,
    BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
):
    # Copy the keys in [lo, hi) of a not-yet-compacted row into its candidate scratch when they
    # fit. The pass just before counted them per chunk (part), so each program knows where its
    # candidates start: no atomics. Top-k also sums (fp64) the mass of the keys >= hi, part of
    # its kept mass. ADAPT: the range shrinks to the smallest and largest key copied.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    n = tl.load(srow + CHOSEN_COUNT)
    if (tl.load(srow + COMPACTED) == 0) & (n <= cap):  # not compacted yet, and fits
        lo = tl.load(srow + LO).to(tl.int32)
        hi = tl.load(srow + HI).to(tl.int32)
        chosen = tl.load(srow + CHOSEN).to(tl.int32)
        c = tl.arange(0, CHUNKS_P2)
        rows_of = _partials(part_ptr, row, c, num_chunks)
        earlier = tl.load(rows_of + chosen, mask=c < chunk, other=0.0)
        slot = tl.sum(earlier, axis=0).to(tl.int64)  # candidates of the earlier chunks come first
        start = chunk * chunk_len
        _, above, kmin, kmax = _copy_in_range(probs_ptr + row.to(tl.int64) * V, start, tl.minimum(start + chunk_len, V),
                                              lo, hi, cand_ptr + row.to(tl.int64) * cap, slot, not TOP_P, ADAPT, BLOCK)
        prow = _partials(part_ptr, row, chunk, num_chunks)
        if not TOP_P:
            tl.store(prow + ABOVE_SLOT, above)
        if ADAPT:  # keys are exact in fp64
            tl.store(prow + MIN_KEY_SLOT, kmin.to(tl.float64))
            tl.store(prow + MAX_KEY_SLOT, kmax.to(tl.float64))
        ticket = tl.atomic_add(srow + TICKET, 1)
        if ticket == num_chunks - 1:
            live = c < num_chunks
            if not TOP_P:
                parts = tl.load(rows_of + ABOVE_SLOT, mask=live, other=0.0, cache_modifier=".cg")
                tl.store(frow + ABOVE_MASS, tl.sum(parts, axis=0))
            if ADAPT:
                lowest = tl.min(tl.load(rows_of + MIN_KEY_SLOT, mask=live, other=KEY_NONE, cache_modifier=".cg"),
                                axis=0).to(tl.int64)
                highest = tl.max(tl.load(rows_of + MAX_KEY_SLOT, mask=live, other=-1.0, cache_modifier=".cg"),
                                 axis=0).to(tl.int64)
                if n > 0:
                    tl.store(srow + LO, tl.maximum(lo.to(tl.int64), lowest))
                    tl.store(srow + HI, tl.minimum(hi.to(tl.int64), highest + 1))
            tl.store(srow + NCAND, n)
            tl.store(srow + COMPACTED, ATTEMPT)  # later launches read the scratch


@triton.jit
def _finish_kernel(
    probs_ptr, cand_ptr, state_ptr, fstate_ptr, param_ptr, param_scalar, V, cap, TOP_P: tl.constexpr,
    PARAM_IS_TENSOR: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr,
):
    # One program per row runs the remaining passes back to back over the row's candidates
    # (cache-resident), moving the ones still in range to the front each pass so the scans shrink
    # with the range; a row that never fit the scratch scans its full row every pass. Then top-k
    # sums its kept mass. No partials, tickets or further launches.
    row = tl.program_id(0)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    compacted = tl.load(srow + COMPACTED) != 0
    src = probs_ptr + row.to(tl.int64) * V
    n = V
    if compacted:
        src = cand_ptr + row.to(tl.int64) * cap
        n = tl.load(srow + NCAND).to(tl.int32)
    lo = tl.load(srow + LO).to(tl.int32)
    hi = tl.load(srow + HI).to(tl.int32)
    level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
    lo, hi, level, n, above = _range_loop(src, n, lo, hi, level, goal, compacted.to(tl.int32), TOP_P, NB, BLOCK)
    tl.store(srow + LO, lo.to(tl.int64))
    tl.store(srow + HI, hi.to(tl.int64))
    if TOP_P:
        tl.store(frow + BELOW_MASS, level)
    else:
        acc = tl.zeros([BLOCK], tl.float64)
        for off in range(0, n, BLOCK):
            offs = off + tl.arange(0, BLOCK)
            x = _load_probs(src + offs, offs < n)
            acc += tl.where((offs < n) & (_keys(x) >= lo), x.to(tl.float64), 0.0)
        kept = tl.sum(acc, axis=0)
        if compacted:
            kept += tl.load(frow + ABOVE_MASS) + above  # what the compaction and the loop left above
        tl.store(frow + KEPT, kept)


@triton.jit
def _gather_finish_kernel(
    probs_ptr, cand_ptr, gath_ptr, part_ptr, state_ptr, fstate_ptr, param_ptr, param_scalar, V, chunk_len,
    num_chunks, cap, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, NB: tl.constexpr, SORT_CAP: tl.constexpr,
    SHORT_SORT: tl.constexpr, TICKET: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
):
    # Small batches, after their passes: copy the keys still in [lo, hi) into the row's gather
    # buffer (V slots: any count fits; each program's start comes from the last pass's per-chunk
    # counts, so no atomics), then the row's last program finds the pivot among them: by sorting
    # them when at most SORT_CAP (in SHORT_SORT slots when they fit), else by range passes that
    # move the survivors to the front (the copy is private to it). Top-k also sums its kept mass
    # here (fp64): each program the keys of its share above the range (>= lo when the range is
    # down to one key), the last one adds the compaction's mass above the candidates and the
    # gathered keys >= pivot. Launch with the passes' grid and BLOCK: the chunks must match.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    lo = tl.load(srow + LO).to(tl.int32)
    hi = tl.load(srow + HI).to(tl.int32)
    narrow = hi - lo > 1  # else the pivot is lo already
    if narrow | (not TOP_P):
        chosen = tl.load(srow + CHOSEN).to(tl.int32)  # the last pass's sub-range
        c = tl.arange(0, CHUNKS_P2)
        rows_of = _partials(part_ptr, row, c, num_chunks)
        before = ((c < chunk).to(tl.int32) & narrow.to(tl.int32)) != 0  # no copy, no counts needed
        earlier = tl.load(rows_of + chosen, mask=before, other=0.0)
        slot = tl.sum(earlier, axis=0).to(tl.int64)
        src, start, end = _source(probs_ptr, cand_ptr, srow, row, chunk, V, chunk_len, num_chunks, cap, BLOCK)
        dst = gath_ptr + row.to(tl.int64) * V
        copy_hi = tl.where(narrow, hi, lo)  # [lo, lo) copies nothing; its "above" is every key >= lo
        _, above, _, _ = _copy_in_range(src, start, end, lo, copy_hi, dst, slot, not TOP_P, False, BLOCK)
        if not TOP_P:
            tl.store(_partials(part_ptr, row, chunk, num_chunks) + ABOVE_SLOT, above)
        ticket = tl.atomic_add(srow + TICKET, 1)
        if ticket == num_chunks - 1:  # every copy is visible (acq_rel)
            kept = tl.zeros([], tl.float64)
            if not TOP_P:
                kept = tl.sum(tl.load(rows_of + ABOVE_SLOT, mask=c < num_chunks, other=0.0, cache_modifier=".cg"),
                              axis=0)
                if tl.load(srow + COMPACTED) != 0:
                    kept += tl.load(frow + ABOVE_MASS)
            if narrow:
                n = tl.load(srow + CHOSEN_COUNT).to(tl.int32)  # the keys in [lo, hi)
                level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
                if n <= SORT_CAP:
                    if n <= SHORT_SORT:  # the usual case: a sort's cost grows fast with its size
                        pivot, below, at_or_above = _sorted_pivot(dst, n, level, goal, TOP_P, SHORT_SORT)
                    else:
                        pivot, below, at_or_above = _sorted_pivot(dst, n, level, goal, TOP_P, SORT_CAP)
                    tl.store(srow + LO, pivot.to(tl.int64))
                    tl.store(srow + HI, pivot.to(tl.int64) + 1)
                    if TOP_P:
                        tl.store(frow + BELOW_MASS, below)
                    kept += at_or_above
                    tl.store(srow + FINISHED_BY, SORTED)
                else:
                    lo, hi, level, n, moved = _range_loop(dst, n, lo, hi, level, goal, tl.full([], 1, tl.int32),
                                                          TOP_P, NB, BLOCK)
                    tl.store(srow + LO, lo.to(tl.int64))
                    tl.store(srow + HI, hi.to(tl.int64))
                    if TOP_P:
                        tl.store(frow + BELOW_MASS, level)
                    else:  # the survivors at the front, >= the pivot, and what the loop moved out above
                        acc = tl.zeros([BLOCK], tl.float64)
                        for off in range(0, n, BLOCK):
                            offs = off + tl.arange(0, BLOCK)
                            x = tl.load(dst + offs, mask=offs < n, other=0.0)  # gathered: already clean
                            acc += tl.where((offs < n) & (_keys(x) >= lo), x.to(tl.float64), 0.0)
                        kept += tl.sum(acc, axis=0) + moved
                    tl.store(srow + FINISHED_BY, LOOPED)
            if not TOP_P:
                tl.store(frow + KEPT, kept)


@triton.jit
def _write_kernel(
    probs_ptr, out_ptr, state_ptr, fstate_ptr, V, chunk_len, TOP_P: tl.constexpr, BLOCK: tl.constexpr,
):
    # Keep the entries >= pivot, scaled by 1 / kept mass in fp64 (zero mass -> zeros; NaN and
    # negative entries -> 0).
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    pivot = tl.load(srow + LO).to(tl.int32)
    if TOP_P:
        kept = tl.load(frow + TOTAL) - tl.load(frow + BELOW_MASS)
    else:
        kept = tl.load(frow + KEPT)
    scale = tl.where(kept > 0.0, 1.0 / tl.where(kept > 0.0, kept, 1.0), 0.0)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    base = row.to(tl.int64) * V
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = _load_probs(probs_ptr + base + offs, ok)
        y = tl.where(_keys(x) >= pivot, x.to(tl.float64) * scale, 0.0)
        tl.store(out_ptr + base + offs, y.to(tl.float32), mask=ok)
