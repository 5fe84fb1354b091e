"""How the renorm kernels launch: the frozen RenormTuning and DEFAULT_TUNING (the H200 tuning).

Every knob of the range select lives here (what each one steers: impl/kernels/renorm/plan.py;
the measurements behind the defaults: docs/performance.md). Tests and benchmarks pass their own
with ``tuning=``; a tuning never changes a result. Imports only the kernels' constants
(impl/kernels/renorm/kernels.py): never the plan, the workspace or the API.
"""
from __future__ import annotations

from dataclasses import dataclass

from impl.kernels.renorm import kernels as rk

_Shape = tuple[int, int]  # (BLOCK, warps)
# The fields that are a (top-k, top-p) pair of bools, or one bool for both ops.
_BOOLS_BY_OP = ("segment_maxima", "prefetch_first_pass", "prefetch_compact", "prefetch_write", "prefetch_finish",
                "write_evict_first", "write_preload", "first_pass_one_reduction", "finish_warp_rows", "probe_range")
REVERSIBLE_LAUNCHES = ("first pass", "compact", "write")  # the (chunk, row) launches that read whole rows
WRITE_PRELOAD_MAX = 8192  # entries a preloading write program holds (32 a thread in 8 warps)


@dataclass(frozen=True)
class RenormTuning:
    """How the renorm select is launched (the defaults: H200 sweeps, docs/performance.md).

    Pairs indexed by op are (top-k, top-p). Launch shapes are (BLOCK, warps). Bad settings
    raise ValueError naming the field when the object is built.
    """

    # Batches of at least this many rows (by op; one int sets both) try compaction compact_attempts
    # times (candidate_capacity values per row) and finish in one program per row; smaller batches
    # compact once, into a scratch that holds a whole row, and run the remaining passes over
    # (chunk, row) programs (launch latency, not bandwidth, bounds them). A huge value forces the
    # small-batch path. Top-k finishes at every batch (4 launches instead of 7, faster even at batch 1);
    # top-p's small-batch path wins at 8 and 16 rows (8: 52.4 against 61.6 us, 16: 60.5 against 68.9,
    # H200, renorm v12), ties at 32 (79.2 / 77.5) and loses at 64 (126.0 / 109.9) (docs/performance.md,
    # "Why the tuning defaults").
    finish_min_rows: int | tuple[int, int] = (1, 32)
    candidate_capacity: int = 32768
    # After the first pass and after each full pass that follows, by op (one int sets both): 2 beat 3
    # (docs/performance.md). Top-k's candidates (the pivot's octaves) fit at once on probability
    # rows; a flatter row that does not fit finishes from its full row (slower, still exact).
    # Below large_batch_rows, top-p's first compaction splits the rows that did not fit itself, so its
    # second attempt has no pass before it (renorm v21). Top-p at 1: its first compaction, which weighs every
    # key, also narrows the rows that do not fit, and the pass and second compaction go (6.9 us at 256 rows on
    # the bench's rows, renorm v28's profile). Below one_attempt_rows top-p keeps 2: under triton 3.6 the
    # narrowing takes the compaction from 96 to 109 registers (docs/performance.md, "Top-p's first
    # compaction, offline").
    compact_attempts: int | tuple[int, int] = (1, 2)
    # From this many rows (by op; one int sets both; 1 << 30: no batch), compaction is tried once whatever
    # compact_attempts says, so top-p's first compaction narrows the rows that do not fit (the attempts
    # above, at 1). A by-rows choice, since the narrowing's registers may pay where the second attempt's two
    # launches cost most (256 rows) and lose where the four-warp compaction takes them (64 rows: 89 -> 118
    # registers offline). Top-p from 128 rows (renorm v29, with the grouped first pass and the 88-register cap
    # below; H100, one process, 3 rounds): 128 rows 140.9 / 142.4 -> 130.6 / 132.2 us, 256 rows 251.3 / 253.5
    # -> 241.4 / 243.6; from 64 rows it lost 1.1 / 3.6 us at 64 (docs/performance.md, "Renorm v29").
    one_attempt_rows: int | tuple[int, int] = (1 << 30, 128)
    # Small batches: this many 16-way passes over the candidates, then the keys still in range are
    # gathered and sorted if at most sort_capacity (a power of two; short_sort slots first when they
    # fit: sorting 1024 keys costs several us more), else one program runs range passes over them.
    # 2 passes are ~4 us faster on typical rows, but near-uniform rows then loop.
    small_batch_passes: int = 3
    sort_capacity: int = 1024
    short_sort: int = 256
    # Sub-ranges per pass after the first: the small-batch passes (tl.histogram counts, top-p's
    # fp64 tile) and the finish kernel's, by op (top-p's 1-D accumulators need 4).
    wide_split: int = 16
    finish_split: tuple[int, int] = (16, 4)
    # chunk_align <= 15 x its BLOCK (top-k's 4-bit counters per lane). (512, 4) against (1024, 8) (renorm
    # v20): top-p at 64 rows 96.9 / 97.9 -> 90.4 / 93.4 us, 8-32 rows 2.4-3.7 us faster for both ops.
    first_pass: _Shape = (512, 4)
    # 4-way passes, 1-D accumulators: from 128 rows top-p's skip-compacted pass. (256, 2) against (1024, 8) (renorm
    # v27): the pass that finds every row compacted 6.8 -> 3.2 us at 256 rows (74 registers, 12 programs an SM, 2.59
    # waves instead of 10.34); flat rows that do split, top-p at 128 / 256 rows, softmax1 25-27 us and softmax0.1
    # 27-28 us faster; the bench's rows 1.5-2.5 us (docs/performance.md).
    narrow_pass: _Shape = (256, 2)
    wide_pass: tuple[_Shape, _Shape] = ((512, 4), (256, 4))
    # By op (one shape sets both): top-p's compaction weighs every key; 4 warps beat 8 at 64 rows
    # (H200 sweep, docs/performance.md).
    compact: _Shape | tuple[_Shape, _Shape] = ((1024, 8), (1024, 4))
    # By op (one shape sets both): top-p keeps 1024 x 8, which its mid-size batches prefer
    # (docs/performance.md).
    finish: _Shape | tuple[_Shape, _Shape] = ((512, 4), (1024, 8))
    # The finish kernel sorts a row's candidates once at most this many remain in range (by op; a
    # power of two, or 0: range passes to the end). tl.sort costs ~2 us for 256 keys, ~5 for 1024.
    finish_sort: tuple[int, int] = (256, 256)
    gather_warps: int = 4  # the gather kernel's BLOCK is the wide passes'
    write: _Shape = (1024, 8)
    # By op (one bool sets both), from segment_maxima_rows rows: the first pass stores each 32-entry
    # segment's largest key and the compaction (keys >= lo) and the write (keys >= pivot) read only
    # the segments at or above their threshold. Top-k gains from 32 rows (256 rows, k = 50: 188 -> 123
    # us); below, its latency costs more than the bytes it saves (top-k 16 rows: 34.4 -> 36.4 us,
    # batch 1: +1.2); top-p's first compaction weighs every key and its write keeps most segments,
    # so the map only costs it (docs/performance.md).
    segment_maxima: bool | tuple[bool, bool] = (True, False)
    segment_maxima_rows: int = 32
    # By op (one bool sets both): each step of the first pass / of the compaction issues the next
    # block's load before its own arithmetic (with the map: the next listed segments', their numbers
    # two steps ahead) (docs/performance.md, renorm v12 and v13). Top-p's compaction, which weighs
    # every key in one-warp programs at 256 rows, gains (256 rows: 267.2 -> 261.8 us). Top-p's first pass
    # did not move in v12's sweep; on v22's shapes and launches it gains (renorm v23, one process against v22,
    # p = 0.9 / 0.95: 32 and 64 rows 0.7-0.8 us, 128 rows 139.4 / 141.0 -> 137.1 / 138.8, 256 rows 247.8 / 248.4
    # -> 244.2 / 244.8; 1 and 8 rows level). Top-k's first pass did not move (docs/performance.md).
    prefetch_first_pass: bool | tuple[bool, bool] = (False, True)
    prefetch_compact: bool | tuple[bool, bool] = (True, True)
    # By op: the write loads a block's data a step ahead and, with the map, its map words two steps
    # ahead (renorm v14: top-k's write at 256 rows, k = 1000, 48.4-49.6 -> 45.3-46.4 us, profiled in turn; top-p level).
    prefetch_write: bool | tuple[bool, bool] = (True, True)
    # By op: the finish kernel's passes over a row's candidates load a block a step ahead. Top-p's
    # finish at 64 rows 30.7 / 32.8 -> 27.8 / 29.6 us, at 128 rows 32.8 / 35.2 -> 28.6 / 30.4 (p = 0.9
    # / 0.95, profiler, medians of 5 turns); top-k's 0.1-0.8 us faster (renorm v16, docs/performance.md).
    prefetch_finish: bool | tuple[bool, bool] = (True, True)
    # By op: the finish's passes over a row's candidates keep them as one row a warp and move each key
    # within its warp's row (kernels.py, _moving_pass: a scan within the warp, no barrier a step, where
    # the block-wide scan paid five), then put the survivors back in order once. Needs that op's
    # finish_split to be 4 (the 1-D accumulators); top-k's is 16 (renorm v28, docs/performance.md).
    finish_warp_rows: bool | tuple[bool, bool] = (False, True)
    # By op (top-p only): from large_batch_rows rows, a probe reading probe_sample entries of each chunk (lines
    # of 32 spread over it) guesses the pivot's range in place of the first pass (impl/kernels/renorm/probe.py);
    # the first compaction checks the guess with its exact masses and copies each program's candidates (from
    # blocks dealt in turn, not one contiguous chunk) into a row of the finish's row layout (one row a
    # program: the chunks' count rounded up to a power of two, at most finish BLOCK / 32 of them). A row the
    # guess misses takes the passes after it. Off: on the H200 one missed row in 256 costs about 130 µs and at
    # 128 rows the probe loses even when it misses none (docs/performance.md, "Top-p's probe").
    probe_range: bool | tuple[bool, bool] = (False, False)
    probe_sample: int = 512
    probe_budget: int = 256  # estimated candidates a row may take when a lower start allows it (probe.py)
    # The probe's range also ends where it guesses the pivot's end when more than probe_budget keys (estimated)
    # lie past it; the compaction checks that end with one more exact sum (probe.py TRIM).
    probe_trim: bool = True
    # By op: batches below this many rows take a finish whose first pass over a row's candidates moves
    # nothing (renorm v19: every candidate is in range, so a first moving pass moved them all); 0:
    # never. Top-p at 32 / 64 rows 71.3 / 98.9 -> 65.4 / 92.9 us (p = 0.9); at 256 rows, two finish
    # programs an SM, 259.3 -> 263.3, hence top-p's bound; top-k within 0.6 us, never slower.
    finish_first_split: tuple[int, int] = (1 << 30, 256)
    # Launches whose (chunk, row) programs walk the grid last to first, by op (one tuple sets both):
    # names from REVERSIBLE_LAUNCHES. Programs start in about program-id order, so a launch walking
    # opposite to the full-row launch before it begins on the rows that launch left in the L2. Top-p's
    # compaction (it reads every entry after the first pass did): 128 rows 149.4 / 151.2 -> 146.2 /
    # 148.1 us, 256 rows 251.9 / 254.7 -> 250.1 / 252.5 (renorm v20); top-k's compaction and any write
    # or first pass moved nothing beyond noise.
    reversed_launches: tuple[str, ...] | tuple[tuple[str, ...], tuple[str, ...]] = ((), ("compact",))
    # By op (one bool sets both): the write's stores are marked first to leave the L2, so the rows it
    # has yet to read stay. Top-k (the kept segments, read after their map words) at 256 rows, k = 50:
    # 119.9 -> 115.4 us; top-p (every entry, read in order) level (renorm v20).
    write_evict_first: bool | tuple[bool, bool] = (True, False)
    # Below this many rows (by op; one int sets both; 0: never), on a GPU that has it (CUDA, sm90+; never
    # HIP or the interpreter), every launch of a call is a programmatic dependent launch: it may start
    # while the one before it in the stream runs, its programs waiting at their top until that one has
    # finished (kernels.py, _after_the_launch_before), so the launch gap and the last wave's idle SMs go.
    # Against v21 (one process): 1 to 64 rows 0.3-2.1 us faster for both ops except top-p at 8 rows (0.2 / 0.7
    # slower); in a sweep from 128 rows top-p level or up to 1.7 slower, top-k level at 256 (renorm v22,
    # docs/performance.md).
    dependent_launch_rows: int | tuple[int, int] = (256, 128)
    # By op (one bool sets both): below dependent_launch_rows, a write without the segment maxima whose chunk
    # spans at most WRITE_PRELOAD_MAX entries loads the whole chunk before it waits for the launch before
    # (kernels.py, _write_kernel's PRELOAD), so with dependent launches its reads overlap the finish. Top-p at
    # 64 rows 88.3 / 90.0 -> 86.8 / 88.7 us and 89.0 / 90.9 -> 85.7 / 88.7 in two sweeps; 1 to 32 rows level
    # (renorm v22). Top-k's write reads through the map from 32 rows; below, level.
    write_preload: bool | tuple[bool, bool] = (False, True)
    # On CUDA (never HIP or the interpreter), the stores that place candidates at computed slots (compaction,
    # finish, gather) are inline PTX kept in the layout of their operands, where tl.store would move values,
    # addresses and mask to one a thread through shared memory each step (kernels.py, _scatter). Renorm v24
    # (one process against v23): top-p at 64 rows 81.4 / 83.1 -> 74.4 / 75.7 us, 256 rows 243.8 / 244.3 ->
    # 232.4 / 233.3, 32 rows 56.0 / 57.6 -> 51.0 / 52.1; top-k k = 1000 at 256 rows 137.0 -> 133.3, 32 rows
    # 33.6 / 38.8 -> 30.9 / 35.1; no cell slower (docs/performance.md).
    ptx_stores: bool = True
    # On CUDA (never HIP or the interpreter), top-p's first pass clamps each entry at its bucket starts as
    # saturating multiplies (inline PTX mul.sat: start * sat(x / start), the same value bit for bit) on the FP32
    # pipe, instead of mins on the integer pipe, which the pass kept busiest (kernels.py, _clamped;
    # docs/performance.md, renorm v26).
    sat_clamps: bool = True
    # Top-p's first pass without the segment maxima adds each thread's groups of 4 adjacent entries (one 16-byte
    # load) before its fp32 sums and counters, which then take a quarter of the registers (kernels.py,
    # _first_stats' GROUPED; a field counts 4 keys a step, so a chunk takes at most 63 steps). Offline (triton
    # 3.6, sm_90, 256 rows): (256, 2) 64 -> 47 registers, 16 -> 21 programs an SM, the same 125 instructions a
    # 4-entry step; (512, 2) 118 -> 48 registers and 31.6 -> 29.1 instructions an entry, 8 entries a thread in
    # flight at 21 programs an SM. Timed (renorm v29, H100): alone 0.7 us faster at 64 rows, level at 256; with
    # large_batch_first_pass (512, 2) 3.0-3.1 us faster at 128 rows beside one_attempt_rows (docs/performance.md,
    # "Top-p's grouped first pass", "Renorm v29").
    first_pass_group_sums: bool = True
    # By op (one bool sets both): the first pass adds its lanes' bucket counts and (top-p) sums across the
    # program in one tuple reduction instead of one reduction each (kernels.py, _first_stats' ONE_REDUCTION).
    # sm_90 offline: 45 -> 18 barriers a program for top-p, 29 -> 20 for top-k, the same registers. Against
    # v25 in one process (renorm v26): top-p 0.3-0.8 us faster from 1 to 64 rows (64 rows 73.3 / 74.3 -> 72.5
    # / 73.6), level at 128 and 256; top-k 0.4-0.5 us slower at 64 and 256 rows, so top-k keeps its reductions.
    first_pass_one_reduction: bool | tuple[bool, bool] = (False, True)
    # Registers decide how many programs an SM holds at once, so how many waves a (chunk, row) grid takes
    # (sm_90: 65,536 registers an SM, at most 32 programs). The three knobs below steer the compaction's
    # (renorm v25, one process against v24, H200, triton 3.6; docs/performance.md).
    # By op (one int sets both; 0: the compiler's choice): on CUDA (never HIP or the interpreter), the most
    # registers a thread of the one-warp compaction of large batches (large_batch_compact, below
    # huge_batch_rows) may hold (Triton's maxnreg). Top-k at 64 rows: 67 -> 64, 32 programs an SM, the
    # 4096-program grid in one wave: compaction 13.2 -> 10.7 us, calls 44.6 / 48.6 -> 42.4 / 47.3. Top-p's
    # (512, 1) spills under 64 (128 rows 134 -> 144 us), and top-k's huge (256, 1) spills too (0 there). Top-p's
    # one-attempt compaction (one_attempt_rows) at 88: 109 -> 88 registers, 18 -> 23 programs an SM, no spill in
    # the loop (renorm v29).
    large_batch_compact_registers: int | tuple[int, int] = (64, 88)
    # How top-p's first compaction sums the exact fp64 masses below the range and of the rest of the row,
    # (in one-warp programs, in programs of several warps): 0, an accumulator a loaded entry, reduced at
    # the end (four registers a thread for each of its entries); 1, each step's sums in the reduction that
    # counts its candidates; 2, in a reduction of their own after the copy. One-warp programs (from 128
    # rows) 148 -> 114 registers with 1: 128 rows 133.2 / 134.2 -> 129.2 / 130.3 us, 256 rows 232.0 /
    # 232.8 -> 226.9 / 227.6. In four-warp programs each step's reduction crosses warps (a barrier on
    # the step's path): at 64 rows 2 lost 3.3 us and 1 lost 1.5, though both fit more programs an SM.
    compact_step_sums: tuple[int, int] = (1, 0)
    # A pair by rows, like target_programs: entries a thread a step of top-p's first compaction when it
    # splits the rows that did not fit (SPLIT_UNFIT), the kernel's largest register need. 2 at 64 rows:
    # 114 -> 89 registers, 4 -> 5 programs an SM (1024 programs: 1.55 waves instead of 2), 74.4 / 75.4 ->
    # 73.3 / 74.4 us; flat rows that do split (softmax1) level, 111.0 / 115.9 -> 111.4 / 116.5. At 32 rows
    # (512 programs, one wave either way) 2 lost 1.7 us.
    unfit_split_entries: tuple[int, int] = (4, 2)
    # The finish kernel's whole-row reads (one program a row: copying the keys of a row the compaction
    # narrowed, the kept mass of a row never compacted) step this many entries at a time: latency,
    # not bandwidth, bounds them (docs/performance.md, "Rows unlike the bench's").
    finish_row_block: int = 2048
    # (chunk, row) programs to aim for; chunks are whole multiples of chunk_align columns.
    chunk_align: int = 1024
    # A pair by rows, not by op (one int sets both): below target_programs_rows rows, then from it (up to
    # large_batch_rows). 1024 against 1280 at 64 rows (renorm v15: top-p 107.2 / 109.1 -> 101.5 / 103.7
    # us); 512 below 64 rows (renorm v20, first pass (512, 4): 8 and 16 rows 3.8-4.8 us faster for both
    # ops, 32 rows 1.5 (top-k k = 50) and 3.0 (top-p); 512 at 64 rows lost 5.4 on top-p)
    # (docs/performance.md).
    target_programs: int | tuple[int, int] = (512, 1024)
    target_programs_rows: int = 64
    # From large_batch_rows rows (by op; one int sets both): large_batch_programs (chunk, row) programs,
    # and the compaction in programs of large_batch_compact (one warp: no bar.sync in its loop; it
    # needs many programs). Top-k gains from 64 rows (76 -> 70 us at 64 rows, k = 50), top-p loses
    # there (114 -> 132, v10; level in the v15 sweep) and gains from 128 rows (v15, one process against
    # v14: 174.1 / 169.1 -> 157.9 / 160.1 us at 128 rows; docs/performance.md).
    large_batch_rows: int | tuple[int, int] = (64, 128)
    large_batch_programs: int = 4096
    large_batch_compact: _Shape | tuple[_Shape, _Shape] = ((128, 1), (512, 1))  # by op, like finish
    # and from huge_batch_rows rows (by op) in programs of huge_batch_compact: top-k's 128-entry steps
    # beat 256 at 64 and 128 rows (k = 1000: 56.9 against 59.7 us, 91.0 against 93.7) and lose at 256
    # (161.9 against 149.8); top-p keeps its large compaction, which takes the register cap, up to 511 rows
    # (renorm v29)
    huge_batch_rows: int | tuple[int, int] = (256, 512)
    huge_batch_compact: _Shape | tuple[_Shape, _Shape] = ((256, 1), (512, 1))
    # and the first pass in programs of this shape (by op): 512 entries a step beat 1024 at 64 and 256
    # rows for both ops; top-k's 2 warps beat 4; top-p's (256, 2) beat (512, 4) at 128 rows once its
    # first pass clamped instead of selecting (renorm v20: 146.8 / 148.3 -> 142.8 / 143.3 us, level at
    # 256) (H200 sweeps, docs/performance.md); with the grouped first pass (48 registers at (512, 2)) top-p takes
    # 512 entries a step again (renorm v29)
    large_batch_first_pass: _Shape | tuple[_Shape, _Shape] = ((512, 2), (512, 2))
    # Small batches read the candidates on this many programs per row after the compaction: top-k's
    # histogram passes are latency-bound (fewer partials to reduce), top-p's fp64 tiles
    # compute-bound (spread them). H200 sweep, batch 1.
    small_batch_chunks: tuple[int, int] = (16, 128)
    small_batch_programs: int = 256  # and at most this many programs in all (64 rows: 4 chunks each)
    # Eager calls on a GPU: once one call's (probs, parameter, output) addresses and scalar parameter
    # have come this many times on one stream, the call's launches are captured into a CUDA graph
    # (the stream's cached workspace, no allocation) and later calls with those addresses replay it:
    # one graph launch instead of 4-7 kernel launches of host time. 0: never. At most
    # eager_graphs_kept graphs per workspace; a workspace whose graphs keep missing stops capturing.
    eager_graph_after: int = 2
    eager_graphs_kept: int = 4

    def attempts(self, rows: int, top_p: bool) -> int:
        """Compaction attempts a batch of ``rows`` rows makes (finish path): 1 from one_attempt_rows, else
        compact_attempts."""
        return 1 if rows >= self.one_attempt_rows[top_p] else self.compact_attempts[top_p]

    def __post_init__(self) -> None:
        for name in ("finish_min_rows", "compact_attempts", "large_batch_rows", "huge_batch_rows",
                     "target_programs", "dependent_launch_rows", "large_batch_compact_registers",
                     "one_attempt_rows"):  # one int: both
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, (value, value))
        for name in _BOOLS_BY_OP:  # one bool sets both ops
            if isinstance(getattr(self, name), bool):
                object.__setattr__(self, name, (getattr(self, name), getattr(self, name)))
        launches = self.reversed_launches
        if isinstance(launches, tuple) and all(isinstance(name, str) for name in launches):  # both ops
            object.__setattr__(self, "reversed_launches", (launches, launches))
        for name in ("finish", "compact", "large_batch_compact", "huge_batch_compact",
                     "large_batch_first_pass"):  # one shape sets both ops
            value = getattr(self, name)
            if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, int) for v in value):
                object.__setattr__(self, name, (value, value))
        def refuse(name: str, why: str) -> None:
            raise ValueError(f"RenormTuning.{name} {why}, got {getattr(self, name)!r}")

        def pow2(v: int) -> bool:
            return isinstance(v, int) and v >= 1 and not v & (v - 1)

        for name in ("eager_graph_after", "eager_graphs_kept"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                refuse(name, "must be an int >= 0")
        for name in ("candidate_capacity", "chunk_align", "small_batch_programs", "large_batch_programs",
                     "segment_maxima_rows", "target_programs_rows"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                refuse(name, "must be an int >= 1")
        if not (isinstance(self.finish_first_split, tuple) and len(self.finish_first_split) == 2
                and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in self.finish_first_split)):
            refuse("finish_first_split", "must be a (top-k, top-p) pair of row counts >= 0")
        if not (isinstance(self.reversed_launches, tuple) and len(self.reversed_launches) == 2
                and all(isinstance(names, tuple) and all(name in REVERSIBLE_LAUNCHES for name in names)
                        for names in self.reversed_launches)):
            refuse("reversed_launches", f"must be a tuple of names from {REVERSIBLE_LAUNCHES} or a (top-k, top-p) "
                   "pair of them")
        for name in ("finish_min_rows", "compact_attempts", "large_batch_rows", "huge_batch_rows", "one_attempt_rows"):
            pair = getattr(self, name)
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(r, int) and r >= 1 for r in pair)):
                refuse(name, "must be an int >= 1 or a (top-k, top-p) pair of them")
        pair = self.dependent_launch_rows
        if not (isinstance(pair, tuple) and len(pair) == 2
                and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in pair)):
            refuse("dependent_launch_rows", "must be an int >= 0 or a (top-k, top-p) pair of them")
        pair = self.target_programs
        if not (isinstance(pair, tuple) and len(pair) == 2
                and all(isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in pair)):
            refuse("target_programs", "must be an int >= 1 or a (below target_programs_rows, from it) pair of them")
        if not isinstance(self.small_batch_passes, int) or self.small_batch_passes < 1:
            refuse("small_batch_passes", "must be >= 1 (the gather places its keys by the last pass's counts)")
        if not pow2(self.finish_row_block) or self.finish_row_block > 1 << 14:
            refuse("finish_row_block", "must be a power of two <= 16384 (one int32 reduction counts two things)")
        for name in ("sort_capacity", "short_sort"):  # tl.sort sizes
            if not pow2(getattr(self, name)):
                refuse(name, "must be a power of two")
        if not (isinstance(self.finish_sort, tuple) and len(self.finish_sort) == 2
                and all(v == 0 or pow2(v) for v in self.finish_sort)):
            refuse("finish_sort", "must be a (top-k, top-p) pair of powers of two or 0")
        if not pow2(self.wide_split) or not 2 <= self.wide_split <= int(rk.NB_MAX):
            refuse("wide_split", f"must be a power of two in [2, {int(rk.NB_MAX)}]")
        if any(not pow2(nb) or not 2 <= nb <= int(rk.NB_MAX) for nb in self.finish_split):
            refuse("finish_split", f"must hold powers of two in [2, {int(rk.NB_MAX)}]")
        if 2 * max(self.compact_attempts) + 1 > rk.MAX_LAUNCHES or self.small_batch_passes + 4 > rk.MAX_LAUNCHES:
            refuse("compact_attempts", f"leaves more reducing launches than the {rk.MAX_LAUNCHES} ticket words")
        for name in ("finish", "compact", "large_batch_compact", "huge_batch_compact", "large_batch_first_pass"):
            value = getattr(self, name)
            if not (isinstance(value, tuple) and len(value) == 2
                    and all(isinstance(v, tuple) and len(v) == 2 for v in value)):
                refuse(name, "must be a (BLOCK, warps) shape or a (top-k, top-p) pair of them")
        named_shapes = [("first_pass", [self.first_pass]), ("large_batch_first_pass", self.large_batch_first_pass),
                        ("narrow_pass", [self.narrow_pass]), ("wide_pass", self.wide_pass),
                        ("compact", self.compact), ("large_batch_compact", self.large_batch_compact),
                        ("huge_batch_compact", self.huge_batch_compact), ("finish", self.finish),
                        ("write", [self.write])]
        for name, shapes in named_shapes:
            if any(not pow2(block) or not pow2(warps) for block, warps in shapes):
                refuse(name, "must be (power-of-two BLOCK, power-of-two warps) launch shapes")
        if not pow2(self.gather_warps):
            refuse("gather_warps", "must be a power of two")
        lengths = [("chunk_align", self.chunk_align), ("first_pass", self.first_pass[0]), ("write", self.write[0]),
                   *(("large_batch_first_pass", b) for b, _ in self.large_batch_first_pass),
                   *(("compact", b) for b, _ in self.compact),
                   *(("large_batch_compact", b) for b, _ in self.large_batch_compact),
                   *(("huge_batch_compact", b) for b, _ in self.huge_batch_compact)]
        for name, length in lengths:  # the segment maxima
            if length % int(rk.SEG):
                refuse(name, f"must span whole {int(rk.SEG)}-entry segments (its BLOCK or length a multiple of "
                       f"{int(rk.SEG)})")
        for name in _BOOLS_BY_OP:
            pair = getattr(self, name)
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(v, bool) for v in pair)):
                refuse(name, "must be a bool or a (top-k, top-p) pair of them")
        if any(rows and nb != 4 for rows, nb in zip(self.finish_warp_rows, self.finish_split)):
            refuse("finish_warp_rows", f"needs that op's finish_split to be 4 (finish_split is {self.finish_split})")
        if self.probe_range[0]:
            refuse("probe_range", "is top-p's alone (a (False, bool) pair, or False)")
        if self.probe_range[1] and (self.finish_split[1] != 4 or self.compact_attempts[1] < 2
                                    or self.one_attempt_rows[1] < 1 << 30):
            refuse("probe_range", "needs top-p's finish_split 4 (its row layout), compact_attempts >= 2 and no "
                   "one_attempt_rows (a row the probe misses takes a pass and a second attempt); finish_split is "
                   f"{self.finish_split}, compact_attempts {self.compact_attempts}, one_attempt_rows "
                   f"{self.one_attempt_rows}")
        if not pow2(self.probe_sample) or self.probe_sample < 32:
            refuse("probe_sample", "must be a power of two >= 32")
        if not isinstance(self.probe_budget, int) or isinstance(self.probe_budget, bool) or self.probe_budget < 0:
            refuse("probe_budget", "must be an int >= 0")
        if not isinstance(self.probe_trim, bool):
            refuse("probe_trim", "must be a bool")
        if not isinstance(self.ptx_stores, bool):
            refuse("ptx_stores", "must be a bool")
        if not isinstance(self.sat_clamps, bool):
            refuse("sat_clamps", "must be a bool")
        if not isinstance(self.first_pass_group_sums, bool):
            refuse("first_pass_group_sums", "must be a bool")
        pair = self.large_batch_compact_registers
        if not (isinstance(pair, tuple) and len(pair) == 2
                and all(isinstance(r, int) and not isinstance(r, bool) and (r == 0 or 32 <= r <= 255) for r in pair)):
            refuse("large_batch_compact_registers", "must be 0 or an int in [32, 255], or a (top-k, top-p) pair of "
                   "them")
        if not (isinstance(self.unfit_split_entries, tuple) and len(self.unfit_split_entries) == 2
                and all(pow2(e) and e <= 16 for e in self.unfit_split_entries)):
            refuse("unfit_split_entries", "must be a (below target_programs_rows, from it) pair of powers of two <= 16")
        if not (isinstance(self.compact_step_sums, tuple) and len(self.compact_step_sums) == 2
                and all(m in (0, 1, 2) and not isinstance(m, bool) for m in self.compact_step_sums)):
            refuse("compact_step_sums", "must be a (one-warp, several-warp) pair of modes 0, 1 or 2")
        steps_max = min(rk.first_pass_steps_max(False),
                        rk.first_pass_steps_max(True, self.first_pass_group_sums))  # either op's shape
        for name, block in (("first_pass", self.first_pass[0]),
                            *(("large_batch_first_pass", b) for b, _ in self.large_batch_first_pass)):
            if self.chunk_align + block > int(rk.FIELD_SUM_MAX) + 1:
                refuse("chunk_align", f"plus the {name} BLOCK must be at most {int(rk.FIELD_SUM_MAX) + 1} (its "
                       "16-bit sums of a chunk's bucket counts)")
            if self.chunk_align > steps_max * block:
                refuse(name, f"BLOCK must be >= chunk_align / {steps_max} (its per-lane counters)")
        for name, block in (*(("compact", b) for b, _ in self.compact),
                            *(("large_batch_compact", b) for b, _ in self.large_batch_compact),
                            *(("huge_batch_compact", b) for b, _ in self.huge_batch_compact)):
            if block > 1 << 14:
                refuse(name, "BLOCK must be <= 16384 (one int32 reduction counts two things, 16 bits apart)")


DEFAULT_TUNING = RenormTuning()
