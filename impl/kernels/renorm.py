"""Top-k / top-p renormalisation of probability rows (docs/design.md §3.9, graph safe).

Pivot semantics: a row keeps every entry ``>= pivot`` (ties at the pivot all
survive), then is divided by its kept mass (zero mass -> zeros, never NaN).
NaN, +-inf and negative entries weigh 0 and are never kept (output 0); a row with no positive
finite mass returns zeros; a NaN in a tensor ``p`` means 1 (keep every positive entry). p means
the fp32 value nearest to it, whether a float, an fp32 or an fp64 tensor (docs/design.md §3.9).
  top-k: pivot = the k-th largest entry, k clamped to [1, V].
  top-p: drop the smallest entries whose cumulative mass is < (1 - p) * row mass,
         p clamped to [0, 1]; for a row summing to 1 this is docs/design.md's "< 1 - p".
         p = 1 is a no-op, p = 0 keeps the largest entries (and their ties).
         At an exact boundary (the dropped mass would reach the target exactly) the pivot
         entry survives: one level more than FlashInfer's kernel keeps (minimal nucleus).

The Triton path finds the pivot without sorting the row, by a range select over keys:
non-negative fp32 values order like their int32 bit patterns. Each row carries a
key range [lo, hi) known to hold the pivot; a pass splits it into sub-ranges,
counts (top-k) or weighs in fp64 (top-p) the row's keys in each, and keeps the one
holding the pivot. The first pass splits at 8 fixed buckets two octaves wide ([0, 2^-24),
[2^-24, 2^-22), ..., [2^-14, 2^-12), [2^-12, the row's largest key]), where probability rows
keep their pivots: each lane counts its keys per bucket in one int64 (a byte a bucket), top-p
weighs the buckets in fp32 and keeps every bucket the pivot may be in given a rigorous bound
on the rounding; the exact fp64 masses (below the range, the row's total) come from the
compaction, which reads the row anyway. Later passes split evenly. Nothing syncs with the
host and the launch count is fixed (CUDA-graph safe). Kernels: renorm_kernels.py.

Candidate compaction: a row whose current range holds few enough keys copies them
into a per-row scratch, and its later passes read only those. The pass before
counted the keys per chunk, so every program knows where its candidates go: no
atomics and no overflow.
Every knob below lives in the frozen RenormTuning (DEFAULT_TUNING is the H200 tuning); tests
and benchmarks pass their own with ``tuning=``.
  >= finish_min_rows rows: compact_attempts attempts, after the first pass and after each
    full 4-way pass that follows (those skip compacted rows), into candidate_capacity slots;
    then one program per row runs the remaining passes in an in-kernel loop (no
    partials, tickets or launches) until at most finish_sort candidates remain, sorts them and
    reads the pivot off, and sums top-k's kept mass. A row that never fit finishes from its
    full row: slower, still exact. From large_batch_rows rows the (chunk, row) grid is finer
    and the compaction runs one-warp programs (no bar.sync in its loop).
  smaller batches: one attempt after the first pass, into a whole-row scratch (any
    row fits; the range shrinks to the keys copied), then small_batch_passes 16-way
    passes over (chunk, row) programs; then the keys still in range are gathered
    and the row's last program sorts them (at most sort_capacity; else it runs range
    passes over them) and reads the pivot off, as the sort-based definition does.
    Top-k's gather also sums its kept mass (each program its share's keys above the
    range). Batch 1 is bound by launch latency (~4-8 us a launch), so this plan cuts
    launches: 6 instead of 11-12. Top-p takes it below 8 rows; top-k never does by default
    (its finish path needs 4 launches: first pass, compaction, finish, write).

Costs that shaped this (a full-row pass, a histogram, a [BLOCK, NB] tile, the compaction's
barriers) and every measurement: impl/bench/renorm_pass_probe.py and docs/performance.md.

Eager calls (the ones engines make, outside their graphs) are host-bound at small batches, so
their host path is short. A call like an earlier one (the same Gates object, checks off, compiled
Triton; same shapes, parameter kind, specialization, stream and tuning) takes the fast path
(_fast_call): the checks every call needs, one index lookup for its workspace, the output's
allocation and one graph replay; anything else takes the full path, which raises the errors and
fills the index. The full path: one active_gates() lookup, attribute checks (the message-building
checks run only on a mismatch), the plan by the tuning's identity, and a workspace cached per
(plan, specialization, device, stream) whose kernels are bound once to it and launched through
the compiled kernels' C launchers (impl/kernels/_backend.py bound_launcher): no allocation but
the output, no state fill (each call's first pass rewrites the state words a call reads, and each
reducing launch resets its ticket), no per-launch argument binding. Once a call's (probs, parameter,
output) addresses repeat on a stream (RenormTuning.eager_graph_after), its launches are captured
into a CUDA graph over that stream's workspace and later such calls replay it: one graph launch
instead of 4-7 kernel launches (a few graphs per workspace; a workspace whose addresses keep
changing stops capturing). A call takes its workspace
out of the cache while it launches (another thread on the same stream makes its own); a call
inside CUDA-graph capture allocates its own buffers (the graph's pool), so replays never share
one with eager calls. The interpreter and launch hooks (profilers) take ``kernel[grid](...)``.
"""
from __future__ import annotations

