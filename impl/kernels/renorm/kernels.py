"""Triton kernels of the top-k / top-p renorm range select (host side: impl/kernels/renorm/plan.py).

Imports Triton (through impl/kernels/_backend.py) and the interpreter's sort only: never another
module of the renorm package.

The first pass, pass, compaction, gather and write kernels run on a (chunk, row) grid
and read their chunk of a probability row or, once the row is compacted, their share
of its candidate scratch; the finish kernel runs one program per row, and the gather
kernel's last program per row sorts what it gathered. Per-row
state lives in one int64 buffer (fp64 words through a float64 view), addressed by
the word offsets below; a "pass" shrinks the row's key range [lo, hi) to the
sub-range holding the pivot. Keys are the int32 bit patterns of the (non-negative)
fp32 values: they order like the values. Every load of a row goes through _load_keys, which
makes NaN, +-inf and negative entries weigh 0, so they are never kept (the decided
behaviour for out-of-contract values, the same on the torch backend and the oracle).

Cross-program reductions use an atomic ticket: each program writes its partial
result, then takes a ticket; the program drawing the last ticket of its row has
seen every partial (acq_rel) and reduces them. Words a kernel reads at its start
are only written by that last program, after every other program of the row has
read them, so one launch never sees its own half-updated state. The last program also
resets its ticket to 0, and the first pass's last program writes every state word a call
reads (its ticket included): a workspace reused by the next call needs no fill.
"""
from __future__ import annotations

from impl.kernels._backend import tl, triton
from impl.kernels.interpreter_sort import sort_ascending

# Per-row state: one int64 buffer of STATE_W words per row, fp64 words read through a float64
# view. Word offsets (constexpr, so kernels name them; host code reads them with int()):
LO = tl.constexpr(0)  # the key range [LO, HI) known to hold the pivot
HI = tl.constexpr(1)
ABOVE_COUNT = tl.constexpr(2)  # top-k: keys above the range
SPLIT_END = tl.constexpr(2)  # top-p after its probe (the word is top-k's alone): where the finish's first split ends
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
COMPACTED_FROM = tl.constexpr(13)  # the lo the compaction that took the row copied from (read by benchmarks)
FIRST_TICKET = tl.constexpr(14)  # then one atomic ticket counter per reducing launch
MAX_LAUNCHES = 24
STATE_W = tl.constexpr(FIRST_TICKET + MAX_LAUNCHES)

# Per-(row, chunk) partials, PART_W fp64 words: counts at [0, NB), masses at [MASS_AT, MASS_AT + NB),
# the narrowing's (_narrow) counts at [LOW_AT, LOW_AT + 16) and top-p's masses at [0, 16).
NB_MAX = tl.constexpr(16)  # most sub-ranges one pass splits into
UNFIT_SPLIT = tl.constexpr(4)  # sub-ranges a pass after the first (and top-p's first compaction) splits unfit rows into
MASS_AT = NB_MAX
LOW_AT = tl.constexpr(32)
PART_W = tl.constexpr(3 * 16)
# Words a pass leaves free: the first pass's per-chunk count of the keys in its chosen range
# (RANGE_SLOT: its counts use [0, 16), top-p's sums [MASS_AT, MASS_AT + 8)) and largest key; the
# compaction's partial smallest and largest copied key, top-k's mass above the range (the
# compaction's, and the small-batch gather's share of the kept mass) and top-p's exact masses below
# the range and of the rest of the row.
RANGE_SLOT = tl.constexpr(24)
BELOW_SLOT = tl.constexpr(26)
REST_SLOT = tl.constexpr(27)
MIN_KEY_SLOT = tl.constexpr(28)
MAX_KEY_SLOT = tl.constexpr(29)
TOP_KEY_SLOT = tl.constexpr(30)
ABOVE_SLOT = tl.constexpr(31)

FLT_MAX_BITS = tl.constexpr(0x7F7FFFFF)  # the largest finite fp32's bits: +inf weighs 0 like NaN
KEY_NONE = tl.constexpr(0x7FFFFFFF)  # above every key (+inf's is 0x7F800000): "no key" for a minimum
KEY_END = tl.constexpr(0x7F800001)  # one past +inf's key
# Top-p's trimmed range (probe.py TRIM): the share of the row's mass its check keeps spare. The mass past the range
# is summed in fp32 (cheaper in the compaction's step reduction than a third fp64 sum): a sum of positive terms
# through k roundings errs by at most k x 2^-24 of it, k about 40 on a 129280-entry row and under 200 at 2^20
# entries, far below 2^-12; the finish's fp64 sums of the same masses err far less. A row within it falls back.
TRIM_MARGIN = tl.constexpr(2.0 ** -12)
# The first pass splits every key at fixed boundaries instead of evenly: probability rows hold their
# mass, and their pivots, within a few octaves around 1/vocab. Bucket of a key: clamp((key -
# FIRST_BASE) >> shift, 0, buckets - 1), FIRST_BASE the key of 2^-26; one octave is 1 << 23 in key
# space. Each lane counts its keys per bucket in one int64, a field of bits per bucket:
#   top-k: 16 buckets one octave wide, [0, 2^-25), [2^-25, 2^-24), ..., [2^-12, 2^-11), [2^-11, the
#          row's largest key]; 4-bit fields, so at most 15 loop steps a program. A one-octave start
#          halves the segments the compaction reads against two (k = 50: 12.3% -> 6.3% of the row).
#          A row whose range still holds more keys than the scratch at the last compaction attempt
#          (either op) is narrowed by that compaction, which reads the row for it (_narrow): a flat
#          row holds most of its keys within an octave, a confident top-k step (the k-th largest key
#          below 2^-25) in bucket 0. Bucket 0 is counted in 16 LOW buckets (0 alone, then by depth d
#          below 2^-25, bucket 15 - floor(sqrt(2 d)): 1, 1, 3, 3, 5, 5, ... octaves wide going down),
#          any other range split 16 ways evenly; the sub-range holding the pivot is kept, cut to the
#          range's smallest and largest key, and the finish copies its keys from the row. A pivot of
#          0 (fewer than k positive keys) needs no copy. docs/performance.md, "Rows unlike the bench's".
#   top-p: 8 buckets two octaves wide, [0, 2^-24), [2^-24, 2^-22), ..., [2^-12, the row's largest key];
#          8-bit fields (at most 255 steps). It also sums in fp32 the row's mass and, for each bucket
#          b > 0, every entry clamped at b's start (the mass below it, once the counts take off the
#          clamped keys), an accumulator a bucket: 16 would cost more than the narrower start saves
#          (its compaction reads every key).
FIRST_BASE = tl.constexpr(101 << 23)
FIRST_NB_TOP_K = tl.constexpr(16)
LOW_END = tl.constexpr(102 << 23)  # top-k's bucket 1 starts here (2^-25): the LOW buckets lie below
FIRST_SHIFT_TOP_K = tl.constexpr(23)
FIELD_BITS_TOP_K = tl.constexpr(4)
FIRST_NB_TOP_P = tl.constexpr(8)
# Top-p's bucket b > 0 starts at 2^(2b - 26): the first pass clamps every entry at each start.
BUCKET_START_1 = tl.constexpr(2.0 ** -24)
BUCKET_START_2 = tl.constexpr(2.0 ** -22)
BUCKET_START_3 = tl.constexpr(2.0 ** -20)
BUCKET_START_4 = tl.constexpr(2.0 ** -18)
BUCKET_START_5 = tl.constexpr(2.0 ** -16)
BUCKET_START_6 = tl.constexpr(2.0 ** -14)
BUCKET_START_7 = tl.constexpr(2.0 ** -12)
FIRST_SHIFT_TOP_P = tl.constexpr(24)
FIELD_BITS_TOP_P = tl.constexpr(8)
# A program's bucket counts are summed in 16-bit fields (16 // field bits groups of buckets apart, each
# group's fields spread by SPREAD_4 / SPREAD_8): a first-pass program reads at most FIELD_SUM_MAX
# entries (the plan's chunks).
FIELD_SUM_MAX = tl.constexpr(0xFFFF)
SPREAD_4 = tl.constexpr(0x000F000F000F000F)
SPREAD_8 = tl.constexpr(0x00FF00FF00FF00FF)


def first_pass_steps_max(top_p: bool, grouped: bool = False) -> int:
    """Loop steps a first-pass program may take: the largest count one of its lane's fields holds, over the
    GROUP entries a field counts a step when grouped (top-p's GROUPED sums)."""
    return ((1 << int(FIELD_BITS_TOP_P if top_p else FIELD_BITS_TOP_K)) - 1) // (int(GROUP) if grouped else 1)


def first_pass_buckets(top_p: bool) -> tuple[int, int]:
    """(buckets, shift) of the first pass's fixed split: bucket b > 0 starts at FIRST_BASE + (b << shift)."""
    return (int(FIRST_NB_TOP_P), int(FIRST_SHIFT_TOP_P)) if top_p else (int(FIRST_NB_TOP_K), int(FIRST_SHIFT_TOP_K))
# Top-p's first pass sums in fp32 and widens the chosen range by a rigorous bound on the rounding
# (relative MARGIN_SCALE x (steps + BLOCK) x 2^-24 of each sum of non-negative terms, plus ABS_SLACK
# per key for subnormals); the exact fp64 masses come from the compaction, which reads the row anyway.
MARGIN_SCALE = tl.constexpr(4.0)
ABS_SLACK = tl.constexpr(2.0 ** -120)
# Segment maxima: the first pass, which reads every key, also stores the largest key of each SEG
# consecutive entries of a row (SEG x 4 bytes: one 128-byte line; the map is 1/SEG of the row). A
# segment whose largest key is below a launch's threshold holds nothing that launch keeps, so the
# compaction (keys >= lo) and the write (keys >= pivot) load only the segments at or above it: on
# probability rows a small share of the row. Chunks and blocks are whole segments.
SEG = tl.constexpr(32)
# Top-p's grouped first pass (RenormTuning.first_pass_group_sums): a thread adds each GROUP adjacent entries it
# loads (one 16-byte load) before they reach its accumulators, which are then one set a group rather than one
# an entry.
GROUP = tl.constexpr(4)


@triton.jit
def _keys(x):
    # Order-preserving int32 key of a non-negative float; -0.0 maps to +0.0's key.
    return tl.maximum(x.to(tl.int32, bitcast=True), 0)


@triton.jit
def _load_keys(ptrs, mask):
    # Probabilities as the select sees them, and their keys: NaN, +-inf and negative entries (and
    # -0.0) weigh 0 (never kept).
    return _clean(tl.load(ptrs, mask=mask, other=0.0))


@triton.jit
def _clean(raw):
    # _load_keys on loaded values. One test on the bits: a positive finite float's are 1..FLT_MAX's,
    # so bits - 1, read unsigned, is below FLT_MAX's bits (every other pattern wraps above).
    bits = raw.to(tl.int32, bitcast=True)
    key = tl.where((bits - 1).to(tl.uint32, bitcast=True) < FLT_MAX_BITS, bits, 0)
    return key.to(tl.float32, bitcast=True), key


@triton.jit
def _scaled(x, start, SAT: tl.constexpr):
    # min(x, start) / start for a clean x >= 0 and a power-of-two start (at most 2^-12), exactly: dividing by
    # a power of two that is at most 1 neither rounds nor underflows. SAT (CUDA only: inline PTX) as
    # sat(x / start), sat clamping to [0, 1], on the FP32 pipe, where a min takes the integer pipe.
    if SAT:
        return tl.inline_asm_elementwise("mul.rn.sat.f32 $0, $1, $2;", "=f,f,f",
                                         [x, tl.full(x.shape, 1.0 / start, tl.float32)], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.minimum(x, start) * (1.0 / start)


@triton.jit
def _clamped(x, start, SAT: tl.constexpr):
    # min(x, start) for a clean x >= 0 and a power-of-two start. SAT (CUDA only: inline PTX) computes it as
    # start * sat(x / start): both products are exact, so the value is the same bit for bit, and both run on the
    # FP32 pipe, where a min takes the integer pipe that bounds the first pass.
    if SAT:
        return _scaled(x, start, SAT) * start
    else:
        return tl.minimum(x, start)


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
def _scatter(ptrs, x, mask, PTX: tl.constexpr):
    # Store fp32 x at data-dependent addresses (a compaction's slots). tl.store gives such a store one
    # value a thread, so the values, addresses and mask of a block held four a thread change layout
    # through shared memory first, with a barrier each round (on the H200, 10 of the compaction loop's 14
    # barriers). PTX (CUDA only: the plan's PTX_STORES): the same predicated st.global, one value at a
    # time in the layout the operands already have.
    if PTX:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.b32 p, $3, 0; @p st.global.f32 [$1], $2; mov.b32 $0, 0; }",
            "=r,l,f,r", [ptrs.to(tl.int64, bitcast=True), x, mask.to(tl.int32)], dtype=tl.int32, is_pure=False,
            pack=1)
    else:
        tl.store(ptrs, x, mask=mask)


