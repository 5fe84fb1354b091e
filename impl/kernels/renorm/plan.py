"""Every launch of one renorm call, worked out once per shape: _plan, _plan_for and the plan objects.

Imports the tuning, the kernels and _backend's arithmetic; never the workspace, the fast path or
the API (they read a plan, a plan knows nothing of them).

The Triton path finds the pivot without sorting the row, by a range select over keys:
non-negative fp32 values order like their int32 bit patterns. Each row carries a
key range [lo, hi) known to hold the pivot; a pass splits it into sub-ranges,
counts (top-k) or weighs in fp64 (top-p) the row's keys in each, and keeps the one
holding the pivot. The first pass splits at fixed buckets (top-k: 16 one octave wide, [0, 2^-25),
..., [2^-11, the row's largest key]; top-p: 8 two octaves wide, [0, 2^-24), ..., [2^-12, the
largest key]), where probability rows keep their pivots: each lane counts its keys per bucket in
one int64 (a field a bucket: 4 or 8 bits), top-p
sums in fp32 the row's mass and its entries clamped at each bucket's start (with the exact counts,
the mass below each start) and keeps every bucket the pivot may be in given a rigorous bound
on the rounding; the exact fp64 masses (below the range, the row's total) come from the
compaction, which reads the row anyway. Later passes split evenly. Nothing syncs with the
host and the launch count is fixed (CUDA-graph safe). On CUDA sm90+ and below dependent_launch_rows,
every launch is a programmatic dependent launch: it may start while the one before it runs, and its
programs wait at their top until that one has finished (top-p's write loads its chunk first:
write_preload). Kernels: impl/kernels/renorm/kernels.py.

Top-p's probe (RenormTuning.probe_range, from large_batch_rows rows): a sample of each chunk guesses the
range's start in place of the first pass (impl/kernels/renorm/probe.py); the first compaction copies every
key at or above it, program c's (every chunks-th block of its BLOCK entries from block c) into row c of the finish's
row layout, and checks the guess with its exact masses; with probe_trim the range may also end at the
probe's guess of the pivot's end (TRIM: the compaction checks that end too); a row it misses takes the pass and
second attempt that follow.

Candidate compaction: a row whose current range holds few enough keys copies them
into a per-row scratch, and its later passes read only those. The pass before
counted the keys per chunk, so every program knows where its candidates go: no
atomics and no overflow.

Segment maxima (segment_maxima by op, from segment_maxima_rows rows): the first pass also
stores the largest key of each SEG entries of a row; the compaction lists the segments whose
largest key reaches the range's start and copies from those alone (not top-p's first attempt,
which weighs every key), and the write reads only the segments reaching the pivot, writing
zeros for the rest without reading them.
Every knob below lives in the frozen RenormTuning (impl/kernels/renorm/tuning.py; DEFAULT_TUNING
is the H200 tuning); tests and benchmarks pass their own with ``tuning=``.
  >= finish_min_rows rows: compact_attempts attempts (1 from one_attempt_rows), after the first pass and after each
    full 4-way pass that follows (those skip compacted rows), into candidate_capacity slots
    (below large_batch_rows, top-p's first compaction, which reads every key, splits the rows that
    did not fit 4 ways itself, so its second attempt follows it without a pass);
    then one program per row runs the remaining passes in an in-kernel loop (no
    partials, tickets or launches; below finish_first_split rows the first moves nothing) until
    at most finish_sort candidates remain, sorts them and reads the pivot off, and sums top-k's
    kept mass. A row that never fit finishes from its
    full row: slower, still exact. From large_batch_rows rows (by op) the (chunk, row) grid is finer,
    the first pass runs large_batch_first_pass programs and the compaction one-warp programs (no
    bar.sync in its block loop), of large_batch_compact and from huge_batch_rows of huge_batch_compact.
  smaller batches: one attempt after the first pass, into a whole-row scratch (any
    row fits; the range shrinks to the keys copied), then small_batch_passes 16-way
    passes over (chunk, row) programs; then the keys still in range are gathered
    and the row's last program sorts them (at most sort_capacity; else it runs range
    passes over them) and reads the pivot off, as the sort-based definition does.
    Top-k's gather also sums its kept mass (each program its share's keys above the
    range). Batch 1 is bound by launch latency (~4-8 us a launch), so this plan cuts
    launches: 6 instead of 11-12. Top-p takes it below 32 rows; top-k never does by default
    (its finish path needs 4 launches: first pass, compaction, finish, write).

Costs that shaped this (a full-row pass, a histogram, a [BLOCK, NB] tile, the compaction's
barriers) and every measurement: impl/bench/renorm_pass_probe.py and docs/performance.md.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from impl.kernels._backend import cdiv, next_pow2
from impl.kernels.renorm import kernels as rk
from impl.kernels.renorm import probe as rprobe
from impl.kernels.renorm.tuning import WRITE_PRELOAD_MAX, RenormTuning


@dataclass(frozen=True)
class _Launch:
    kernel: object  # a jitted kernel of renorm_kernels
    grid: tuple[int, ...]
    args: str  # which argument list: "first", "pass", "gather", "compact", "finish"
    sizes: tuple[int, ...]
    meta: dict  # constexpr and launch keywords


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: a workspace cache key
class _Plan:
    launches: tuple[_Launch, ...]
    cap: int  # candidate slots per row
    chunks: int
    cand_rows: int  # 0: no candidate scratch
    gathers: bool
    write: _Launch
    tuning: RenormTuning
    top_p: bool
    # specialization key -> the compiled kernels of launches + write (after the first call that key made)
    compiled: dict = field(default_factory=dict, init=False, repr=False)


def _steps(bs: int, top_p: bool, t: RenormTuning) -> list[tuple[str, int]]:
    """Launch steps after the first pass: ("pass", NB), ("skip-compacted pass", NB),
    ("compact", 0), ("finish", NB), ("gather", NB) (top-k's gather also sums the kept mass)."""
    if bs >= t.finish_min_rows[top_p]:
        steps = [("compact", 0)]
        for attempt in range(2, t.attempts(bs, top_p) + 1):
            split_by_compaction = attempt == 2 and _first_compaction_splits(bs, top_p, t)
            steps += [("compact", 0)] if split_by_compaction else [("skip-compacted pass", 4), ("compact", 0)]
        return steps + [("finish", t.finish_split[top_p])]
    return [("compact", 0)] + [("pass", t.wide_split)] * t.small_batch_passes + [("gather", t.wide_split)]


def _first_compaction_splits(bs: int, top_p: bool, t: RenormTuning) -> bool:
    """Whether top-p's first compaction, which reads every key for the exact masses, also splits the rows
    that did not fit 4 ways (the pass a second attempt needs), instead of a pass launch doing it. Not in
    the one-warp compaction of large batches: there the split's small steps cost more than the launch
    (renorm v21, docs/performance.md)."""
    return (top_p and bs >= t.finish_min_rows[top_p] and t.attempts(bs, top_p) > 1
            and bs < t.large_batch_rows[top_p])


def _probe_regions(bs: int, chunks: int, top_p: bool, t: RenormTuning) -> int:
    """The rows of the finish's layout (one a chunk) when top-p's probe replaces the first pass, else 0: from
    large_batch_rows rows (where a pass precedes the second attempt), with at least 32 slots a row a step."""
    if not (top_p and t.probe_range[1] and bs >= t.large_batch_rows[1] and bs >= t.finish_min_rows[1]):
        return 0
    regions = next_pow2(chunks)
    return regions if t.finish[1][0] // regions >= 32 else 0


def _seg_map(bs: int, top_p: bool, t: RenormTuning) -> bool:
    """Whether the first pass stores the segment maxima (and the compaction and the write read them)."""
    return t.segment_maxima[top_p] and bs >= t.segment_maxima_rows


def _grouped(bs: int, top_p: bool, t: RenormTuning) -> bool:
    """Whether top-p's first pass adds each thread's groups of rk.GROUP entries before its accumulators
    (first_pass_group_sums; not with the segment maxima, whose tiles are segments)."""
    return top_p and t.first_pass_group_sums and not _seg_map(bs, top_p, t)


def _split(bs: int, vocab: int, t: RenormTuning, top_p: bool, most_chunks: int | None = None) -> tuple[int, int]:
    """(chunk length, chunks): enough (chunk, row) programs to fill the GPU, at most most_chunks, and
    chunks the first pass covers in at most first_pass_steps_max steps (its per-lane counters) and
    FIELD_SUM_MAX entries, padding included (its 16-bit sums of them)."""
    steps = cdiv(vocab, t.chunk_align)
    large = bs >= t.large_batch_rows[top_p]
    programs = t.large_batch_programs if large else t.target_programs[bs >= t.target_programs_rows]
    first_block = (t.large_batch_first_pass[top_p] if large else t.first_pass)[0]
    chunks = max(1, min(steps, cdiv(programs, bs), most_chunks or steps),
                 cdiv(steps, rk.first_pass_steps_max(top_p, _grouped(bs, top_p, t)) * first_block // t.chunk_align),
                 cdiv(steps, (int(rk.FIELD_SUM_MAX) + 1 - first_block) // t.chunk_align))
    chunk_len = t.chunk_align * cdiv(steps, chunks)
    return chunk_len, cdiv(vocab, chunk_len)


@functools.lru_cache(maxsize=256)
def _plan(bs: int, vocab: int, top_p: bool, param_is_tensor: bool, t: RenormTuning,
          dependent_launch_ok: bool = False, ptx_ok: bool = False) -> _Plan:
    """Every launch of one call, worked out once per shape (eager calls pay only the launches).
    dependent_launch_ok: the device takes programmatic dependent launches (then the tuning decides);
    ptx_ok: the kernels compile for CUDA, so their scattered stores may be inline PTX (t.ptx_stores)."""
    chunk_len, chunks = _split(bs, vocab, t, top_p)
    regions = _probe_regions(bs, chunks, top_p, t)
    steps = [("probe", 0) if regions else ("first pass", 4)] + _steps(bs, top_p, t)
    # Small batches compact once, so their scratch holds a whole row (a few MiB at most): every
    # row fits. Large batches cap it and retry as the range narrows.
    small = bs < t.finish_min_rows[top_p]
    cap = vocab if small else min(t.candidate_capacity, vocab)
    grid, sizes, chunks_p2 = (chunks, bs), (vocab, chunk_len, chunks, cap), next_pow2(chunks)
    # Small batches switch to a narrower grid after their compaction (full rows that did not fit
    # are still covered: any chunk length x chunks spanning the vocab will do).
    small_len, small_chunks = _split(bs, vocab, t, top_p,
                                     min(t.small_batch_chunks[top_p], cdiv(t.small_batch_programs, bs)))
    pdl = dependent_launch_ok and bs < t.dependent_launch_rows[top_p]
    launch_kw = dict(PDL=pdl, launch_pdl=True) if pdl else dict(PDL=False)  # every kernel's last constexpr
    param = dict(TOP_P=top_p, PARAM_IS_TENSOR=param_is_tensor, **launch_kw)
    ptx = ptx_ok and t.ptx_stores  # the kernels that scatter (gather, compact, finish): kernels.py, _scatter
    seg_map = _seg_map(bs, top_p, t)
    ticket, attempt, launches = int(rk.FIRST_TICKET), 0, []
    reversed_launches = t.reversed_launches[top_p]
    for kind, nb in steps:
        if kind in ("pass", "gather"):  # small-batch steps after the compaction
            grid, sizes, chunks_p2 = (small_chunks, bs), (vocab, small_len, small_chunks, cap), next_pow2(small_chunks)
        common = dict(TICKET=ticket, CHUNKS_P2=chunks_p2)
        if kind == "probe":
            meta = dict(PARAM_IS_TENSOR=param_is_tensor, **launch_kw, TICKET=ticket, CHUNKS_P2=chunks_p2,
                        SAMPLE=min(t.probe_sample, next_pow2(chunk_len)), BUDGET=t.probe_budget, TRIM=t.probe_trim,
                        num_warps=8)
            launches.append(_Launch(rprobe._probe_kernel, (bs,), "probe", sizes[:3], meta))
        elif kind == "first pass":
            block, warps = t.large_batch_first_pass[top_p] if bs >= t.large_batch_rows[top_p] else t.first_pass
            meta = dict(**param, **common, SEG_MAP=seg_map, BLOCK=block, PREFETCH=t.prefetch_first_pass[top_p],
                        REVERSED="first pass" in reversed_launches, ONE_REDUCTION=t.first_pass_one_reduction[top_p],
                        SAT_CLAMPS=ptx_ok and t.sat_clamps and top_p, GROUPED=_grouped(bs, top_p, t),
                        num_warps=warps)
            launches.append(_Launch(rk._first_pass_kernel, grid, "first", sizes[:3], meta))
        elif kind in ("pass", "skip-compacted pass"):
            block, warps = t.narrow_pass if nb == 4 else t.wide_pass[top_p]
            meta = dict(**param, **common, SKIP_COMPACTED=kind == "skip-compacted pass", NB=nb, BLOCK=block,
                        num_warps=warps)
            launches.append(_Launch(rk._pass_kernel, grid, "pass", sizes, meta))
        elif kind == "gather":  # the passes' BLOCK (its nb is theirs): the same shares of the candidates
            meta = dict(**param, **common, NB=nb, SORT_CAP=t.sort_capacity,
                        SHORT_SORT=min(t.short_sort, t.sort_capacity),
                        BLOCK=(t.narrow_pass if nb == 4 else t.wide_pass[top_p])[0], PTX_STORES=ptx,
                        num_warps=t.gather_warps)
            launches.append(_Launch(rk._gather_finish_kernel, grid, "gather", sizes, meta))
        elif kind == "compact":
            attempt += 1
            block, warps = t.compact[top_p]
            max_registers = 0
            if bs >= t.large_batch_rows[top_p]:
                huge = bs >= t.huge_batch_rows[top_p]
                block, warps = (t.huge_batch_compact if huge else t.large_batch_compact)[top_p]
                max_registers = 0 if huge else t.large_batch_compact_registers[top_p]
            masses = top_p and attempt == 1
            # The last attempt narrows the rows that still do not fit; top-p's first (compact_attempts 1) on a
            # ticket of its own, after the one on which its masses are reduced (not after the probe, whose misses
            # the passes that follow take).
            narrow = not small and attempt == t.attempts(bs, top_p) and not (masses and regions)
            narrow_ticket = ticket + 1 if masses and narrow else ticket
            split_unfit = masses and _first_compaction_splits(bs, top_p, t)
            meta = dict(**param, **common, ATTEMPT=attempt, ADAPT=small, MASSES=masses, SEG_MAP=seg_map,
                        NARROW=narrow, LANES=32 * warps, BLOCK=block, PREFETCH=t.prefetch_compact[top_p],
                        REVERSED="compact" in reversed_launches, SPLIT_UNFIT=split_unfit, PTX_STORES=ptx,
                        STEP_SUMS=t.compact_step_sums[warps > 1] if masses else 0,
                        REGIONS=regions if attempt == 1 else 0, TRIM=bool(regions) and attempt == 1 and t.probe_trim,
                        LAYOUT_BLOCK=t.finish[top_p][0],
                        SPLIT_ENTRIES=t.unfit_split_entries[bs >= t.target_programs_rows],
                        NARROW_TICKET=narrow_ticket, num_warps=warps)
            if ptx_ok and max_registers:  # CUDA: a register cap (a compile option)
                meta["maxnreg"] = max_registers
            launches.append(_Launch(rk._compact_kernel, grid, "compact", sizes, meta))
            ticket = narrow_ticket  # and one more below
        else:  # "finish"
            block, warps = t.finish[top_p]
            rows = regions or (warps if t.finish_warp_rows[top_p] else 1)
            launches.append(_Launch(rk._finish_kernel, (bs,), "finish", (vocab, cap, chunks),
                                    dict(**param, NB=nb, SORT_CAP=t.finish_sort[top_p], BLOCK=block,
                                         PREFETCH=t.prefetch_finish[top_p], ROW_BLOCK=t.finish_row_block,
                                         FIRST_SPLIT=not regions and bs < t.finish_first_split[top_p],
                                         PTX_STORES=ptx, ROWS=rows, REGIONS=bool(regions), num_warps=warps)))
        ticket += kind != "finish"
    block, warps = t.write
    preload = next_pow2(cdiv(chunk_len, block))
    if not (t.write_preload[top_p] and not seg_map and bs < t.dependent_launch_rows[top_p]
            and preload * block <= WRITE_PRELOAD_MAX):
        preload = 0
    write = _Launch(rk._write_kernel, (chunks, bs), "write", (vocab, chunk_len),
                    dict(TOP_P=top_p, **launch_kw, SEG_MAP=seg_map, BLOCK=block, PREFETCH=t.prefetch_write[top_p],
                         PRELOAD=preload,
                         REVERSED="write" in reversed_launches, EVICT_FIRST=t.write_evict_first[top_p],
                         num_warps=warps))
    compacts = any(kind == "compact" for kind, _ in steps)
    return _Plan(tuple(launches), cap, chunks, bs if compacts else 0, any(k == "gather" for k, _ in steps), write, t,
                 top_p)


def _plan_for(bs: int, vocab: int, top_p: bool, param_is_tensor: bool, t: RenormTuning,
              dependent_launch_ok: bool = False, ptx_ok: bool = False) -> _Plan:
    """``_plan``, looked up by the tuning's identity first (hashing a RenormTuning costs microseconds)."""
    key = (bs, vocab, top_p, param_is_tensor, id(t), dependent_launch_ok, ptx_ok)
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not t:
        if len(_PLANS) >= 256:
            _PLANS.clear()
        hit = _PLANS[key] = (t, _plan(bs, vocab, top_p, param_is_tensor, t, dependent_launch_ok, ptx_ok))
    return hit[1]


_PLANS: dict[tuple, tuple[RenormTuning, _Plan]] = {}