import contextlib
import functools
import numbers
import struct
import threading
from dataclasses import dataclass, field

import torch

from impl.gates import active_gates
from impl.kernels import renorm_kernels as rk
from impl.kernels._backend import INTERPRETED, bound_launcher, cdiv, direct_launch_ready, launch_mode, next_pow2
from impl.validation import INDEX_DTYPES, check_tensor

_Shape = tuple[int, int]  # (BLOCK, warps)


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
    # small-batch path. H200, 2026-12-01 (v5): at 64 rows top-p's small-batch path took 258 us against
    # the finish path's 165; v7 (finer first pass, the finish sorts): top-k at 64 rows 77-81 us on the
    # finish path against 92 on the small-batch path; v7b: top-k at batch 1 on the finish path 17.6 / 21.0 us
    # (k = 50 / 1000, CUDA graph) against 27.8 / 28.4 on the small-batch path, in 4 launches instead of 7, so
    # top-k always finishes (docs/performance.md).
    finish_min_rows: int | tuple[int, int] = (1, 8)
    candidate_capacity: int = 32768
    # After the first pass and after each full pass that follows, by op (one int sets both): 2 beat 3
    # by 2-4% at 64 and 256 rows. Top-k's candidates (the pivot's octaves) fit at once on probability
    # rows; a flatter row that does not fit finishes from its full row (slower, still exact).
    compact_attempts: int | tuple[int, int] = (1, 2)
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
    first_pass: _Shape = (1024, 8)  # chunk_align <= 255 x its BLOCK (byte counters per lane)
    narrow_pass: _Shape = (1024, 8)  # 4-way passes, 1-D accumulators
    wide_pass: tuple[_Shape, _Shape] = ((512, 4), (256, 4))
    compact: _Shape = (1024, 8)
    # By op (one shape sets both): 512 x 4 was 2% faster at 256 rows for both, 1% slower for top-p
    # at 64 rows (top-p finishes from 8 rows, top-k from 128).
    finish: _Shape | tuple[_Shape, _Shape] = ((512, 4), (1024, 8))
    # The finish kernel sorts a row's candidates once at most this many remain in range (by op; a
    # power of two, or 0: range passes to the end). tl.sort costs ~2 us for 256 keys, ~5 for 1024.
    finish_sort: tuple[int, int] = (256, 256)
    gather_warps: int = 4  # the gather kernel's BLOCK is the wide passes'
    write: _Shape = (1024, 8)
    # (chunk, row) programs to aim for; chunks are whole multiples of chunk_align columns.
    chunk_align: int = 1024
    target_programs: int = 1280
    # From large_batch_rows rows: large_batch_programs (chunk, row) programs, and the compaction in
    # programs of large_batch_compact (one warp: no bar.sync in its loop; it needs many programs).
    # H200, v7: at 256 rows 237 -> 188 us (top-k, k = 50), 327 -> 296 (top-p, p = 0.9); at 64 rows
    # 4096 one-warp programs cost 7-17 us (so smaller batches keep the shapes above).
    large_batch_rows: int = 256
    large_batch_programs: int = 4096
    large_batch_compact: _Shape = (512, 1)
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

    def __post_init__(self) -> None:
        for name in ("finish_min_rows", "compact_attempts"):  # one int sets both ops
            value = getattr(self, name)
            if isinstance(value, int) and not isinstance(value, bool):
                object.__setattr__(self, name, (value, value))
        if isinstance(self.finish, tuple) and len(self.finish) == 2 and all(isinstance(v, int) for v in self.finish):
            object.__setattr__(self, "finish", (self.finish, self.finish))  # one shape sets both ops
        def refuse(name: str, why: str) -> None:
            raise ValueError(f"RenormTuning.{name} {why}, got {getattr(self, name)!r}")

        def pow2(v: int) -> bool:
            return isinstance(v, int) and v >= 1 and not v & (v - 1)

        for name in ("eager_graph_after", "eager_graphs_kept"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                refuse(name, "must be an int >= 0")
        for name in ("candidate_capacity", "chunk_align", "target_programs", "small_batch_programs",
                     "large_batch_rows", "large_batch_programs"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                refuse(name, "must be an int >= 1")
        for name in ("finish_min_rows", "compact_attempts"):
            pair = getattr(self, name)
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(r, int) and r >= 1 for r in pair)):
                refuse(name, "must be an int >= 1 or a (top-k, top-p) pair of them")
        if not isinstance(self.small_batch_passes, int) or self.small_batch_passes < 1:
            refuse("small_batch_passes", "must be >= 1 (the gather places its keys by the last pass's counts)")
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
        if not (isinstance(self.finish, tuple) and len(self.finish) == 2
                and all(isinstance(v, tuple) and len(v) == 2 for v in self.finish)):
            refuse("finish", "must be a (BLOCK, warps) shape or a (top-k, top-p) pair of them")
        shapes = [self.first_pass, self.narrow_pass, *self.wide_pass, self.compact, self.large_batch_compact,
                  *self.finish, self.write]
        if any(not pow2(block) or not pow2(warps) for block, warps in shapes) or not pow2(self.gather_warps):
            refuse("narrow_pass", "and every launch shape must be (power-of-two BLOCK, power-of-two warps)")
        if self.chunk_align > int(rk.FIELD_MAX) * self.first_pass[0]:
            refuse("first_pass", f"BLOCK must be >= chunk_align / {int(rk.FIELD_MAX)} (its per-lane byte counters)")
        for name in ("compact", "large_batch_compact"):
            if getattr(self, name)[0] > 1 << 14:
                refuse(name, "BLOCK must be <= 16384 (one int32 reduction counts two things, 16 bits apart)")