@triton.jit
def _add_two(a0, b0, a1, b1):
    return a0 + a1, b0 + b1


@triton.jit
def _add_three(a0, b0, c0, a1, b1, c1):
    return a0 + a1, b0 + b1, c0 + c1


@triton.jit
def _add_three_max_one(a0, b0, c0, d0, a1, b1, c1, d1):
    return a0 + a1, b0 + b1, c0 + c1, tl.maximum(d0, d1)


@triton.jit
def _add_four_max_one(a0, b0, c0, d0, e0, a1, b1, c1, d1, e1):
    return a0 + a1, b0 + b1, c0 + c1, d0 + d1, tl.maximum(e0, e1)


@triton.jit
def _below_and_rest(x, key, lo):
    # x in fp64, split into the part below the range (keys < lo) and the rest: one select, then rest = x - below,
    # which is x or 0 exactly (two selects on the integer pipe fewer than selecting each part).
    x64 = x.to(tl.float64)
    below = tl.where(key < lo, x64, 0.0)
    return below, x64 - below


@triton.jit
def _copy_in_range(src, start, end, lo, hi, dst, slot, SUM_ABOVE: tl.constexpr, KEY_SPAN: tl.constexpr,
                   SUM_BELOW: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr = False,
                   PTX: tl.constexpr = False, STEP_SUMS: tl.constexpr = 0, region=0, room=0,
                   REGIONS: tl.constexpr = 0, LAYOUT_BLOCK: tl.constexpr = 1024, programs=1,
                   SUM_PAST: tl.constexpr = False):
    # Append the values of src[start:end) whose keys lie in [lo, hi) to dst, from slot on, in
    # order (a block's cumsum places them: no atomics; a block holding none skips it). Returns the
    # next free slot and, when asked, the fp64 mass of the keys >= hi (SUM_ABOVE), the smallest and
    # largest key copied (KEY_SPAN), and the fp64 masses of the keys < lo and of the others (SUM_BELOW):
    # two sums rather than one of all of them, since on probability rows each spans few octaves and is then
    # exact in fp64 whatever the order of its terms (so every launch shape stores the same bits). Top-p's
    # keys above the range are not counted: nothing reads that count.
    # PREFETCH: each step issues the next block's load before working on its own, so a program's
    # load latency overlaps its arithmetic (a one-warp program has no other warp to hide it). PTX: _scatter's.
    # STEP_SUMS, how SUM_BELOW's masses are summed: 0, an fp64 accumulator a loaded entry (four registers
    # a thread for each of its entries), reduced once at the end; 1, each step's masses in the step's count
    # reduction (in a one-warp program, shuffles alone); 2, in a reduction of their own after the copy.
    # REGIONS > 0 (top-p's probed compaction): the copies go to row `region` of the finish's row layout
    # (_region_slots), at most `room` of them; the returned slot still counts every key in range, and the
    # largest key returned is the largest read (one max a key: the probed range may end at KEY_END), and, with
    # SUM_PAST (and SUM_BELOW) in place of SUM_ABOVE's mass, the mass of the keys >= hi, summed in fp32 (the check
    # that the pivot lies below a trimmed range's end, TRIM_MARGIN). It also reads dealt blocks instead of
    # src[start:end): the blocks of BLOCK entries from start on, every `programs`-th (start: the program's first
    # block), so candidates crowded into one span of the row (token ids ordered by frequency) spread over every
    # program's row of the layout.
    idx = tl.arange(0, BLOCK)
    if REGIONS > 0:
        step = programs * BLOCK
    else:
        step: tl.constexpr = BLOCK
    above = tl.zeros([BLOCK], tl.float64)
    below = tl.zeros([1 if STEP_SUMS > 0 else BLOCK], tl.float64)
    rest = tl.zeros([1 if STEP_SUMS > 0 else BLOCK], tl.float64)
    past = tl.zeros([1 if STEP_SUMS > 0 else BLOCK], tl.float32)  # SUM_PAST: the mass of the keys >= hi (fp32)
    kmin = tl.full([BLOCK], KEY_NONE, tl.int32)
    kmax = tl.full([BLOCK], -1, tl.int32)
    top = tl.full([], -1, tl.int32)  # REGIONS with STEP_SUMS 1: the largest key, a step's at a time
    ahead = tl.zeros([BLOCK], tl.float32)
    if PREFETCH:
        ahead = tl.load(src + start + idx, mask=start + idx < end, other=0.0)
    for off in range(start, end, step):
        offs = off + idx
        ok = offs < end
        if PREFETCH:
            x, key = _clean(ahead)
            ahead = tl.load(src + offs + step, mask=offs + step < end, other=0.0)
        else:
            x, key = _load_keys(src + offs, ok)
        take = ok & (key >= lo) & (key < hi)
        big = ok & (key >= hi)
        counted = take.to(tl.int32)
        if SUM_ABOVE:  # one reduction counts both (BLOCK <= 2^14): the block's candidates and its keys above the range
            counted += big.to(tl.int32) << 16
        if SUM_BELOW and STEP_SUMS == 1:  # the masses in the same reduction (masked lanes load 0)
            x_below, x_rest = _below_and_rest(x, key, lo)
            if SUM_PAST:  # and the mass past hi, and the step's largest key (one register; a lane's maxima: 16)
                both, block_below, block_rest, block_past, block_max = tl.reduce(
                    (counted, x_below, x_rest, tl.where(big, x, 0.0), key), 0, _add_four_max_one)
                top = tl.maximum(top, block_max)
                past += block_past
            elif REGIONS > 0:  # and the step's largest key
                both, block_below, block_rest, block_max = tl.reduce((counted, x_below, x_rest, key), 0,
                                                                     _add_three_max_one)
                top = tl.maximum(top, block_max)
            else:
                both, block_below, block_rest = tl.reduce((counted, x_below, x_rest), 0, _add_three)
            below += block_below
            rest += block_rest
        else:
            both = tl.sum(counted, axis=0)
        n_take = both & 0xFFFF if SUM_ABOVE else both
        if n_take > 0:
            ones = take.to(tl.int32)
            if REGIONS > 0:  # int32 places (a row holds at most `room` < 2^31): half the integer work of int64
                at = slot.to(tl.int32) + tl.cumsum(ones, axis=0) - 1
                _scatter(dst + _region_slots(at, region, REGIONS, LAYOUT_BLOCK), x, take & (at < room), PTX)
            else:
                _scatter(dst + slot + (tl.cumsum(ones, axis=0) - 1).to(tl.int64), x, take, PTX)
            slot += n_take.to(tl.int64)
            if KEY_SPAN:
                kmin = tl.minimum(kmin, tl.where(take, key, KEY_NONE))
                kmax = tl.maximum(kmax, tl.where(take, key, -1))
        if REGIONS > 0 and not (SUM_BELOW and STEP_SUMS == 1):
            kmax = tl.maximum(kmax, key)  # masked lanes load key 0
        if SUM_ABOVE:
            if both > 0xFFFF:
                above += tl.where(big, x.to(tl.float64), 0.0)
        if SUM_BELOW and STEP_SUMS == 0:  # masked lanes load 0
            x_below, x_rest = _below_and_rest(x, key, lo)
            below += x_below
            rest += x_rest
            if SUM_PAST:
                past += tl.where(big, x, 0.0)
        if SUM_BELOW and STEP_SUMS == 2:  # a reduction of their own, after the copy
            x_below, x_rest = _below_and_rest(x, key, lo)
            if SUM_PAST:
                block_below, block_rest, block_past = tl.reduce((x_below, x_rest, tl.where(big, x, 0.0)), 0,
                                                                _add_three)
                past += block_past
            else:
                block_below, block_rest = tl.reduce((x_below, x_rest), 0, _add_two)
            below += block_below
            rest += block_rest
    if SUM_PAST:
        above_mass = tl.sum(past, axis=0).to(tl.float64)
    else:
        above_mass = tl.sum(above, axis=0)
    return (slot, above_mass, tl.min(kmin, axis=0), tl.maximum(tl.max(kmax, axis=0), top),
            tl.sum(below, axis=0), tl.sum(rest, axis=0))


@triton.jit
def _copy_from_segments(src, seg_src, listed, start, end, lo, hi, dst, slot, SUM_ABOVE: tl.constexpr,
                        KEY_SPAN: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr = False,
                        PTX: tl.constexpr = False):
    # _copy_in_range without SUM_BELOW, reading only the segments of src[start:end) whose largest key
    # (seg_src: the first pass's map) is >= lo; the others hold no key >= lo. It lists those segments
    # first (ascending, at listed[0:n], this program's own words), then copies from BLOCK // SEG of
    # them a step: on probability rows a few steps instead of one per BLOCK entries.
    # PREFETCH: a step's data is loaded one step ahead and its segment numbers two steps ahead, so
    # the two dependent loads (list word, then the segment) overlap the step before (one warp). PTX:
    # _scatter's.
    ROWS: tl.constexpr = BLOCK // SEG
    first_seg = start // SEG
    n_segs = tl.cdiv(end - start, SEG)
    n_listed = tl.zeros([], tl.int32)
    for m in range(0, n_segs, BLOCK):
        j = m + tl.arange(0, BLOCK)
        need = (j < n_segs) & (tl.load(seg_src + first_seg + j, mask=j < n_segs, other=-1) >= lo)
        ones = need.to(tl.int32)
        tl.store(listed + n_listed + tl.cumsum(ones, axis=0) - 1, first_seg + j, mask=need)
        n_listed += tl.sum(ones, axis=0)
    tl.debug_barrier()  # the list, written by every thread, is read by every thread (through L2: .cg)
    segs = tl.arange(0, ROWS)
    cols = tl.arange(0, SEG)
    above = tl.zeros([ROWS, SEG], tl.float64)
    kmin = tl.full([ROWS, SEG], KEY_NONE, tl.int32)
    kmax = tl.full([ROWS, SEG], -1, tl.int32)
    # PREFETCH carries, into each step: seg, its segment numbers; ahead, its data (loaded during the
    # step before); seg_next, the next step's segment numbers
    seg = tl.zeros([ROWS], tl.int32)
    seg_next = tl.zeros([ROWS], tl.int32)
    ahead = tl.zeros([ROWS, SEG], tl.float32)
    if PREFETCH:
        seg = tl.load(listed + segs, mask=segs < n_listed, other=0, cache_modifier=".cg")
        seg_next = tl.load(listed + ROWS + segs, mask=ROWS + segs < n_listed, other=0, cache_modifier=".cg")
        first = seg[:, None] * SEG + cols[None, :]
        live_first = segs < n_listed
        ahead = tl.load(src + first, mask=live_first[:, None] & (first < end), other=0.0)
    for i in range(0, n_listed, ROWS):
        live = i + segs < n_listed
        if PREFETCH:
            offs = seg[:, None] * SEG + cols[None, :]
            ok = live[:, None] & (offs < end)
            x, key = _clean(ahead)
            after = seg_next[:, None] * SEG + cols[None, :]
            live_next = (i + ROWS) + segs < n_listed
            ahead = tl.load(src + after, mask=live_next[:, None] & (after < end), other=0.0)
            seg = seg_next
            seg_next = tl.load(listed + i + 2 * ROWS + segs, mask=i + 2 * ROWS + segs < n_listed, other=0,
                               cache_modifier=".cg")
        else:
            seg = tl.load(listed + i + segs, mask=live, other=0, cache_modifier=".cg")
            offs = seg[:, None] * SEG + cols[None, :]
            ok = live[:, None] & (offs < end)
            x, key = _load_keys(src + offs, ok)
        take = ok & (key >= lo) & (key < hi)
        ones = take.to(tl.int32)
        per_seg = tl.sum(ones, axis=1)
        n_take = tl.sum(per_seg, axis=0)
        if n_take > 0:  # place in order: the segments before, then the entries before in this one
            at = (tl.cumsum(per_seg, axis=0) - per_seg)[:, None] + tl.cumsum(ones, axis=1) - 1
            _scatter(dst + slot + at.to(tl.int64), x, take, PTX)
            slot += n_take.to(tl.int64)
            if KEY_SPAN:
                kmin = tl.minimum(kmin, tl.where(take, key, KEY_NONE))
                kmax = tl.maximum(kmax, tl.where(take, key, -1))
        if SUM_ABOVE:
            above += tl.where(ok & (key >= hi), x.to(tl.float64), 0.0)
    return slot, tl.sum(above), tl.min(kmin), tl.max(kmax)