DEFAULT_TUNING = RenormTuning()


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
        for _ in range(t.compact_attempts[top_p] - 1):
            steps += [("skip-compacted pass", 4), ("compact", 0)]
        return steps + [("finish", t.finish_split[top_p])]
    return [("compact", 0)] + [("pass", t.wide_split)] * t.small_batch_passes + [("gather", t.wide_split)]


def _split(bs: int, vocab: int, t: RenormTuning, most_chunks: int | None = None) -> tuple[int, int]:
    """(chunk length, chunks): enough (chunk, row) programs to fill the GPU, at most most_chunks, and
    chunks the first pass covers in at most FIELD_MAX steps (its per-lane byte counters)."""
    steps = cdiv(vocab, t.chunk_align)
    programs = t.large_batch_programs if bs >= t.large_batch_rows else t.target_programs
    chunks = max(1, min(steps, cdiv(programs, bs), most_chunks or steps),
                 cdiv(steps, int(rk.FIELD_MAX) * t.first_pass[0] // t.chunk_align))
    chunk_len = t.chunk_align * cdiv(steps, chunks)
    return chunk_len, cdiv(vocab, chunk_len)


@functools.lru_cache(maxsize=256)
def _plan(bs: int, vocab: int, top_p: bool, param_is_tensor: bool, t: RenormTuning) -> _Plan:
    """Every launch of one call, worked out once per shape (eager calls pay only the launches)."""
    chunk_len, chunks = _split(bs, vocab, t)
    steps = [("first pass", 4)] + _steps(bs, top_p, t)
    # Small batches compact once, so their scratch holds a whole row (a few MiB at most): every
    # row fits. Large batches cap it and retry as the range narrows.
    small = bs < t.finish_min_rows[top_p]
    cap = vocab if small else min(t.candidate_capacity, vocab)
    grid, sizes, chunks_p2 = (chunks, bs), (vocab, chunk_len, chunks, cap), next_pow2(chunks)
    # Small batches switch to a narrower grid after their compaction (full rows that did not fit
    # are still covered: any chunk length x chunks spanning the vocab will do).
    small_len, small_chunks = _split(bs, vocab, t, min(t.small_batch_chunks[top_p], cdiv(t.small_batch_programs, bs)))
    param = dict(TOP_P=top_p, PARAM_IS_TENSOR=param_is_tensor)
    ticket, attempt, launches = int(rk.FIRST_TICKET), 0, []
    for kind, nb in steps:
        if kind in ("pass", "gather"):  # small-batch steps after the compaction
            grid, sizes, chunks_p2 = (small_chunks, bs), (vocab, small_len, small_chunks, cap), next_pow2(small_chunks)
        common = dict(TICKET=ticket, CHUNKS_P2=chunks_p2)
        if kind == "first pass":
            block, warps = t.first_pass
            meta = dict(**param, **common, BLOCK=block, num_warps=warps)
            launches.append(_Launch(rk._first_pass_kernel, grid, "first", sizes[:3], meta))
        elif kind in ("pass", "skip-compacted pass"):
            block, warps = t.narrow_pass if nb == 4 else t.wide_pass[top_p]
            meta = dict(**param, **common, SKIP_COMPACTED=kind == "skip-compacted pass", NB=nb, BLOCK=block,
                        num_warps=warps)
            launches.append(_Launch(rk._pass_kernel, grid, "pass", sizes, meta))
        elif kind == "gather":  # the passes' BLOCK: the same shares of the candidates
            meta = dict(**param, **common, NB=nb, SORT_CAP=t.sort_capacity,
                        SHORT_SORT=min(t.short_sort, t.sort_capacity),
                        BLOCK=t.wide_pass[top_p][0], num_warps=t.gather_warps)
            launches.append(_Launch(rk._gather_finish_kernel, grid, "gather", sizes, meta))
        elif kind == "compact":
            attempt += 1
            block, warps = t.large_batch_compact if bs >= t.large_batch_rows else t.compact
            meta = dict(**param, **common, ATTEMPT=attempt, ADAPT=small, MASSES=top_p and attempt == 1, BLOCK=block,
                        num_warps=warps)
            launches.append(_Launch(rk._compact_kernel, grid, "compact", sizes, meta))
        else:  # "finish"
            block, warps = t.finish[top_p]
            launches.append(_Launch(rk._finish_kernel, (bs,), "finish", (vocab, cap),
                                    dict(**param, NB=nb, SORT_CAP=t.finish_sort[top_p], BLOCK=block, num_warps=warps)))
        ticket += kind != "finish"
    block, warps = t.write
    write = _Launch(rk._write_kernel, (chunks, bs), "write", (vocab, chunk_len), dict(TOP_P=top_p, BLOCK=block,
                                                                                       num_warps=warps))
    compacts = any(kind == "compact" for kind, _ in steps)
    return _Plan(tuple(launches), cap, chunks, bs if compacts else 0, any(k == "gather" for k, _ in steps), write, t,
                 top_p)


def _clean(probs: torch.Tensor) -> torch.Tensor:
    """NaN, +-inf and negative entries weigh 0 (the kernels' _load_keys)."""
    return torch.where((probs > 0) & (probs < _INF), probs, torch.zeros_like(probs))


def _renormalise_torch(probs: torch.Tensor, pivot: torch.Tensor) -> torch.Tensor:
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs)).double()
    mass = kept.sum(-1, keepdim=True)
    scale = torch.where(mass > 0, 1.0 / torch.where(mass > 0, mass, torch.ones_like(mass)), torch.zeros_like(mass))
    return (kept * scale).float()


def _top_k_torch(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    probs = _clean(probs)
    desc = probs.sort(dim=-1, descending=True).values
    k_idx = (k.to(torch.int64).clamp(1, probs.shape[1]) - 1)[:, None]
    return _renormalise_torch(probs, desc.gather(1, k_idx))


def _top_p_torch(probs: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    probs = _clean(probs)
    asc = probs.sort(dim=-1).values
    cum = asc.double().cumsum(-1)
    p = p.float().double().nan_to_num(nan=1.0).clamp(0.0, 1.0)  # p's fp32 value; a NaN p keeps every positive entry
    # The total is the cumsum's last entry, so p = 0 keeps exactly the largest entries.
    target = (1.0 - p)[:, None] * cum[:, -1:]
    dropped = (cum < target).sum(-1, keepdim=True)  # how many of the smallest go
    pivot = asc.gather(1, dropped.clamp(max=probs.shape[1] - 1))
    pivot = torch.where(dropped < probs.shape[1], pivot, torch.full_like(pivot, float("inf")))
    return _renormalise_torch(probs, pivot)


def _param_tensor(name, value, bs, dtypes, kind, probs: torch.Tensor, checks: bool) -> torch.Tensor | None:
    """``value`` as a per-row tensor (None for a scalar), checked; it must be on ``probs``' device
    (compared through the tensors: cheaper than building torch.device objects)."""
    if isinstance(value, torch.Tensor):
        if (value.dtype not in dtypes or value.dim() != 1 or value.shape[0] != bs or not value.is_contiguous()
                or value.is_cuda != probs.is_cuda or value.get_device() != probs.get_device() or value.is_meta):
            check_tensor(name, value, dtype=dtypes, shape=(bs,))  # raises the message naming the argument
            if value.device != probs.device:
                raise ValueError(f"{name} must be on device {probs.device} (probs' device), got {value.device}")
        if name == "p" and checks and value.numel() and bool(value.isnan().any()):
            raise ValueError("p must not hold NaN (check mode; with checks off a NaN p keeps the whole row)")
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind[-1].__name__} or a tensor of shape [bs], got {type(value).__name__}")
    if value != value:
        raise ValueError(f"{name} must not be NaN")
    return None


def _check_probs(probs, checks: bool) -> None:
    if not (isinstance(probs, torch.Tensor) and probs.dtype is torch.float32 and probs.dim() == 2
            and probs.is_contiguous()):
        check_tensor("probs", probs, dtype=torch.float32, ndim=2)  # raises the message naming the argument
    if checks and probs.numel() and not bool(((probs >= 0) & (probs < _INF)).all()):
        found = [what for what, bad in (("NaN", probs.isnan()), ("+inf", probs == _INF), ("-inf", probs == -_INF),
                                        ("negative values", (probs < 0) & (probs > -_INF))) if bool(bad.any())]
        raise ValueError(f"probs must be finite and non-negative, found {', '.join(found)} (check mode; with checks "
                         "off NaN, +-inf and negative entries weigh 0)")


_INF = float("inf")


def _fp32(value: float) -> float:
    """The fp32 value nearest ``value`` (p's precision on every backend, docs/design.md §3.9)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _run(probs, param, param_t, *, top_p: bool, tuning: RenormTuning, mode: str) -> torch.Tensor:
    bs, vocab = probs.shape
    if bs == 0 or vocab == 0:
        return torch.zeros_like(probs)
    if mode == "torch":
        if param_t is None:
            param_t = torch.full((bs,), param, dtype=torch.float32 if top_p else torch.int64, device=probs.device)
        return _top_p_torch(probs, param_t) if top_p else _top_k_torch(probs, param_t)
    plan = _plan_for(bs, vocab, top_p, param_t is not None, tuning)
    out = torch.empty_like(probs)
    if probs.is_cuda and probs.get_device() != _CURRENT_DEVICE():  # Triton launches on the current device
        with torch.cuda.device(probs.device):
            _launch_all(probs, param, param_t, plan, out)
    else:
        _launch_all(probs, param, param_t, plan, out)
    return out


def _plan_for(bs: int, vocab: int, top_p: bool, param_is_tensor: bool, t: RenormTuning) -> _Plan:
    """``_plan``, looked up by the tuning's identity first (hashing a RenormTuning costs microseconds)."""
    key = (bs, vocab, top_p, param_is_tensor, id(t))
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not t:
        if len(_PLANS) >= 256:
            _PLANS.clear()
        hit = _PLANS[key] = (t, _plan(bs, vocab, top_p, param_is_tensor, t))
    return hit[1]


_PLANS: dict[tuple, tuple[RenormTuning, _Plan]] = {}


def _specialization(dev: int, probs, param, param_t) -> tuple:
    """What Triton specializes on that the plan does not fix: the device, the caller's pointers'
    16-byte alignment and dtype, an int k equal to 1 or divisible by 16 (p is never specialized)."""
    if param_t is not None:
        spec = (param_t.dtype, param_t.data_ptr() % 16 == 0)
    else:
        spec = (param == 1, param % 16 == 0) if isinstance(param, int) else ()
    return dev, probs.data_ptr() % 16 == 0, spec


_CURRENT_DEVICE = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda dev: torch.cuda.current_stream(dev).cuda_stream)
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing


class _Workspace:
    """One call's scratch (state, partials, candidates, gathered keys), reused by later calls of the
    same plan on the same device and stream; ``calls`` / ``write``: the plan's kernels bound to it."""

    __slots__ = ("plan", "state", "part", "cand", "gath", "nbytes", "calls", "write", "packed", "compiled", "graphs",
                 "seen", "captures", "hits")

    def __init__(self, plan: _Plan, bs: int, vocab: int, device) -> None:
        # The state is zeroed once: each call's first pass rewrites the words a call reads and every
        # reducing launch resets its ticket (renorm_kernels), so a reused workspace needs no fill.
        self.plan = plan
        self.state = torch.zeros((bs, int(rk.STATE_W)), dtype=torch.int64, device=device)
        self.part = torch.empty((bs, plan.chunks, int(rk.PART_W)), dtype=torch.float64, device=device)
        self.cand = torch.empty((plan.cand_rows, plan.cap) if plan.cand_rows else (1, 1), dtype=torch.float32,
                                device=device)
        self.gath = torch.empty((bs, vocab) if plan.gathers else (1, 1), dtype=torch.float32, device=device)
        self.nbytes = sum(t.numel() * t.element_size() for t in (self.state, self.part, self.cand, self.gath))
        self.calls = self.write = self.packed = self.compiled = None
        self.graphs: dict | None = {}  # (probs, param, scalar, out) -> CUDA graph of the call; None: off
        self.seen: dict = {}  # the same keys -> calls seen, before a capture
        self.captures = self.hits = 0

    def args(self, step: _Launch, ints: bool) -> tuple:
        """The arguments of ``step`` after (probs, param pointer, param scalar): tensors, or their
        addresses (bound launches)."""
        state, part, cand, gath = ((self.state.data_ptr(), self.part.data_ptr(), self.cand.data_ptr(),
                                    self.gath.data_ptr()) if ints else (self.state, self.part, self.cand, self.gath))
        fstate = state if ints else self.state.view(torch.float64)
        bufs = {"first": (part, state, fstate), "pass": (cand, part, state, fstate),
                "compact": (cand, part, state, fstate), "gather": (cand, gath, part, state, fstate),
                "finish": (cand, state, fstate), "write": (state, fstate)}[step.args]
        return (*bufs, *step.sizes)

    def bind(self, compiled: tuple, stream: int) -> None:
        """Bind every launch of the plan to this workspace, the compiled kernels and ``stream``."""
        self.compiled = compiled
        self.calls, self.write, self.packed = self.bound(stream)

    def bound(self, stream: int) -> tuple:
        """(select launches, write launch, packed) bound to ``stream``: each a (launch, rest)."""
        compiled, calls, packed = self.compiled, [], False
        for step, ck in zip((*self.plan.launches, self.plan.write), compiled, strict=True):
            launch, packed = bound_launcher(ck, step.grid, stream)
            rest = self.args(step, True)
            first = (2 if step.args == "write" else 3) + len(rest)  # the constexprs follow, by keyword
            calls.append((launch, (*rest, *(step.meta[name] for name in step.kernel.arg_names[first:]))))
        write = calls.pop()
        return tuple(calls), write, packed


# (plan, specialization, device index, stream) -> workspace; a plain dict used as an LRU (a hit is
# popped and re-inserted): at most WORKSPACE_ENTRIES entries and, beyond the newest, WORKSPACE_BYTES.
# A call pops its workspace while it launches, so a second thread on the same stream makes its own.
WORKSPACE_ENTRIES = 8
WORKSPACE_BYTES = 256 << 20
_WORKSPACES: dict[tuple, _Workspace] = {}
_INTERPRETER_LOCK = threading.Lock()  # Triton's interpreter patches its language module per launch