@triton.jit
def _split_shift(lo, hi, NB: tl.constexpr):
    # Smallest s with (hi - lo - 1) >> s < NB: sub-range d of key is (key - lo) >> s. For a
    # power-of-two NB that is floor(log2(width / NB)) + 1, at least 0: the exponent field of
    # width / NB in fp64 (exact: width < 2^33; 0 has exponent -1023). A loop over s made a
    # chain of 32 dependent steps on every pass of the finish.
    width = (hi - lo - 1).to(tl.int64)
    exponent = ((width.to(tl.float64) * (1.0 / NB)).to(tl.int64, bitcast=True) >> 52) - 1023
    return tl.maximum(exponent + 1, 0).to(tl.int32)


@triton.jit
def _bin_stats(src, start, end, lo, hi, s, front, TOP_P: tl.constexpr, NB: tl.constexpr, FRONT: tl.constexpr,
               BLOCK: tl.constexpr, PREFETCH: tl.constexpr = False, PTX: tl.constexpr = False):
    # Scan src[start:end): per sub-range of [lo, hi), the key count and (top-p) fp64 mass. Sub-range
    # d of a key is (key - lo) >> s.
    # FRONT (one program owning src, `front` = 1): also move the keys in [lo, hi) to the front
    # of src, in order, so the next pass scans only them; returns how many, and (top-k) the fp64
    # mass of the dropped keys >= hi. Writes never pass the block just read.
    # PREFETCH: each step issues the next block's load before its own arithmetic and stores (safe
    # with FRONT: a step's stores land below the next block, and the front only grows). PTX: _scatter's.
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
    ahead = tl.zeros([BLOCK], tl.float32)
    if PREFETCH:
        ahead = tl.load(src + start + tl.arange(0, BLOCK), mask=start + tl.arange(0, BLOCK) < end, other=0.0)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        if PREFETCH:
            x, key = _clean(ahead)
            ahead = tl.load(src + offs + BLOCK, mask=offs + BLOCK < end, other=0.0)
        else:
            x, key = _load_keys(src + offs, ok)
        inside = ok & (key >= lo) & (key < hi)
        d = (key - lo) >> s
        if FRONT:
            # front: int32 0/1 (a bool scalar & vector breaks the interpreter)
            move = (inside.to(tl.int32) & front) != 0
            ones = move.to(tl.int32)
            _scatter(src + n_front + tl.cumsum(ones, axis=0) - 1, x, move, PTX)
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
        # One reduction of four operands: their warp shuffles interleave and they share one round
        # through shared memory (four tl.sum calls paid two barriers each, one after another).
        n0, n1, n2, n3 = tl.reduce((c0, c1, c2, c3), 0, _add_four)
        counts = tl.where(bins == 0, n0, tl.where(bins == 1, n1, tl.where(bins == 2, n2, n3)))
        s0, s1, s2, s3 = tl.reduce((m0, m1, m2, m3), 0, _add_four)
        mass = tl.where(bins == 0, s0, tl.where(bins == 1, s1, tl.where(bins == 2, s2, s3)))
    else:
        mass = tl.sum(masses, axis=0)
    return counts, mass, n_front, tl.sum(dropped_above, axis=0)

@triton.jit
def _choose(counts, mass, lo, hi, s, level, goal, TOP_P: tl.constexpr, NB: tl.constexpr):
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
        best = _top_k_bin(counts, level, goal, NB)
        level = level + tl.sum(tl.where(bins > best, counts, 0.0), axis=0)
    bounds = lo.to(tl.int64) + (bins.to(tl.int64) << s.to(tl.int64))  # sub-range starts (no overflow)
    new_lo = tl.sum(tl.where(bins == best, bounds, 0), axis=0)
    next_start = tl.sum(tl.where(bins == best + 1, bounds, 0), axis=0)
    new_hi = tl.where(best == NB - 1, hi, tl.minimum(next_start, hi))
    n_in = tl.sum(tl.where(bins == best, counts, 0.0), axis=0)
    return new_lo, new_hi, best, level, n_in


@triton.jit
def _top_k_bin(counts, level, goal, NB: tl.constexpr):
    # Top-k: the highest sub-range d keeping >= goal keys at or above it (level keys lie above
    # them all); d = 0 always may.
    bins = tl.arange(0, NB)
    at_or_above = level + tl.sum(counts, axis=0) - (tl.cumsum(counts, axis=0) - counts)
    return tl.max(tl.where(at_or_above >= goal, bins, 0), axis=0)

@triton.jit
def _goal(param_ptr, param_scalar, row, V, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr):
    # The row's clamped parameter: p in [0, 1] (the fp32 value nearest the caller's p, then fp64: an
    # fp64 tensor is rounded here, a scalar on the host; a NaN p keeps everything: 1) or k in [1, V]
    # (as fp64, compared with counts).
    if TOP_P:
        if PARAM_IS_TENSOR:
            p = tl.load(param_ptr + row).to(tl.float32).to(tl.float64)
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
def _row_counts(n, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # Keys a row holds when src[0:n), in natural order, is read as _moving_pass's row layout: row r
    # owns the slots k * BLOCK + r * C + c (C = BLOCK // ROWS, step k, column c), and natural order
    # fills every row's slots of a step before the next step's.
    C: tl.constexpr = BLOCK // ROWS
    r = tl.arange(0, ROWS)
    return (n // BLOCK) * C + tl.minimum(tl.maximum(n % BLOCK - r * C, 0), C)


@triton.jit
def _region_slots(at, region, REGIONS: tl.constexpr, LAYOUT_BLOCK: tl.constexpr):
    # Where the at-th key of row `region` lives in the row layout of REGIONS rows (_row_counts): step
    # at // C, then the row's C slots of that step (C = LAYOUT_BLOCK // REGIONS).
    # (at // C) * LAYOUT_BLOCK + region * C + at % C, as at + (at // C) * (LAYOUT_BLOCK - C) + region * C: a
    # shift and a multiply-add a key (at >= 0: the unsigned division is a shift).
    C: tl.constexpr = LAYOUT_BLOCK // REGIONS
    return at + (at.to(tl.uint32) // C).to(tl.int32) * (LAYOUT_BLOCK - C) + region * C


@triton.jit
def _region_room(cap, REGIONS: tl.constexpr, LAYOUT_BLOCK: tl.constexpr):
    # Keys one row of that layout holds in a scratch of cap slots: its share of the whole steps.
    return (cap // LAYOUT_BLOCK) * (LAYOUT_BLOCK // REGIONS)


@triton.jit
def _moving_pass(src, rows_n, lo, hi, s, front, TOP_P: tl.constexpr, NB: tl.constexpr, ROWS: tl.constexpr,
                 BLOCK: tl.constexpr, PREFETCH: tl.constexpr = False, PTX: tl.constexpr = False,
                 CLAMP: tl.constexpr = False):
    # _bin_stats with FRONT, over src in the row layout (rows_n[r] keys in row r, _row_counts): per
    # sub-range counts and fp64 masses and, with front (int32 1), the keys in [lo, hi) moved to the
    # front of their own row, in order. A [ROWS, C] block is one row a warp (ROWS = the program's
    # warps) or, after top-p's probe, one a chunk (16 or 32 rows: part of a warp each), so a move needs a
    # scan within its warp only: no shared memory and no barrier in the loop (sm_90 SASS, both), where the
    # block-wide scan (ROWS = 1) paid five barriers a step. A row's writes land at or
    # before the slots it has read (its moved count never passes k * C + c) and depend on every key
    # of the row's step through the scan. CLAMP: keys past the NB sub-ranges of width 2^s count in the last.
    # Returns (counts, masses, keys a row now holds, top-k's fp64 mass of the moved-out keys >= hi).
    tl.static_assert(NB == 4, "the row layout keeps NB == 4's 1-D accumulators")
    C: tl.constexpr = BLOCK // ROWS
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, C)[None, :]
    slot = r * C + c
    n_r = rows_n[:, None]
    moved = tl.zeros([ROWS], tl.int32)
    dropped_above = tl.zeros([ROWS, C], tl.float64)
    c0 = tl.zeros([ROWS, C], tl.int32)
    c1 = tl.zeros([ROWS, C], tl.int32)
    c2 = tl.zeros([ROWS, C], tl.int32)
    c3 = tl.zeros([ROWS, C], tl.int32)
    m0 = tl.zeros([ROWS, C], tl.float64)
    m1 = tl.zeros([ROWS, C], tl.float64)
    m2 = tl.zeros([ROWS, C], tl.float64)
    m3 = tl.zeros([ROWS, C], tl.float64)
    ahead = tl.zeros([ROWS, C], tl.float32)
    if PREFETCH:
        ahead = tl.load(src + slot, mask=c < n_r, other=0.0)
    for k in range(0, tl.cdiv(tl.max(rows_n, axis=0), C)):
        ok = k * C + c < n_r
        if PREFETCH:
            x, key = _clean(ahead)
            ahead = tl.load(src + (k + 1) * BLOCK + slot, mask=(k + 1) * C + c < n_r, other=0.0)
        else:
            x, key = _load_keys(src + k * BLOCK + slot, ok)
        inside = ok & (key >= lo) & (key < hi)
        d = (key - lo) >> s
        if CLAMP:  # a split ending below hi (_range_loop's first after the probe): the rest in the last sub-range
            d = tl.minimum(d, NB - 1)
        ones = inside.to(tl.int32) & front
        at = moved[:, None] + tl.cumsum(ones, axis=1) - 1  # the key's place in its row
        _scatter(src + (at // C) * BLOCK + r * C + at % C, x, ones != 0, PTX)
        moved += tl.sum(ones, axis=1)
        if not TOP_P:
            dropped_above += tl.where(((ok & (key >= hi)).to(tl.int32) & front) != 0, x.to(tl.float64), 0.0)
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
    bins = tl.arange(0, NB)
    n0, n1, n2, n3 = tl.reduce(tl.reduce((c0, c1, c2, c3), 1, _add_four), 0, _add_four)
    counts = tl.where(bins == 0, n0, tl.where(bins == 1, n1, tl.where(bins == 2, n2, n3)))
    s0, s1, s2, s3 = tl.reduce(tl.reduce((m0, m1, m2, m3), 1, _add_four), 0, _add_four)
    mass = tl.where(bins == 0, s0, tl.where(bins == 1, s1, tl.where(bins == 2, s2, s3)))
    return counts, mass, moved, tl.sum(tl.sum(dropped_above, axis=1), axis=0)


@triton.jit
def _pack_rows(src, rows_n, ROWS: tl.constexpr, BLOCK: tl.constexpr, PTX: tl.constexpr = False):
    # Back to natural order: the keys of the row layout (rows_n[r] in row r) to src[0:n), step by
    # step, row by row, in order. A key's place is at or before its slot, and the barrier between a
    # step's loads and its stores makes every thread's load land before any thread's store (the
    # places come from the counts alone, so no data dependence orders them).
    C: tl.constexpr = BLOCK // ROWS
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, C)[None, :]
    n_r = rows_n[:, None]
    base = tl.zeros([], tl.int32)
    for k in range(0, tl.cdiv(tl.max(rows_n, axis=0), C)):
        ok = k * C + c < n_r
        x = tl.load(src + k * BLOCK + r * C + c, mask=ok, other=0.0)
        ones = ok.to(tl.int32)
        in_row = tl.sum(ones, axis=1)
        row_start = base + tl.cumsum(in_row, axis=0) - in_row
        tl.debug_barrier()
        _scatter(src + row_start[:, None] + tl.cumsum(ones, axis=1) - 1, x, ok, PTX)
        base += tl.sum(in_row, axis=0)


@triton.jit
def _range_loop(src, n, rows_n, laid_out, first_end, lo, hi, level, goal, front, stop, TOP_P: tl.constexpr,
                NB: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr = False, PTX: tl.constexpr = False,
                ROWS: tl.constexpr = 1, FIRST_END: tl.constexpr = False):
    # One program runs passes over src[0:n) back to back until [lo, hi) is one key, or (front)
    # at most `stop` keys remain in it. With front (int32 1, src private to this program) the keys
    # still in range move to the front each pass, so the scans shrink with the range. Returns (lo,
    # hi, level, n, top-k's fp64 mass of the moved-out keys above the range), the n keys at
    # src[0:n) in natural order. ROWS > 1 (NB == 4): the passes read src as ROWS rows and move keys
    # within their row (_moving_pass); one packing step after the last puts them back in order. rows_n: the
    # keys each row holds (_row_counts(n, ROWS, BLOCK) for src[0:n) in natural order); laid_out (int32 1): src
    # is in the row layout already (the probed compaction's), so it is packed even when no pass ran. FIRST_END
    # (ROWS > 1): the first pass splits [lo, first_end) evenly, its last sub-range running on to hi; every
    # other pass splits its range evenly.
    tl.static_assert(not FIRST_END or ROWS > 1, "a first split ending below hi needs the row layout's passes")
    above = tl.zeros([], tl.float64)
    passes = 0
    while (hi - lo > 1) & (n > stop):
        if FIRST_END:
            s = _split_shift(lo, tl.where(passes == 0, first_end, hi), NB)
        else:
            s = _split_shift(lo, hi, NB)
        if ROWS == 1:
            counts, mass, n_front, dropped = _bin_stats(src, 0, n, lo, hi, s, front, TOP_P, NB, True, BLOCK,
                                                        PREFETCH, PTX)
            n = tl.where(front != 0, n_front, n)
        else:
            counts, mass, rows_front, dropped = _moving_pass(src, rows_n, lo, hi, s, front, TOP_P, NB, ROWS, BLOCK,
                                                             PREFETCH, PTX, FIRST_END)
            rows_n = tl.where(front != 0, rows_front, rows_n)
            n = tl.where(front != 0, tl.sum(rows_front, axis=0), n)
        new_lo, new_hi, _, level, _ = _choose(counts.to(tl.float64), mass, lo, hi, s, level, goal, TOP_P, NB)
        lo = new_lo.to(tl.int32)
        hi = new_hi.to(tl.int32)
        above += dropped  # zero unless front
        passes += 1
        tl.debug_barrier()  # the moved candidates are visible to every thread of the next scan
    if ROWS > 1:
        if ((passes > 0) | (laid_out != 0)) & (front != 0):
            _pack_rows(src, rows_n, ROWS, BLOCK, PTX)
            tl.debug_barrier()  # the packed keys are visible to every thread that reads them next
    return lo, hi, level, n, above


@triton.jit
def _sorted_pivot(keys_src, n, lo, hi, level, goal, TOP_P: tl.constexpr, SORT_CAP: tl.constexpr):
    # The pivot among the keys in [lo, hi) of keys_src[0:n) (n <= SORT_CAP; others may sit beside
    # them: the finish's range passes leave the previous range's keys at the front), by sorting
    # them, as the sort-based definition reads (docs/design.md §3.9): top-k, the (goal - level)-th
    # largest (level keys lie above the range); top-p, with level the mass below it: the first
    # whose inclusive cumulative mass reaches goal.
    # Returns (pivot key, fp64 mass of the range's keys below it, level included, fp64 mass of
    # every key of keys_src[0:n) >= it).
    i = tl.arange(0, SORT_CAP)
    x = tl.load(keys_src + i, mask=i < n, other=0.0, cache_modifier=".cg")  # gathered: already clean
    key = _keys(x)
    in_range = (i < n) & (key >= lo) & (key < hi)
    keys = sort_ascending(tl.where(in_range, key, KEY_NONE))  # the range's keys first
    n = tl.sum(in_range.to(tl.int32), axis=0)
    valid = i < n
    m = tl.where(valid, keys.to(tl.float32, bitcast=True).to(tl.float64), 0.0)
    if TOP_P:
        reached = valid & (level + tl.cumsum(m, axis=0) >= goal)
        at = tl.min(tl.where(reached, i, n - 1), axis=0)  # n - 1 if rounding never reaches it
    else:
        at = tl.minimum(tl.maximum(n - (goal - level).to(tl.int32), 0), n - 1)
    pivot = tl.max(tl.where(i <= at, keys, 0), axis=0)  # keys[at]: ascending
    below = level + tl.sum(tl.where(valid & (keys < pivot), m, 0.0), axis=0)
    kept = tl.sum(tl.where(key >= pivot, x.to(tl.float64), 0.0), axis=0)  # masked lanes load 0
    return pivot, below, kept


@triton.jit
def _after_the_launch_before(PDL: tl.constexpr):
    # PDL (programmatic dependent launch: CUDA sm90+, below the tuning's dependent_launch_rows): this
    # launch may start while the one before it in the stream still runs. Every program waits here
    # before it writes anything or reads anything a launch may have written (only the preloading
    # write reads before: probs, which no launch of the call writes), until that launch has finished
    # and its writes are visible, so each launch also ends after the one before it and the chain
    # orders the whole call. Then it lets the next launch start: that launch's programs take the SMs
    # this one's last wave leaves idle, and the launch gap goes.
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _chunk_and_row(REVERSED: tl.constexpr):
    # This (chunk, row) program's chunk and row. REVERSED walks the grid last to first: programs start
    # in about program-id order, so such a launch begins on the rows the launch before it read last,
    # which are still in the L2 (a 256-row batch is 132 MB against the H200's 50 MB L2).
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    if REVERSED:
        chunk = tl.num_programs(0) - 1 - chunk
        row = tl.num_programs(1) - 1 - row
    return chunk, row


@triton.jit
def _first_stats(src, seg_dst, start, end, TOP_P: tl.constexpr, SEG_MAP: tl.constexpr, BLOCK: tl.constexpr,
                 PREFETCH: tl.constexpr, ONE_REDUCTION: tl.constexpr = False, SAT_CLAMPS: tl.constexpr = False,
                 GROUPED: tl.constexpr = False):
    # Scan src[start:end) (at most first_pass_steps_max steps, at most FIELD_SUM_MAX entries): per
    # first-pass bucket, the key count and (top-p) fp32 sums: mass[0] the chunk's mass, mass[b > 0] its
    # entries clamped at bucket b's start c_b, sum(min(x, c_b)), which is the mass below c_b plus c_b
    # times the (exactly counted) keys at or above it (_first_range takes that off); and the largest key.
    # SEG_MAP: also store each
    # segment's largest key at seg_dst (indexed by segment of src; start is a whole segment). Each
    # lane counts in one int64, a field per bucket; masked lanes count as keys of bucket 0, taken off
    # at the end. The sums are eight accumulators (a [BLOCK, 8] tile costs a shared-memory
    # layout change per step); a clamp costs a min and an add, where a bucket's own mass cost a compare,
    # a select and an add. With SEG_MAP blocks are [BLOCK // SEG, SEG] tiles, a segment a row:
    # its maximum is a reduction along the row (reshaping a 1-D block moved it through shared
    # memory each step); without, [1, BLOCK]. PREFETCH: as _copy_in_range's.
    # GROUPED (top-p without SEG_MAP): blocks are [BLOCK // GROUP, GROUP] tiles, a thread's 16-byte load a row,
    # and each row's entries are added in the thread before they reach the accumulators, which are then
    # [BLOCK // GROUP, 1]: a quarter of the registers (eight sums and a counter word an entry), so a thread may
    # hold more entries a step at the same occupancy. A field counts GROUP keys a step (first_pass_steps_max).
    # The sums scale by a bucket's start after the group's sum instead of before (exact: a power of two), and
    # their rounding stays inside _first_range's bound: a term's path is a group's two levels, then the steps.
    NB: tl.constexpr = FIRST_NB_TOP_P if TOP_P else FIRST_NB_TOP_K
    SHIFT: tl.constexpr = FIRST_SHIFT_TOP_P if TOP_P else FIRST_SHIFT_TOP_K
    BITS: tl.constexpr = FIELD_BITS_TOP_P if TOP_P else FIELD_BITS_TOP_K
    bins = tl.arange(0, NB)
    ROWS: tl.constexpr = BLOCK // SEG if SEG_MAP else (BLOCK // GROUP if GROUPED else 1)
    COLS: tl.constexpr = SEG if SEG_MAP else (GROUP if GROUPED else BLOCK)
    ACC: tl.constexpr = 1 if GROUPED else COLS  # the accumulators' columns
    segs = tl.arange(0, ROWS)
    packed = tl.zeros([ROWS, ACC], tl.int64)
    m0 = tl.zeros([ROWS, ACC], tl.float32)
    m1 = tl.zeros([ROWS, ACC], tl.float32)
    m2 = tl.zeros([ROWS, ACC], tl.float32)
    m3 = tl.zeros([ROWS, ACC], tl.float32)
    m4 = tl.zeros([ROWS, ACC], tl.float32)
    m5 = tl.zeros([ROWS, ACC], tl.float32)
    m6 = tl.zeros([ROWS, ACC], tl.float32)
    m7 = tl.zeros([ROWS, ACC], tl.float32)
    # the row's largest key: with SEG_MAP from the segments' maxima the map needs anyway (a per-lane
    # maximum cost top-k's first pass 7 us at 256 rows, H200), else per lane, reduced once at the end
    top_key = tl.zeros([ROWS, 1 if SEG_MAP else ACC], tl.int32)
    tile = segs[:, None] * COLS + tl.arange(0, COLS)[None, :]
    ahead = tl.zeros([ROWS, COLS], tl.float32)
    if PREFETCH:
        ahead = tl.load(src + start + tile, mask=start + tile < end, other=0.0)
    for off in range(start, end, BLOCK):
        offs = off + tile
        if PREFETCH:
            x, key = _clean(ahead)
            ahead = tl.load(src + offs + BLOCK, mask=offs + BLOCK < end, other=0.0)
        else:
            x, key = _load_keys(src + offs, offs < end)
        t = tl.minimum(tl.maximum((key - FIRST_BASE) >> SHIFT, 0), NB - 1)
        if SEG_MAP:  # masked lanes load key 0, below every real key or equal to it: a tail segment's max is right
            seg_max = tl.max(key, axis=1)
            tl.store(seg_dst + off // SEG + segs, seg_max, mask=off + segs * SEG < end)
            top_key = tl.maximum(top_key, seg_max[:, None])
        elif GROUPED:
            top_key = tl.maximum(top_key, tl.max(key, axis=1, keep_dims=True))
        else:
            top_key = tl.maximum(top_key, key)
        if GROUPED:  # a group's sums, in the thread: the accumulators take one term a group
            packed += tl.sum(tl.full([ROWS, COLS], 1, tl.int64) << (t * BITS).to(tl.int64), axis=1, keep_dims=True)
            m0 += tl.sum(x, axis=1, keep_dims=True)
            m1 += tl.sum(_scaled(x, BUCKET_START_1, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_1
            m2 += tl.sum(_scaled(x, BUCKET_START_2, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_2
            m3 += tl.sum(_scaled(x, BUCKET_START_3, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_3
            m4 += tl.sum(_scaled(x, BUCKET_START_4, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_4
            m5 += tl.sum(_scaled(x, BUCKET_START_5, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_5
            m6 += tl.sum(_scaled(x, BUCKET_START_6, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_6
            m7 += tl.sum(_scaled(x, BUCKET_START_7, SAT_CLAMPS), axis=1, keep_dims=True) * BUCKET_START_7
        else:
            packed += tl.full([ROWS, COLS], 1, tl.int64) << (t * BITS).to(tl.int64)
        if TOP_P and not GROUPED:  # m0: the mass; m_b: the mass clamped at bucket b's start (a min and an add)
            m0 += x
            m1 += _clamped(x, BUCKET_START_1, SAT_CLAMPS)
            m2 += _clamped(x, BUCKET_START_2, SAT_CLAMPS)
            m3 += _clamped(x, BUCKET_START_3, SAT_CLAMPS)
            m4 += _clamped(x, BUCKET_START_4, SAT_CLAMPS)
            m5 += _clamped(x, BUCKET_START_5, SAT_CLAMPS)
            m6 += _clamped(x, BUCKET_START_6, SAT_CLAMPS)
            m7 += _clamped(x, BUCKET_START_7, SAT_CLAMPS)
    # The lanes' fields and (top-p) sums are added across the program; group g of the int64 holds buckets g,
    # g + GROUPS, ..., each spread to 16 bits (a bucket's count over the program is at most FIELD_SUM_MAX, so no
    # field carries into the next; the arithmetic shift's sign bits are masked off). ONE_REDUCTION: every
    # group and sum in one tuple reduction (one pass through shared memory) instead of one reduction each.
    GROUPS: tl.constexpr = 16 // BITS
    SPREAD: tl.constexpr = SPREAD_8 if BITS == 8 else SPREAD_4
    mass = tl.zeros([NB], tl.float32)
    grouped = tl.zeros([NB], tl.int64)
    if ONE_REDUCTION:
        if TOP_P:  # two groups of 8-bit fields
            g0, g1, s0, s1, s2, s3, s4, s5, s6, s7 = tl.reduce(tl.reduce(
                (packed & SPREAD, (packed >> BITS) & SPREAD, m0, m1, m2, m3, m4, m5, m6, m7), 1, _add_ten), 0,
                _add_ten)
            grouped = tl.where(bins % 2 == 0, g0, g1)
            mass = tl.where(bins == 0, s0, tl.where(bins == 1, s1, tl.where(bins == 2, s2, tl.where(
                bins == 3, s3, tl.where(bins == 4, s4, tl.where(bins == 5, s5, tl.where(bins == 6, s6, s7)))))))
        else:  # four groups of 4-bit fields
            g0, g1, g2, g3 = tl.reduce(tl.reduce((packed & SPREAD, (packed >> BITS) & SPREAD,
                                                  (packed >> (2 * BITS)) & SPREAD, (packed >> (3 * BITS)) & SPREAD),
                                                 1, _add_four), 0, _add_four)
            grouped = tl.where(bins % 4 == 0, g0, tl.where(bins % 4 == 1, g1, tl.where(bins % 4 == 2, g2, g3)))
    else:
        for g in tl.static_range(GROUPS):
            grouped = tl.where(bins % GROUPS == g, tl.sum((packed >> (g * BITS)) & SPREAD), grouped)
        if TOP_P:
            mass = tl.where(bins == 0, tl.sum(m0), tl.where(bins == 1, tl.sum(m1), tl.where(
                bins == 2, tl.sum(m2), tl.where(bins == 3, tl.sum(m3), tl.where(
                    bins == 4, tl.sum(m4), tl.where(bins == 5, tl.sum(m5), tl.where(
                        bins == 6, tl.sum(m6), tl.sum(m7))))))))
    counts = ((grouped >> ((bins // GROUPS) * 16).to(tl.int64)) & FIELD_SUM_MAX).to(tl.int32)
    padding = tl.cdiv(end - start, BLOCK) * BLOCK - (end - start)
    counts -= tl.where(bins == 0, padding, 0)
    return counts, mass, tl.max(top_key)


@triton.jit
def _add_four(a0, a1, a2, a3, b0, b1, b2, b3):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3


@triton.jit
def _add_ten(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9):
    return a0 + b0, a1 + b1, a2 + b2, a3 + b3, a4 + b4, a5 + b5, a6 + b6, a7 + b7, a8 + b8, a9 + b9


@triton.jit
def _first_range(counts_of, mass, top_key, goal, chunk_len, V, TOP_P: tl.constexpr, BLOCK: tl.constexpr):
    # The first pass's choice from the row's per-chunk bucket counts counts_of ([chunks, buckets],
    # fp64) and (top-p) _first_stats' fp32 sums: the buckets [b_lo, b_hi] holding the pivot. Top-k:
    # one bucket, exact (counts). Top-p: every bucket the pivot's may be, given the rounding of the
    # fp32 sums (rigorous bound, see MARGIN_SCALE); the exact rule is the highest bucket whose
    # lower mass stays < (1 - p) x the row's mass, never past the highest bucket holding mass.
    # Returns (lo, hi, b_lo, keys above the range).
    NB: tl.constexpr = FIRST_NB_TOP_P if TOP_P else FIRST_NB_TOP_K
    SHIFT: tl.constexpr = FIRST_SHIFT_TOP_P if TOP_P else FIRST_SHIFT_TOP_K
    bins = tl.arange(0, NB)
    counts = tl.sum(counts_of, axis=0)
    if TOP_P:
        # mass[0]: the row's mass; mass[b > 0]: sum(min(x, c_b)) = (mass below c_b) + c_b x (keys >= c_b).
        # c_b is a power of two and the counts are exact, so c_b x keys is exact in fp64 and the mass
        # below c_b is off by the clamped sum's rounding alone: delta of that sum (non-negative terms).
        total = tl.sum(tl.where(bins == 0, mass, 0.0), axis=0)
        top = tl.max(tl.where(counts > 0, bins, 0), axis=0)  # a key of bucket b > 0 weighs >= c_b > 0
        at_or_above = tl.sum(counts, axis=0) - (tl.cumsum(counts, axis=0) - counts)
        start = (((2 * bins - 26 + 1023).to(tl.int64)) << 52).to(tl.float64, bitcast=True)  # c_b
        steps = tl.cdiv(chunk_len, BLOCK).to(tl.float64)
        delta = MARGIN_SCALE * (steps + BLOCK) * (2.0 ** -24)
        lower = tl.where(bins == 0, 0.0, mass - start * at_or_above)
        error = tl.where(bins == 0, 0.0, delta * mass)
        target = (1.0 - goal) * total
        slack = ABS_SLACK * V
        certain = (lower + error + slack < target * (1.0 - delta)) & (bins <= top)
        possible = (lower - error - slack < target * (1.0 + delta) + slack) & (bins <= top)
        b_lo = tl.max(tl.where(certain, bins, 0), axis=0)
        b_hi = tl.max(tl.where(possible, bins, 0), axis=0)
        finite = total < 1e300  # an fp32 sum overflowed: the whole populated range
        b_lo = tl.where(finite, b_lo, 0)
        b_hi = tl.where(finite, b_hi, top)
        above = tl.zeros([], tl.float64)
    else:
        b_lo = _top_k_bin(counts, 0.0, goal, NB)
        b_hi = b_lo
        above = tl.sum(tl.where(bins > b_lo, counts, 0.0), axis=0)
    lo = tl.where(b_lo == 0, 0, FIRST_BASE + (b_lo << SHIFT))
    hi = tl.where(b_hi == NB - 1, KEY_END, FIRST_BASE + ((b_hi + 1) << SHIFT))
    hi = tl.minimum(hi.to(tl.int64), top_key.to(tl.int64) + 1)  # no key lies above the row's largest
    return lo, hi, b_lo, b_hi, above


@triton.jit
def _first_pass_kernel(
    probs_ptr, param_ptr, param_scalar, seg_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len, num_chunks,
    TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, SEG_MAP: tl.constexpr, TICKET: tl.constexpr,
    BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr, PREFETCH: tl.constexpr, REVERSED: tl.constexpr = False,
    PDL: tl.constexpr = False, ONE_REDUCTION: tl.constexpr = False, SAT_CLAMPS: tl.constexpr = False,
    GROUPED: tl.constexpr = False,
):
    # The first select pass over (chunk, row) programs: count (top-k) or weigh in fp32 (top-p) the
    # keys of each fixed bucket, then the row's last program keeps the bucket(s) holding the pivot
    # and writes each chunk's count of keys in them to its RANGE_SLOT (the compaction places its
    # candidates by them). Top-p's exact fp64 masses are the compaction's. SEG_MAP: also the
    # segment maxima (seg_ptr) the compaction and the write read. REVERSED: _chunk_and_row's.
    # SAT_CLAMPS (CUDA): top-p's clamps as saturating multiplies (_clamped). GROUPED: _first_stats'.
    _after_the_launch_before(PDL)
    chunk, row = _chunk_and_row(REVERSED)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    start = chunk * chunk_len
    counts, mass, top_key = _first_stats(probs_ptr + row.to(tl.int64) * V, seg_ptr + row.to(tl.int64) * tl.cdiv(V, SEG),
                                         start, tl.minimum(start + chunk_len, V), TOP_P, SEG_MAP, BLOCK, PREFETCH,
                                         ONE_REDUCTION, SAT_CLAMPS, GROUPED)
    NB: tl.constexpr = FIRST_NB_TOP_P if TOP_P else FIRST_NB_TOP_K
    bins = tl.arange(0, NB)
    prow = _partials(part_ptr, row, chunk, num_chunks)
    tl.store(prow + bins, counts.to(tl.float64))
    if TOP_P:
        tl.store(prow + MASS_AT + bins, mass.to(tl.float64))
    tl.store(prow + TOP_KEY_SLOT, top_key.to(tl.float64))
    ticket = tl.atomic_add(srow + TICKET, 1)
    if ticket == num_chunks - 1:  # the row's last program: reduce the partials
        c = tl.arange(0, CHUNKS_P2)
        live = c < num_chunks
        rows_of = _partials(part_ptr, row, c, num_chunks)
        counts_of = tl.load(rows_of[:, None] + bins[None, :], mask=live[:, None], other=0.0, cache_modifier=".cg")
        row_mass = tl.zeros([NB], tl.float64)
        if TOP_P:
            row_mass = tl.sum(tl.load(rows_of[:, None] + MASS_AT + bins[None, :], mask=live[:, None], other=0.0,
                                      cache_modifier=".cg"), axis=0)
        row_top = tl.max(tl.load(rows_of + TOP_KEY_SLOT, mask=live, other=0.0, cache_modifier=".cg"), axis=0)
        goal = _goal(param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
        lo, hi, b_lo, b_hi, above = _first_range(counts_of, row_mass, row_top, goal, chunk_len, V, TOP_P, BLOCK)
        in_range = (bins[None, :] >= b_lo) & (bins[None, :] <= b_hi)
        per_chunk = tl.sum(tl.where(in_range, counts_of, 0.0), axis=1)
        tl.store(rows_of + RANGE_SLOT, per_chunk, mask=live)
        # Every state word a call reads is written here, its own ticket reset: a reused workspace needs
        # no fill (one store: the words are written by different threads).
        w = tl.arange(0, 16)
        words = tl.where(w == LO, lo.to(tl.int64), 0)
        words = tl.where(w == HI, hi.to(tl.int64), words)
        words = tl.where(w == ABOVE_COUNT, above.to(tl.int64), words)  # top-p: 0
        words = tl.where(w == CHOSEN, RANGE_SLOT, words)
        words = tl.where(w == CHOSEN_COUNT, tl.sum(per_chunk, axis=0).to(tl.int64), words)
        tl.store(srow + w, words, mask=w <= TICKET)  # TICKET is FIRST_TICKET: words [0, FIRST_TICKET]


@triton.jit
def _pass_kernel(
    probs_ptr, param_ptr, param_scalar, cand_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len, num_chunks,
    cap, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, SKIP_COMPACTED: tl.constexpr,
    NB: tl.constexpr, TICKET: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr, PDL: tl.constexpr = False,
):
    # One select pass after the first over (chunk, row) programs: split [lo, hi) into NB sub-ranges,
    # count (top-k) or weigh (top-p, fp64) the keys in each, and keep the sub-range holding the
    # pivot. With SKIP_COMPACTED, compacted rows are left to the finish kernel.
    _after_the_launch_before(PDL)
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    if SKIP_COMPACTED:
        if tl.load(srow + COMPACTED) != 0:
            return
    if tl.load(srow + HI) - tl.load(srow + LO) <= 1:  # the range is down to the pivot's key
        return
    lo = tl.load(srow + LO).to(tl.int32)
    hi = tl.load(srow + HI).to(tl.int32)
    s = _split_shift(lo, hi, NB)
    src, start, end = _source(probs_ptr, cand_ptr, srow, row, chunk, V, chunk_len, num_chunks, cap, BLOCK)
    counts, mass, _, _ = _bin_stats(src, start, end, lo, hi, s, 0, TOP_P, NB, False, BLOCK)
    bins = tl.arange(0, NB)
    prow = _partials(part_ptr, row, chunk, num_chunks)
    tl.store(prow + bins, counts.to(tl.float64))
    if TOP_P:
        tl.store(prow + MASS_AT + bins, mass)
    ticket = tl.atomic_add(srow + TICKET, 1)
    if ticket == num_chunks - 1:  # the row's last program: reduce the partials
        tl.store(srow + TICKET, 0)  # every program of the row has drawn: ready for the next call
        c = tl.arange(0, CHUNKS_P2)
        rows_of = _partials(part_ptr, row, c, num_chunks)
        level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
        _reduce_and_choose(srow, frow, rows_of, c < num_chunks, lo, hi, s, level, goal, TOP_P, NB)


@triton.jit
def _reduce_and_choose(srow, frow, rows_of, live, lo, hi, s, level, goal, TOP_P: tl.constexpr, NB: tl.constexpr):
    # A split pass's reduction (the row's last program): sum the chunks' NB counts and (top-p) fp64
    # masses, keep the sub-range holding the pivot and write the row's new range, level, CHOSEN
    # (the partial word holding each chunk's count of its keys, for the compaction) and CHOSEN_COUNT.
    bins = tl.arange(0, NB)
    counts_of = rows_of[:, None] + bins[None, :]
    row_counts = tl.sum(tl.load(counts_of, mask=live[:, None], other=0.0, cache_modifier=".cg"), axis=0)  # exact
    row_mass = tl.zeros([NB], tl.float64)
    if TOP_P:
        row_mass = tl.sum(tl.load(counts_of + MASS_AT, mask=live[:, None], other=0.0, cache_modifier=".cg"), axis=0)
    new_lo, new_hi, best, level, n_in = _choose(row_counts, row_mass, lo, hi, s, level, goal, TOP_P, NB)
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
    probs_ptr, param_ptr, param_scalar, cand_ptr, seg_ptr, list_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len,
    num_chunks, cap, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, ATTEMPT: tl.constexpr, ADAPT: tl.constexpr,
    MASSES: tl.constexpr, SEG_MAP: tl.constexpr, TICKET: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
    PREFETCH: tl.constexpr, NARROW: tl.constexpr, LANES: tl.constexpr = 32, REVERSED: tl.constexpr = False,
    SPLIT_UNFIT: tl.constexpr = False, PDL: tl.constexpr = False, PTX_STORES: tl.constexpr = False,
    STEP_SUMS: tl.constexpr = 0, SPLIT_ENTRIES: tl.constexpr = 4, REGIONS: tl.constexpr = 0,
    LAYOUT_BLOCK: tl.constexpr = 1024, TRIM: tl.constexpr = False, NARROW_TICKET: tl.constexpr = -1,
):
    # Copy the keys in [lo, hi) of a not-yet-compacted row into its candidate scratch when they
    # fit. The pass just before counted them per chunk (part word CHOSEN), so each program knows
    # where its candidates start: no atomics. Top-k also sums (fp64) the mass of the keys >= hi,
    # part of its kept mass. Top-p's first attempt sums, for every row (fitting or not), the exact
    # fp64 masses below lo and of the whole row: BELOW_MASS, TOTAL and TARGET, which every later
    # launch reads (MASSES: top-p's first attempt). ADAPT: the range shrinks to the smallest and
    # largest key copied. With SEG_MAP (not MASSES) only the segments whose largest key is >= lo are
    # read (_copy_from_segments; list_ptr: per row, one word per segment, each program's at its own).
    # PREFETCH: _copy_in_range's, or with the map _copy_from_segments'. NARROW (the last attempt of
    # the finish path): a row that still does not fit is narrowed (_narrow), its programs drawing the ticket
    # NARROW_TICKET (-1: TICKET's). Top-p's first attempt narrows when it is the only one (compact_attempts 1):
    # then on a ticket word of its own, drawn after the masses' ticket, so the narrowing's last program reads the
    # exact mass below the range and the target that the masses' last program stored.
    # LANES: the program's threads (32 x warps). REVERSED: _chunk_and_row's. SPLIT_UNFIT (top-p's
    # first attempt when another follows, in programs of several warps): a row that does not fit is
    # also split UNFIT_SPLIT ways in the same launch, as _pass_kernel would split it (its last program
    # knows the exact mass below the range once it has reduced the masses), so the next attempt needs
    # no pass of its own. STEP_SUMS: _copy_in_range's (MASSES). SPLIT_ENTRIES: the split's entries a thread
    # a step. Both change how many registers a thread holds, so how many programs an SM runs at once.
    # REGIONS > 0 (top-p's first attempt after the probe, impl/kernels/renorm/probe.py): no pass counted the
    # candidates, so program c reads every num_chunks-th block of BLOCK entries from block c (_copy_in_range's
    # dealt blocks, not its chunk) and copies its candidates into row c of the finish's row layout (REGIONS rows of
    # LAYOUT_BLOCK // REGIONS slots a step), as many as the row holds, and stores how many it had; the last
    # program checks the probe's guess (the pivot >= lo: the exact mass below lo under the target, or lo 0)
    # and that every program's keys fitted; with TRIM (the probe's range may end at its guess of the pivot's end,
    # probe.py) also that the pivot lies below that end (the mass past it, _copy_in_range's SUM_PAST). A row
    # failing any is left to the passes that follow.
    _after_the_launch_before(PDL)
    chunk, row = _chunk_and_row(REVERSED)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    n = tl.load(srow + CHOSEN_COUNT)
    fits = n <= cap
    needed = fits
    if MASSES:
        needed = n >= 0  # every row
    if (tl.load(srow + COMPACTED) == 0) & needed:  # not compacted yet, and fits (or top-p's masses)
        lo = tl.load(srow + LO).to(tl.int32)
        hi = tl.load(srow + HI).to(tl.int32)
        chosen = tl.load(srow + CHOSEN).to(tl.int32)
        c = tl.arange(0, CHUNKS_P2)
        rows_of = _partials(part_ptr, row, c, num_chunks)
        room = tl.zeros([], tl.int32)
        if REGIONS > 0:
            slot = tl.zeros([], tl.int64)  # a row of its own
            room += _region_room(cap, REGIONS, LAYOUT_BLOCK)
        else:
            earlier = tl.load(rows_of + chosen, mask=c < chunk, other=0.0)
            slot = tl.sum(earlier, axis=0).to(tl.int64)  # candidates of the earlier chunks come first
        start = chunk * chunk_len
        copy_hi = tl.where(fits, hi, lo)  # [lo, lo) copies nothing
        src, dst = probs_ptr + row.to(tl.int64) * V, cand_ptr + row.to(tl.int64) * cap
        end = tl.minimum(start + chunk_len, V)
        below = tl.zeros([], tl.float64)
        rest = tl.zeros([], tl.float64)
        if REGIONS > 0:  # every key is read, in blocks dealt to the programs in turn (_copy_in_range)
            taken, above, kmin, kmax, below, rest = _copy_in_range(
                src, chunk * BLOCK, V, lo, copy_hi, dst, slot, not TOP_P, ADAPT, MASSES, BLOCK, PREFETCH,
                PTX_STORES, STEP_SUMS, chunk, room, REGIONS, LAYOUT_BLOCK, num_chunks, TRIM)
        elif MASSES or not SEG_MAP:  # every key is read (and, MASSES, weighed)
            taken, above, kmin, kmax, below, rest = _copy_in_range(
                src, start, end, lo, copy_hi, dst, slot, not TOP_P, ADAPT, MASSES, BLOCK, PREFETCH, PTX_STORES,
                STEP_SUMS)
        else:  # only the segments that may hold a key >= lo
            seg_row = row.to(tl.int64) * tl.cdiv(V, SEG)
            _, above, kmin, kmax = _copy_from_segments(src, seg_ptr + seg_row, list_ptr + seg_row + start // SEG,
                                                       start, end, lo, copy_hi, dst, slot, not TOP_P, ADAPT, BLOCK,
                                                       PREFETCH, PTX_STORES)
        prow = _partials(part_ptr, row, chunk, num_chunks)
        split = (n > cap) & (hi - lo > 1)  # a range of one key cannot split (_pass_kernel skips it too)
        if SPLIT_UNFIT:
            if split:  # a second read of the chunk, rows that do not fit only (SPLIT_ENTRIES a thread a step)
                s = _split_shift(lo, hi, UNFIT_SPLIT)
                sub_counts, sub_mass, _moved, _dropped = _bin_stats(src, start, end, lo, hi, s, 0, TOP_P, UNFIT_SPLIT,
                                                                    False, SPLIT_ENTRIES * LANES)
                bins = tl.arange(0, UNFIT_SPLIT)
                tl.store(prow + bins, sub_counts.to(tl.float64))
                tl.store(prow + MASS_AT + bins, sub_mass)
        if not TOP_P:
            tl.store(prow + ABOVE_SLOT, above)
        if TRIM:  # top-p's, after a probe that may trim the range: the mass of the keys past it
            tl.store(prow + ABOVE_SLOT, above)
        if MASSES:
            tl.store(prow + BELOW_SLOT, below)
            tl.store(prow + REST_SLOT, rest)
        if REGIONS > 0:
            tl.store(prow + RANGE_SLOT, taken.to(tl.float64))
            tl.store(prow + MAX_KEY_SLOT, kmax.to(tl.float64))  # keys are exact in fp64
        if ADAPT:  # keys are exact in fp64
            tl.store(prow + MIN_KEY_SLOT, kmin.to(tl.float64))
            tl.store(prow + MAX_KEY_SLOT, kmax.to(tl.float64))
        ticket = tl.atomic_add(srow + TICKET, 1)
        if ticket == num_chunks - 1:
            tl.store(srow + TICKET, 0)  # ready for the next call
            live = c < num_chunks
            if MASSES:
                below = tl.sum(tl.load(rows_of + BELOW_SLOT, mask=live, other=0.0, cache_modifier=".cg"), axis=0)
                total = below + tl.sum(tl.load(rows_of + REST_SLOT, mask=live, other=0.0, cache_modifier=".cg"), axis=0)
                tl.store(frow + BELOW_MASS, below)
                tl.store(frow + TOTAL, total)
                target = (1.0 - _goal(param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)) * total
                tl.store(frow + TARGET, target)
                if SPLIT_UNFIT:
                    if split:
                        _reduce_and_choose(srow, frow, rows_of, live, lo, hi, _split_shift(lo, hi, UNFIT_SPLIT),
                                           below, target, TOP_P, UNFIT_SPLIT)
            if REGIONS > 0:
                copied = tl.load(rows_of + RANGE_SLOT, mask=live, other=0.0, cache_modifier=".cg")
                highest = tl.max(tl.load(rows_of + MAX_KEY_SLOT, mask=live, other=0.0, cache_modifier=".cg"),
                                 axis=0).to(tl.int32)
                whole = tl.maximum(highest + 1, lo + 1)  # no key above the row's largest
                hi = tl.minimum(hi, whole)  # the range copied: to the probe's trimmed end, or the row's
                holds = (lo == 0) | (below < target)  # the pivot is >= lo
                # The pivot is below a trimmed end when the mass below it reaches the target, by a margin (TRIM_MARGIN)
                # that neither the fp32 sum of the mass past it nor the finish's own sums can round away.
                ends = hi >= whole
                if TRIM:
                    past = tl.sum(tl.load(rows_of + ABOVE_SLOT, mask=live, other=0.0, cache_modifier=".cg"), axis=0)
                    ends = ends | (total - past >= target + total * TRIM_MARGIN)
                if holds & ends & (tl.max(copied, axis=0) <= _region_room(cap, REGIONS, LAYOUT_BLOCK)):
                    tl.store(srow + HI, hi.to(tl.int64))
                    tl.store(srow + NCAND, tl.sum(copied, axis=0).to(tl.int64))
                    tl.store(srow + COMPACTED_FROM, lo.to(tl.int64))
                    tl.store(srow + COMPACTED, ATTEMPT)
                else:  # the passes that follow take the row: below lo, or every key >= lo (past a trimmed end, or
                    # more than fitted)
                    tl.store(srow + LO, tl.where(holds, lo, 0).to(tl.int64))
                    tl.store(srow + HI, tl.where(holds, whole, lo).to(tl.int64))
                    tl.store(frow + BELOW_MASS, tl.where(holds, below, 0.0))
                    tl.store(srow + CHOSEN_COUNT, cap + 1)
            elif fits:
                _compacted(srow, frow, rows_of, live, lo, hi, n, TOP_P, ATTEMPT, ADAPT)
    if NARROW:  # the last attempt, on the capped scratch: a row still overflowing it is narrowed
        if (tl.load(srow + COMPACTED) == 0) & (n > cap):
            _narrow(probs_ptr, param_ptr, param_scalar, part_ptr, srow, frow, row, chunk, V, chunk_len, num_chunks,
                    TOP_P, PARAM_IS_TENSOR, ATTEMPT, TICKET if NARROW_TICKET < 0 else NARROW_TICKET, CHUNKS_P2,
                    LANES)


@triton.jit
def _low_bucket(key):
    # Top-k's LOW bucket of a key below 2^-25: 0 for key 0, else 15 - floor(sqrt(2 d)) for a key d
    # octaves below 2^-25 (d = 101 - its biased exponent, 0..101): buckets 1, 1, 3, 3, 5, 5, ... octaves
    # wide going down, so a bucket widens with its depth, as a row's spread does when a lower
    # temperature pushes its pivot deeper. 2 d + 0.5 lies at least 0.5 from a square: the fp32
    # square root cannot round across one.
    d = tl.maximum(101 - (key >> 23), 0)
    return tl.where(key == 0, 0, 15 - tl.sqrt((2 * d).to(tl.float32) + 0.5).to(tl.int32))


@triton.jit
def _narrow(probs_ptr, param_ptr, param_scalar, part_ptr, srow, frow, row, chunk, V, chunk_len, num_chunks,
            TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, ATTEMPT: tl.constexpr, TICKET: tl.constexpr,
            CHUNKS_P2: tl.constexpr, LANES: tl.constexpr):
    # A row whose range [lo, hi) still holds more keys than the scratch after its last compaction
    # attempt (flat rows hold most of their keys within an octave; a confident top-k step holds them
    # in bucket 0): count (and, top-p, weigh in fp64) its keys in 16 sub-ranges, note the range's
    # smallest and largest key, and let the row's last program keep the sub-range holding the pivot,
    # cut to [smallest, largest] (a range of one repeated key collapses to that key). The finish
    # copies the kept sub-range's keys from the row when they fit (CHOSEN_COUNT says how many).
    # Sub-ranges: top-k's bucket 0 ([0, hi), hi <= 2^-25) by _low_bucket, where a pivot of 0 (fewer
    # than k positive keys) marks the row compacted with no candidates and its whole mass above
    # them; any other range split evenly, as a pass splits it.
    # Top-p weighs a [block, 16] fp64 tile a step: two rows of it per lane (LANES: the program's
    # threads). A 256-entry block cost a one-warp program 255 registers and a stack (sm_90).
    NARROW_BLOCK: tl.constexpr = 2 * LANES if TOP_P else 256
    bins = tl.arange(0, 16)
    lo = tl.load(srow + LO).to(tl.int32)
    hi = tl.load(srow + HI).to(tl.int32)
    low = (lo == 0) & (not TOP_P)
    s = _split_shift(lo, hi, 16)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    src = probs_ptr + row.to(tl.int64) * V
    counts = tl.zeros([16], tl.int32)
    masses = tl.zeros([16], tl.float64)
    row_mass = tl.zeros([], tl.float64)  # top-k: the pivot-0 case keeps the whole row
    kmin = tl.full([], KEY_NONE, tl.int32)
    kmax = tl.full([], -1, tl.int32)
    for off in range(start, end, NARROW_BLOCK):
        offs = off + tl.arange(0, NARROW_BLOCK)
        x, key = _load_keys(src + offs, offs < end)
        inside = (offs < end) & (key >= lo) & (key < hi)
        d = tl.where(low, _low_bucket(key), (key - lo) >> s)
        counts += tl.histogram(d, 16, mask=inside)
        kmin = tl.minimum(kmin, tl.min(tl.where(inside, key, KEY_NONE), axis=0))
        kmax = tl.maximum(kmax, tl.max(tl.where(inside, key, -1), axis=0))
        if TOP_P:
            hit = inside[:, None] & (d[:, None] == bins[None, :])
            masses += tl.sum(tl.where(hit, x.to(tl.float64)[:, None], 0.0), axis=0)
        else:
            row_mass += tl.sum(x.to(tl.float64), axis=0)  # masked and cleaned lanes load 0
    prow = _partials(part_ptr, row, chunk, num_chunks)
    tl.store(prow + LOW_AT + bins, counts.to(tl.float64))
    if TOP_P:  # the row's partials are this launch's alone: counts, masses and key bounds apart
        tl.store(prow + bins, masses)
    else:
        tl.store(prow + ABOVE_SLOT, row_mass)
    tl.store(prow + MIN_KEY_SLOT, kmin.to(tl.float64))  # keys are exact in fp64
    tl.store(prow + MAX_KEY_SLOT, kmax.to(tl.float64))
    ticket = tl.atomic_add(srow + TICKET, 1)
    if ticket == num_chunks - 1:
        tl.store(srow + TICKET, 0)  # ready for the next call
        c = tl.arange(0, CHUNKS_P2)
        live = c < num_chunks
        rows_of = _partials(part_ptr, row, c, num_chunks)
        counts_f = tl.sum(tl.load(rows_of[:, None] + LOW_AT + bins[None, :], mask=live[:, None], other=0.0,
                                  cache_modifier=".cg"), axis=0)
        if TOP_P:
            masses = tl.sum(tl.load(rows_of[:, None] + bins[None, :], mask=live[:, None], other=0.0,
                                    cache_modifier=".cg"), axis=0)
        lowest = tl.min(tl.load(rows_of + MIN_KEY_SLOT, mask=live, other=KEY_NONE, cache_modifier=".cg"),
                        axis=0).to(tl.int64)
        highest = tl.max(tl.load(rows_of + MAX_KEY_SLOT, mask=live, other=-1.0, cache_modifier=".cg"),
                         axis=0).to(tl.int64)
        level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
        if low:
            u = _top_k_bin(counts_f, level, goal, 16)
            j = 15 - u  # LOW bucket u > 0 holds keys ceil(j^2 / 2) to ceil((j + 1)^2 / 2) - 1 octaves below 2^-25
            deepest = ((j + 1) * (j + 1) + 1) // 2 - 1
            new_lo = tl.maximum(tl.maximum(101 - deepest, 0) << 23, 1).to(tl.int64)
            new_hi = tl.minimum((102 - (j * j + 1) // 2) << 23, hi).to(tl.int64)
            level = level + tl.sum(tl.where(bins > u, counts_f, 0.0), axis=0)
            n_in = tl.sum(tl.where(bins == u, counts_f, 0.0), axis=0)
        else:
            new_lo, new_hi, u, level, n_in = _choose(counts_f, masses, lo, hi, s, level, goal, TOP_P, 16)
        if low & (u == 0):  # the pivot is 0: every key is kept, zeros weigh nothing
            total = tl.sum(tl.load(rows_of + ABOVE_SLOT, mask=live, other=0.0, cache_modifier=".cg"), axis=0)
            tl.store(frow + ABOVE_MASS, total)
            tl.store(srow + HI, 1)
            tl.store(srow + NCAND, 0)
            tl.store(srow + COMPACTED_FROM, 0)
            tl.store(srow + COMPACTED, ATTEMPT)
        else:
            # [lowest, highest] holds every key of [lo, hi): cutting to it drops no key, so the level
            # (keys above, mass below) stands. A sub-range holding no key (top-p's lowest, all zeros)
            # keeps its bounds.
            cut_lo = tl.maximum(new_lo, lowest)
            cut_hi = tl.minimum(new_hi, highest + 1)
            ok = cut_lo < cut_hi
            tl.store(srow + LO, tl.where(ok, cut_lo, new_lo))
            tl.store(srow + HI, tl.where(ok, cut_hi, new_hi))
            if TOP_P:
                tl.store(frow + BELOW_MASS, level)
            else:
                tl.store(srow + ABOVE_COUNT, level.to(tl.int64))
            tl.store(srow + CHOSEN, u.to(tl.int64) + LOW_AT)
            tl.store(srow + CHOSEN_COUNT, n_in.to(tl.int64))


@triton.jit
def _compacted(srow, frow, rows_of, live, lo, hi, n, TOP_P: tl.constexpr, ATTEMPT: tl.constexpr, ADAPT: tl.constexpr):
    # The compaction's last program, for a row whose candidates it copied: top-k's mass above the
    # range, the adapted range, the candidate count and the attempt that took the row.
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
    tl.store(srow + COMPACTED_FROM, lo)
    tl.store(srow + COMPACTED, ATTEMPT)  # later launches read the scratch


@triton.jit
def _mass_at_or_above(src, n, lo, BLOCK: tl.constexpr):
    # fp64 mass of the keys >= lo in src[0:n), each step's load issued a step ahead.
    acc = tl.zeros([BLOCK], tl.float64)
    ahead = tl.load(src + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=0.0)
    for off in range(0, n, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        x, key = _clean(ahead)
        ahead = tl.load(src + offs + BLOCK, mask=offs + BLOCK < n, other=0.0)
        acc += tl.where((offs < n) & (key >= lo), x.to(tl.float64), 0.0)
    return tl.sum(acc, axis=0)


@triton.jit
def _finish_kernel(
    probs_ptr, param_ptr, param_scalar, cand_ptr, part_ptr, state_ptr, fstate_ptr, V, cap, num_chunks,
    TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, NB: tl.constexpr, SORT_CAP: tl.constexpr, BLOCK: tl.constexpr,
    PREFETCH: tl.constexpr, ROW_BLOCK: tl.constexpr, FIRST_SPLIT: tl.constexpr = False, PDL: tl.constexpr = False,
    PTX_STORES: tl.constexpr = False, ROWS: tl.constexpr = 1, REGIONS: tl.constexpr = False,
):
    # One program per row runs the remaining passes back to back over the row's candidates
    # (cache-resident), moving the ones still in range to the front each pass so the scans shrink
    # with the range, until at most SORT_CAP remain: it sorts those and reads the pivot off (as the
    # small-batch gather does; SORT_CAP 0: passes to the end). A row that never fit the scratch
    # scans its full row every pass. Then top-k sums its kept mass. No partials, tickets or
    # further launches. FINISHED_BY says whether the row sorted. A whole-row read in one program is
    # bound by its load latency, not by bandwidth: the copy of a narrowed row's keys and the kept
    # mass of a row never compacted step ROW_BLOCK entries at a time (more bytes in flight).
    # ROWS > 1: the passes keep the candidates as ROWS rows, one a warp (_range_loop).
    # FIRST_SPLIT: the first pass over more than SORT_CAP candidates moves nothing (every candidate
    # is in range, so a moving pass would move them all); CHOSEN and CHOSEN_COUNT then name the
    # sub-range it kept and its keys. REGIONS (after top-p's probe): a row the first compaction took holds
    # its candidates in the row layout of ROWS rows, row c holding chunk c's (partial word RANGE_SLOT).
    tl.static_assert(not (REGIONS and FIRST_SPLIT), "the first split reads the candidates in natural order")
    _after_the_launch_before(PDL)
    row = tl.program_id(0)
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    compacted = tl.load(srow + COMPACTED) != 0
    src = probs_ptr + row.to(tl.int64) * V
    n = V
    lo = tl.load(srow + LO).to(tl.int32)
    hi = tl.load(srow + HI).to(tl.int32)
    if compacted:
        src = cand_ptr + row.to(tl.int64) * cap
        n = tl.load(srow + NCAND).to(tl.int32)
    else:
        if tl.load(srow + CHOSEN_COUNT) <= cap:  # narrowed by the compaction (_narrow): copy its keys
            dst = cand_ptr + row.to(tl.int64) * cap
            copied, above_range, _, _, _, _ = _copy_in_range(src, 0, V, lo, hi, dst, tl.zeros([], tl.int64),
                                                             not TOP_P, False, False, ROW_BLOCK, True, PTX_STORES)
            if not TOP_P:
                tl.store(frow + ABOVE_MASS, above_range)
            tl.store(srow + NCAND, copied)
            tl.store(srow + COMPACTED_FROM, lo)
            tl.debug_barrier()  # the copied keys are visible to every thread of the passes
            src = dst
            n = copied.to(tl.int32)
            compacted = n >= 0
    level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
    if FIRST_SPLIT:
        if compacted & (n > SORT_CAP) & (hi - lo > 1):
            s = _split_shift(lo, hi, NB)
            counts, masses, _, _ = _bin_stats(src, 0, n, lo, hi, s, 0, TOP_P, NB, False, BLOCK, PREFETCH)
            new_lo, new_hi, best, level, n_in = _choose(counts.to(tl.float64), masses, lo, hi, s, level, goal,
                                                        TOP_P, NB)
            lo = new_lo.to(tl.int32)
            hi = new_hi.to(tl.int32)
            tl.store(srow + CHOSEN, best.to(tl.int64))
            tl.store(srow + CHOSEN_COUNT, n_in.to(tl.int64))
    stop = tl.where(compacted, SORT_CAP, 0)
    rows_n = _row_counts(n, ROWS, BLOCK)
    laid_out = tl.zeros([], tl.int32)
    first_end = hi
    if REGIONS:
        if tl.load(srow + COMPACTED) == 1:  # the probed compaction's row layout, and the probe's split
            r = tl.arange(0, ROWS)
            rows_n = tl.load(_partials(part_ptr, row, r, num_chunks) + RANGE_SLOT, mask=r < num_chunks,
                             other=0.0, cache_modifier=".cg").to(tl.int32)
            laid_out += 1
            first_end = tl.minimum(tl.maximum(tl.load(srow + SPLIT_END).to(tl.int32), lo + 1), hi)
    lo, hi, level, n, above = _range_loop(src, n, rows_n, laid_out, first_end, lo, hi, level, goal,
                                          compacted.to(tl.int32), stop, TOP_P, NB, BLOCK, PREFETCH, PTX_STORES, ROWS,
                                          REGIONS and ROWS > 1)
    kept = tl.zeros([], tl.float64)
    sorted_ = hi - lo > 1  # the loop stopped at <= SORT_CAP candidates, all at the front of src
    if SORT_CAP > 0:
        if sorted_:
            pivot, below, kept = _sorted_pivot(src, n, lo, hi, level, goal, TOP_P, SORT_CAP)
            lo = pivot
            hi = pivot + 1
            level = below
            tl.store(srow + FINISHED_BY, SORTED)
    tl.store(srow + LO, lo.to(tl.int64))
    tl.store(srow + HI, hi.to(tl.int64))
    if TOP_P:
        tl.store(frow + BELOW_MASS, level)
    else:
        if not sorted_:
            if compacted:
                kept = _mass_at_or_above(src, n, lo, BLOCK)
            else:
                kept = _mass_at_or_above(src, n, lo, ROW_BLOCK)
        if compacted:
            kept += tl.load(frow + ABOVE_MASS) + above  # what the compaction and the loop left above
        tl.store(frow + KEPT, kept)


@triton.jit
def _pivot_of_gathered(dst, srow, frow, param_ptr, param_scalar, row, V, lo, hi, TOP_P: tl.constexpr,
                       PARAM_IS_TENSOR: tl.constexpr, NB: tl.constexpr, SORT_CAP: tl.constexpr,
                       SHORT_SORT: tl.constexpr, BLOCK: tl.constexpr, PTX: tl.constexpr = False):
    # The row's last gather program: the pivot among the gathered keys of [lo, hi) (dst, private to
    # it), by sorting them when at most SORT_CAP (in SHORT_SORT slots when they fit), else by range
    # passes that move the survivors to the front. Stores LO / HI (= pivot, pivot + 1), top-p's
    # BELOW_MASS and FINISHED_BY; returns top-k's fp64 mass of the gathered keys >= the pivot
    # (with what the range passes moved out above it).
    n = tl.load(srow + CHOSEN_COUNT).to(tl.int32)  # the keys in [lo, hi)
    level, goal = _level_and_goal(srow, frow, param_ptr, param_scalar, row, V, TOP_P, PARAM_IS_TENSOR)
    kept = tl.zeros([], tl.float64)
    if n <= SORT_CAP:
        if n <= SHORT_SORT:  # the usual case: a sort's cost grows fast with its size
            pivot, below, at_or_above = _sorted_pivot(dst, n, lo, hi, level, goal, TOP_P, SHORT_SORT)
        else:
            pivot, below, at_or_above = _sorted_pivot(dst, n, lo, hi, level, goal, TOP_P, SORT_CAP)
        tl.store(srow + LO, pivot.to(tl.int64))
        tl.store(srow + HI, pivot.to(tl.int64) + 1)
        if TOP_P:
            tl.store(frow + BELOW_MASS, below)
        kept = at_or_above
        tl.store(srow + FINISHED_BY, SORTED)
    else:
        lo, hi, level, n, moved = _range_loop(dst, n, _row_counts(n, 1, BLOCK), 0, hi, lo, hi, level, goal,
                                              tl.full([], 1, tl.int32), 0, TOP_P, NB, BLOCK, False, PTX)
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
            kept = tl.sum(acc, axis=0) + moved
        tl.store(srow + FINISHED_BY, LOOPED)
    return kept


@triton.jit
def _gather_finish_kernel(
    probs_ptr, param_ptr, param_scalar, cand_ptr, gath_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len,
    num_chunks, cap, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, NB: tl.constexpr, SORT_CAP: tl.constexpr,
    SHORT_SORT: tl.constexpr, TICKET: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
    PDL: tl.constexpr = False, PTX_STORES: tl.constexpr = False,
):
    # Small batches, after their passes: copy the keys still in [lo, hi) into the row's gather
    # buffer (V slots: any count fits; each program's start comes from the last pass's per-chunk
    # counts, so no atomics), then the row's last program finds the pivot among them: by sorting
    # them when at most SORT_CAP (in SHORT_SORT slots when they fit), else by range passes that
    # move the survivors to the front (the copy is private to it). Top-k also sums its kept mass
    # here (fp64): each program the keys of its share above the range (>= lo when the range is
    # down to one key), the last one adds the compaction's mass above the candidates and the
    # gathered keys >= pivot. Launch with the passes' grid and BLOCK: the chunks must match.
    _after_the_launch_before(PDL)
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
        _, above, _, _, _, _ = _copy_in_range(src, start, end, lo, copy_hi, dst, slot, not TOP_P, False, False, BLOCK,
                                              False, PTX_STORES)
        if not TOP_P:
            tl.store(_partials(part_ptr, row, chunk, num_chunks) + ABOVE_SLOT, above)
        ticket = tl.atomic_add(srow + TICKET, 1)
        if ticket == num_chunks - 1:  # every copy is visible (acq_rel)
            tl.store(srow + TICKET, 0)  # ready for the next call
            kept = tl.zeros([], tl.float64)
            if not TOP_P:
                kept = tl.sum(tl.load(rows_of + ABOVE_SLOT, mask=c < num_chunks, other=0.0, cache_modifier=".cg"),
                              axis=0)
                if tl.load(srow + COMPACTED) != 0:
                    kept += tl.load(frow + ABOVE_MASS)
            if narrow:
                kept += _pivot_of_gathered(dst, srow, frow, param_ptr, param_scalar, row, V, lo, hi, TOP_P,
                                           PARAM_IS_TENSOR, NB, SORT_CAP, SHORT_SORT, BLOCK, PTX_STORES)
            if not TOP_P:
                tl.store(frow + KEPT, kept)


@triton.jit
def _segments_read(seg_row, off, end, pivot, ROWS: tl.constexpr, SEG_MAP: tl.constexpr):
    # Which of the ROWS tile rows of the write's block at off it reads: with SEG_MAP those whose
    # segment's largest key reaches the pivot (none past end), else every one.
    segs = tl.arange(0, ROWS)
    if SEG_MAP:
        seg = off // SEG + segs
        return tl.load(seg_row + seg, mask=seg * SEG < end, other=-1) >= pivot
    return segs >= 0


@triton.jit
def _pivot_and_scale(state_ptr, fstate_ptr, row, TOP_P: tl.constexpr):
    # The write's row words: the pivot key and 1 / kept mass in fp64 (0 when nothing is kept).
    srow, frow = _row_words(state_ptr, fstate_ptr, row)
    pivot = tl.load(srow + LO).to(tl.int32)
    if TOP_P:
        kept = tl.load(frow + TOTAL) - tl.load(frow + BELOW_MASS)
    else:
        kept = tl.load(frow + KEPT)
    return pivot, tl.where(kept > 0.0, 1.0 / tl.where(kept > 0.0, kept, 1.0), 0.0)


@triton.jit
def _write_kernel(
    probs_ptr, out_ptr, seg_ptr, state_ptr, fstate_ptr, V, chunk_len, TOP_P: tl.constexpr, SEG_MAP: tl.constexpr,
    BLOCK: tl.constexpr, PREFETCH: tl.constexpr = False, REVERSED: tl.constexpr = False,
    EVICT_FIRST: tl.constexpr = False, PRELOAD: tl.constexpr = 0, PDL: tl.constexpr = False,
):
    # Keep the entries >= pivot, scaled by 1 / kept mass in fp64 (zero mass -> zeros; NaN and
    # negative entries -> 0). Blocks are [segments, SEG] tiles: with SEG_MAP a segment whose largest
    # key (the first pass's map) is below the pivot is written as zeros without being read.
    # PREFETCH: a block's data is loaded during the step before and its map words two steps before,
    # so a step's stores do not wait on its two dependent loads (map word, then segment).
    # REVERSED: _chunk_and_row's. EVICT_FIRST: the stores are marked first to leave the L2, so they
    # do not push out the rows the write has yet to read. PRELOAD (> 0: no map, the chunk in at most
    # PRELOAD blocks): the program loads its whole chunk before _after_the_launch_before, so with
    # dependent launches the loads run while the launch before still does (no launch of the call
    # writes probs; nothing is stored before the wait), then keeps and stores it.
    chunk, row = _chunk_and_row(REVERSED)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    src = probs_ptr + row.to(tl.int64) * V
    dst = out_ptr + row.to(tl.int64) * V
    if PRELOAD > 0:
        whole = start + tl.arange(0, PRELOAD)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]
        inside = whole < end
        x, key = _load_keys(src + whole, inside)
        _after_the_launch_before(PDL)
        pivot, scale = _pivot_and_scale(state_ptr, fstate_ptr, row, TOP_P)
        y = tl.where(key >= pivot, x.to(tl.float64) * scale, 0.0)
        tl.store(dst + whole, y.to(tl.float32), mask=inside)
    else:
        _after_the_launch_before(PDL)
        pivot, scale = _pivot_and_scale(state_ptr, fstate_ptr, row, TOP_P)
        seg_row = seg_ptr + row.to(tl.int64) * tl.cdiv(V, SEG)
        ROWS: tl.constexpr = BLOCK // SEG if SEG_MAP else 1  # without the map, [1, BLOCK]: v10's 1-D layout
        COLS: tl.constexpr = SEG if SEG_MAP else BLOCK
        tile = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
        ahead = tl.zeros([ROWS, COLS], tl.float32)
        read_next = tl.zeros([ROWS], tl.int1)
        if PREFETCH:
            first = _segments_read(seg_row, start, end, pivot, ROWS, SEG_MAP)
            ahead = tl.load(src + start + tile, mask=(start + tile < end) & first[:, None], other=0.0)
            read_next = _segments_read(seg_row, start + BLOCK, end, pivot, ROWS, SEG_MAP)
        for off in range(start, end, BLOCK):
            offs = off + tile
            ok = offs < end
            if PREFETCH:
                x, key = _clean(ahead)
                after = offs + BLOCK
                ahead = tl.load(src + after, mask=(after < end) & read_next[:, None], other=0.0)
                read_next = _segments_read(seg_row, off + 2 * BLOCK, end, pivot, ROWS, SEG_MAP)
            else:
                read = ok & _segments_read(seg_row, off, end, pivot, ROWS, SEG_MAP)[:, None]
                x, key = _load_keys(src + offs, read)  # unread: key 0, below a pivot > 0
            y = tl.where(key >= pivot, x.to(tl.float64) * scale, 0.0)
            if EVICT_FIRST:
                tl.store(dst + offs, y.to(tl.float32), mask=ok, eviction_policy="evict_first")
            else:
                tl.store(dst + offs, y.to(tl.float32), mask=ok)