def _keep(key: tuple, ws: _Workspace) -> None:
    """Cache a new workspace, evicting the oldest beyond the bounds."""
    _WORKSPACES[key] = ws
    while len(_WORKSPACES) > 1 and (len(_WORKSPACES) > WORKSPACE_ENTRIES
                                    or sum(w.nbytes for w in _WORKSPACES.values()) > WORKSPACE_BYTES):
        _WORKSPACES.pop(next(iter(_WORKSPACES)), None)


def _launch_all(probs, param, param_t, plan: _Plan, out: torch.Tensor | None) -> _Workspace:
    """Launch the plan's select and (``out`` given) its write; returns the workspace holding the
    per-row state (pivot key in word LO, kept mass, COMPACTED: the attempt that took the row or 0)."""
    bs, vocab = probs.shape
    cuda = probs.is_cuda
    dev = probs.get_device() if cuda else -1
    spec = _specialization(dev, probs, param, param_t)
    if cuda and direct_launch_ready():
        stream = _RAW_STREAM(dev)
        if _capturing():  # a graph keeps its own buffers (its private pool): replays never share one
            ws = _Workspace(plan, bs, vocab, probs.device)
            return _ordinary(probs, param, param_t, plan, spec, ws, out, bind=stream, keep=None)
        key = (plan, spec, dev, stream)
        if out is not None:
            _note_fast(plan, bs, vocab, spec, stream, key)
        ws = _WORKSPACES.pop(key, None)
        if ws is None or ws.calls is None:
            ws = ws or _Workspace(plan, bs, vocab, probs.device)
            return _ordinary(probs, param, param_t, plan, spec, ws, out, bind=stream, keep=key)
        p_ptr = probs.data_ptr()
        param_ptr, param_scalar = (p_ptr, param) if param_t is None else (param_t.data_ptr(), 0)
        if out is None:
            _bound_launches(ws.calls, None, ws.packed, p_ptr, param_ptr, param_scalar, 0)
        elif ws.graphs is None:
            _bound_launches(ws.calls, ws.write, ws.packed, p_ptr, param_ptr, param_scalar, out.data_ptr())
        else:
            gkey = (p_ptr, param_ptr, param_scalar, out.data_ptr())
            graph = ws.graphs.get(gkey)
            if graph is not None:
                _REPLAY(graph)
                ws.hits += 1
            else:
                _eager_call(ws, gkey, dev)
        _WORKSPACES[key] = ws  # back, as the newest
        return ws
    key = (plan, spec, dev, None)
    ws = _WORKSPACES.pop(key, None) or _Workspace(plan, bs, vocab, probs.device)
    return _ordinary(probs, param, param_t, plan, spec, ws, out, bind=None, keep=key)


def _bound_launches(calls, write, packed: bool, p_ptr: int, param_ptr: int, param_scalar, out_ptr: int) -> None:
    if packed:
        for launch, rest in calls:
            launch((p_ptr, param_ptr, param_scalar, *rest))
        if write is not None:
            write[0]((p_ptr, out_ptr, *write[1]))
    else:
        for launch, rest in calls:
            launch(p_ptr, param_ptr, param_scalar, *rest)
        if write is not None:
            write[0](p_ptr, out_ptr, *write[1])


def _eager_call(ws: _Workspace, gkey: tuple, dev: int) -> None:
    """An eager call whose addresses have no graph yet: launch it, or (seen often enough) capture it
    into a CUDA graph on a side stream (nothing runs while capturing) and replay that."""
    t = ws.plan.tuning
    seen = ws.seen.get(gkey, 0) + 1
    if t.eager_graph_after == 0 or seen < t.eager_graph_after:
        if len(ws.seen) >= 4 * max(t.eager_graphs_kept, 1):
            ws.seen.clear()
        ws.seen[gkey] = seen
        _bound_launches(ws.calls, ws.write, ws.packed, *gkey)
        return
    ws.seen.pop(gkey, None)
    if ws.captures >= 4 * max(t.eager_graphs_kept, 1) and ws.hits < 4 * ws.captures:  # addresses keep changing
        ws.graphs = None
        _bound_launches(ws.calls, ws.write, ws.packed, *gkey)
        return
    side = _side_stream(dev)
    calls, write, packed = ws.bound(side.cuda_stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        graph.capture_begin(capture_error_mode="thread_local")
        try:
            _bound_launches(calls, write, packed, *gkey)
        finally:
            graph.capture_end()
    ws.captures += 1
    while len(ws.graphs) >= t.eager_graphs_kept:
        ws.graphs.pop(next(iter(ws.graphs)))
    if t.eager_graphs_kept:
        ws.graphs[gkey] = graph
    graph.replay()  # on the caller's stream


_SIDE_STREAMS: dict[int, torch.cuda.Stream] = {}


def _side_stream(dev: int):
    """A stream (per device) that eager-call graphs are captured on; nothing ever runs on it."""
    stream = _SIDE_STREAMS.get(dev)
    if stream is None:
        stream = _SIDE_STREAMS[dev] = torch.cuda.Stream(device=dev)
    return stream


def _ordinary(probs, param, param_t, plan, spec, ws: _Workspace, out, *, bind, keep) -> _Workspace:
    """Launch through ``kernel[grid](...)`` (compiling on first use; the interpreter's only path),
    note the compiled kernels per specialization, and bind the workspace to them (``bind``: the
    stream) for the next calls; ``keep``: the key the workspace is cached under (None: not kept)."""
    param_ptr, param_scalar = (probs, param) if param_t is None else (param_t, 0)
    lock = _INTERPRETER_LOCK if INTERPRETED else contextlib.nullcontext()
    compiled = []
    steps = (*plan.launches, plan.write) if out is not None else plan.launches
    for step in steps:
        head = (probs, out) if step.args == "write" else (probs, param_ptr, param_scalar)
        with lock:
            compiled.append(step.kernel[step.grid](*head, *ws.args(step, False), **step.meta))
    if bind is not None and out is not None and all(c is not None for c in compiled):
        plan.compiled.setdefault(spec, tuple(compiled))
    if bind is not None and spec in plan.compiled:
        ws.bind(plan.compiled[spec], bind)
    if keep is not None:
        _keep(keep, ws)
    return ws


# The eager fast path. A call like an earlier one (the same Gates object, under which that call ran
# compiled Triton with checks off; the same shapes, parameter kind and specialization, device, stream
# and tuning) checks what every call must (types, dtypes, shapes, contiguity, devices, no capture, no
# launch hooks, the current device) and finds its workspace through one index lookup: no gate
# resolution, plan lookup or argument messages. Anything else, or a miss, takes the full path,
# which raises the errors and fills the index.
_FAST_GATES: list = [None]  # the Gates object of the last call that ran compiled Triton with checks off
# (top_p, bs, vocab, specialization, stream, id(tuning)) -> (tuning, _WORKSPACES key)
_FAST_INDEX: dict[tuple, tuple] = {}
_P32: dict[float, float] = {}  # a float p -> the fp32 value of p clamped to [0, 1]
_TENSOR = torch.Tensor
_F32 = torch.float32
_REPLAY = getattr(getattr(torch._C, "_CUDAGraph", None), "replay", None) or torch.cuda.CUDAGraph.replay


def _note_fast(plan: _Plan, bs: int, vocab: int, spec: tuple, stream: int, key: tuple) -> None:
    """Index the workspace key of an eager call with an output (the fast path's lookup)."""
    if len(_FAST_INDEX) >= 256:
        _FAST_INDEX.clear()
    _FAST_INDEX[(plan.top_p, bs, vocab, spec, stream, id(plan.tuning))] = (plan.tuning, key)


def _fast_call(probs, param, top_p: bool, tuning) -> torch.Tensor | None:
    """The renormalised rows of an eager call an earlier call has prepared, else None (the caller
    takes the full path). The caller has checked that the gates are _FAST_GATES' (checks off)."""
    if type(probs) is not _TENSOR or probs.dtype is not _F32 or probs.dim() != 2 or not probs.is_contiguous():
        return None
    dev = probs.get_device()
    if dev < 0:
        return None
    bs, vocab = probs.shape
    p_ptr = probs.data_ptr()
    kind = type(param)
    if kind is _TENSOR:
        dtype = param.dtype
        if (dtype not in (_P_DTYPES if top_p else INDEX_DTYPES) or param.dim() != 1 or param.shape[0] != bs
                or not param.is_contiguous() or param.get_device() != dev):
            return None
        param_ptr, scalar = param.data_ptr(), 0
        spec = (dev, p_ptr % 16 == 0, (dtype, param_ptr % 16 == 0))
    elif top_p:
        if kind is not float:
            return None
        scalar = _P32.get(param)
        if scalar is None:
            if param != param:  # NaN: the full path raises
                return None
            if len(_P32) >= 256:
                _P32.clear()
            scalar = _P32[param] = _fp32(min(max(param, 0.0), 1.0))
        param_ptr, spec = p_ptr, (dev, p_ptr % 16 == 0, ())
    else:
        if kind is not int:
            return None
        scalar = 1 if param < 1 else vocab if param > vocab else param
        param_ptr, spec = p_ptr, (dev, p_ptr % 16 == 0, (scalar == 1, scalar % 16 == 0))
    if _CURRENT_DEVICE() != dev or _capturing() or not direct_launch_ready():
        return None
    t = DEFAULT_TUNING if tuning is None else tuning
    hit = _FAST_INDEX.get((top_p, bs, vocab, spec, _RAW_STREAM(dev), id(t)))
    if hit is None or hit[0] is not t:
        return None
    key = hit[1]
    ws = _WORKSPACES.pop(key, None)
    if ws is None or ws.calls is None:
        if ws is not None:
            _WORKSPACES[key] = ws
        return None
    out = torch.empty_like(probs)
    gkey = (p_ptr, param_ptr, scalar, out.data_ptr())
    graphs = ws.graphs
    if graphs is None:
        _bound_launches(ws.calls, ws.write, ws.packed, *gkey)
    else:
        graph = graphs.get(gkey)
        if graph is not None:
            _REPLAY(graph)
            ws.hits += 1
        else:
            _eager_call(ws, gkey, dev)
    _WORKSPACES[key] = ws  # back, as the newest
    return out


def _select(probs, param, param_t, plan: _Plan):
    """The select alone (no write): returns ``(state,)``, the per-row state words (tests read them)."""
    return (_launch_all(probs, param, param_t, plan, None).state,)


def top_k_renorm(probs, k, *, tuning: RenormTuning | None = None):
    """Keep each row's entries >= its k-th largest and renormalise them to sum to 1 (a new tensor).

    probs: float32, 2-D ``[rows, vocab]``, contiguous, on any device (CPU runs the interpreter or
        torch, docs/design.md §3.9). Rows need not sum to 1: the kept mass is renormalised.
    k: an int (numpy integers and a 0-d integer tensor too), or an int32 / int64 tensor of shape
        ``[rows]`` on probs' device (one k per row). k is clamped to ``[1, vocab]``.
    Ties: every entry equal to the k-th largest is kept, so a row may keep more than k entries.
    Bad values (docs/design.md §10.7): NaN, +-inf and negative entries weigh 0; with check mode on
        (``DSPARK_CHECK=on``) they raise ValueError instead. A row of zeros stays zeros.
    Never syncs with the device and is CUDA-graph safe. ``tuning``: how the kernels launch (None:
    the defaults); never changes the result. Reference: ``reference.top_k_renorm``."""
    gates = active_gates()
    if gates is _FAST_GATES[0]:
        out = _fast_call(probs, k, False, tuning)
        if out is not None:
            return out
    checks = gates.check_mode == "on"
    _check_probs(probs, checks)
    k = _plain_param(k, probs, integral=True)
    k_t = _param_tensor("k", k, probs.shape[0], INDEX_DTYPES, (int,), probs, checks)
    if k_t is None:
        k = min(max(k, 1), max(probs.shape[1], 1))  # host-side clamp keeps the scalar in range
    t = DEFAULT_TUNING if tuning is None else _tuning(tuning)
    mode = launch_mode(probs, k_t, gates=gates)
    if mode == "triton" and not checks and not INTERPRETED:
        _FAST_GATES[0] = gates
    return _run(probs, k, k_t, top_p=False, tuning=t, mode=mode)


def top_p_renorm(probs, p, *, tuning: RenormTuning | None = None):
    """Keep the largest entries of each row whose mass reaches p of the row's total, renormalise them
    to sum to 1 (a new tensor): the entries holding < (1 - p) of the mass are dropped.

    probs: float32, 2-D ``[rows, vocab]``, contiguous, on any device; rows need not sum to 1 (mass is
        measured against the row's own total, docs/design.md §11.1).
    p: a float (numpy floats and a 0-d float tensor too), or a float32 / float64 tensor of shape
        ``[rows]`` on probs' device. p means the fp32 value nearest to it, clamped to ``[0, 1]``;
        p = 0 keeps the largest entry (and its ties), p = 1 keeps every positive entry.
    Ties and the boundary: entries equal to the smallest kept value are all kept; where the
        cumulative mass reaches p exactly, that level is kept (docs/design.md §11.2).
    Bad values (docs/design.md §10.7): NaN, +-inf and negative entries weigh 0; with check mode on they
        raise ValueError, as does a NaN p (a NaN p with checks off keeps the whole row).
    Never syncs with the device and is CUDA-graph safe. ``tuning``: how the kernels launch (None:
    the defaults); never changes the result. Reference: ``reference.top_p_renorm``."""
    gates = active_gates()
    if gates is _FAST_GATES[0]:
        out = _fast_call(probs, p, True, tuning)
        if out is not None:
            return out
    checks = gates.check_mode == "on"
    _check_probs(probs, checks)
    p = _plain_param(p, probs, integral=False)
    p_t = _param_tensor("p", p, probs.shape[0], _P_DTYPES, (int, float), probs, checks)
    if p_t is None:
        p = _fp32(min(max(p, 0), 1))  # clamping first: rounding keeps 0 and 1 and is monotone
    t = DEFAULT_TUNING if tuning is None else _tuning(tuning)
    mode = launch_mode(probs, p_t, gates=gates)
    if mode == "triton" and not checks and not INTERPRETED:
        _FAST_GATES[0] = gates
    return _run(probs, p, p_t, top_p=True, tuning=t, mode=mode)


_P_DTYPES = (torch.float32, torch.float64)


def _plain_param(value, probs: torch.Tensor, *, integral: bool):
    """k / p as the rest of the call takes them: a numpy (or other ``numbers``) scalar becomes the
    Python number, a 0-d tensor one value per row on its own device (no read back: no sync)."""
    if type(value) is int or type(value) is float:
        return value
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and probs.dim() == 2:
            return value.reshape(1).expand(probs.shape[0]).contiguous()
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if not integral and isinstance(value, numbers.Real):
        return float(value)
    return value   # anything else: _param_tensor raises the TypeError naming the argument


def _tuning(tuning: object) -> RenormTuning:
    if tuning is None:
        return DEFAULT_TUNING
    if not isinstance(tuning, RenormTuning):
        raise TypeError(f"tuning must be a RenormTuning, got {type(tuning).__name__}")
    return tuning
