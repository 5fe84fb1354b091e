"""Top-k / top-p renormalisation of probability rows (SPEC §3.9, graph safe).

Pivot semantics: a row keeps every entry ``>= pivot`` (ties at the pivot all
survive), then is divided by its kept mass (zero mass -> zeros, never NaN).
  top-k: pivot = the k-th largest entry, k clamped to [1, V].
  top-p: drop the smallest entries whose cumulative mass is < (1 - p) * row mass,
         p clamped to [0, 1]; for a row summing to 1 this is SPEC's "< 1 - p".
         p = 1 is a no-op, p = 0 keeps the largest entries (and their ties).

The Triton path finds the pivot without sorting the row, by a range select over keys:
non-negative fp32 values order like their int32 bit patterns. Each row carries a
key range [lo, hi) known to hold the pivot; a pass splits it into sub-ranges,
counts (top-k) or weighs in fp64 (top-p) the row's keys in each, and keeps the one
holding the pivot. The first pass splits at fixed octaves (2^-24, 2^-16, 2^-8),
where probability rows keep their pivots, and ends the top range at the row's
largest key; later passes split evenly. Nothing syncs with the host and the launch
count is fixed (CUDA-graph safe). Kernels: renorm_kernels.py.

Candidate compaction: a row whose current range holds few enough keys copies them
into a per-row scratch, and its later passes read only those. The pass before
counted the keys per chunk, so every program knows where its candidates go: no
atomics and no overflow.
  >= FINISH_MIN_ROWS rows: attempts after the first pass and after each of two more
    full 4-way passes (which skip compacted rows), into CANDIDATE_CAPACITY slots;
    then one program per row runs every remaining pass in an in-kernel loop (no
    partials, tickets or launches) and sums top-k's kept mass. A row that never fit
    finishes from its full row: slower, still exact.
  smaller batches: one attempt after the first pass, into a whole-row scratch (any
    row fits; the range shrinks to the keys copied), then SMALL_BATCH_PASSES 16-way
    passes over (chunk, row) programs; then the keys still in range are gathered
    and the row's last program sorts them (at most SORT_CAPACITY; else it runs range
    passes over them) and reads the pivot off, as the sort-based definition does.
    Top-k then sums its kept mass in one more pass. Batch 1 is bound by launch
    latency (~4-8 us a launch), so this plan cuts launches: 6-7 instead of 11-12.

Costs that shaped this (H200, 256 x 129280, one full read ~45 us; see
impl/bench/renorm_pass_probe.py and notes/perf_log.md): a pass with four 1-D
accumulators costs ~60 us, a tl.histogram of 16 bins ~90 us, of 64 bins ~400 us,
a [BLOCK, NB] fp64 one-hot tile ~2x the 1-D accumulators; so full-row passes split
4 ways and the wider splits run on candidates. Measured: 292 / 399 us (top-k /
top-p), 10.2x / 8.8x a sort; batch 1 ~30 / ~33 us (notes/perf_log.md, v4).
"""
from __future__ import annotations

import torch

from impl.kernels import renorm_kernels as rk
from impl.kernels._backend import launch_mode, next_pow2, triton
from impl.validation import INDEX_DTYPES, check_mode_enabled, check_tensor

# Batches of at least this many rows try compaction three times (CANDIDATE_CAPACITY values per
# row) and finish in one program per row; smaller batches compact once, into a scratch that
# holds a whole row, and run the remaining passes over (chunk, row) programs (launch latency,
# not bandwidth, bounds them). Set it huge to test the small-batch path on any batch.
FINISH_MIN_ROWS = 8
CANDIDATE_CAPACITY = 32768
# Small batches: this many adaptive 16-way passes over the candidates, then the keys still in
# range are gathered and the pivot found by sorting them if at most SORT_CAPACITY (a power of
# two), else by one program's range passes over them.
# Small batches' compaction also shrinks the range to the keys it copied (near-uniform rows
# otherwise keep too many keys in range for the sort).
SMALL_BATCH_PASSES = 3  # 2 is ~4 us faster on typical rows, but near-uniform rows then loop
SORT_CAPACITY = 1024
SHORT_SORT = 256  # a short sort first when the keys fit: sorting 1024 keys costs several us more
COMPACT_ATTEMPTS = 3  # after the first pass and after each of the two full passes that follow
# Sub-ranges per pass after the first: small-batch passes (tl.histogram counts; top-p's fp64 tile)
# and the finish kernel's passes (top-p's 1-D accumulators need NB = 4).
WIDE_SPLIT = {False: 16, True: 16}
FINISH_SPLIT = {False: 16, True: 4}
# Launch shapes (tuned on the H200): (BLOCK, warps) per kernel kind, and how many
# (chunk, row) programs to aim for; chunks are whole multiples of CHUNK_ALIGN columns.
NARROW_PASS = (1024, 8)  # NB = 4, 1-D accumulators
WIDE_PASS = {False: (512, 4), True: (256, 4)}
COMPACT = (1024, 8)
FINISH = (1024, 8)
GATHER_WARPS = 4  # the gather kernel's warps (its BLOCK is the wide passes')
WRITE = (1024, 8)
CHUNK_ALIGN = 1024
TARGET_PROGRAMS = 1280
# Small batches: the passes after the compaction read the candidates on this many programs per
# row, by op {top_p: chunks}: top-k's histogram passes are latency-bound (fewer partials to
# reduce is faster), top-p's fp64 tiles are compute-bound (spread them). H200 sweep, batch 1.
SMALL_BATCH_CHUNKS = {False: 16, True: 128}


def _plan(bs: int, top_p: bool) -> list[tuple[str, int]]:
    """Launch steps after the first pass: ("pass", NB), ("skip-compacted pass", NB),
    ("compact", 0), ("finish", NB), ("gather", NB), ("kept", 0)."""
    if bs >= FINISH_MIN_ROWS:
        steps = [("compact", 0)]
        for _ in range(COMPACT_ATTEMPTS - 1):
            steps += [("skip-compacted pass", 4), ("compact", 0)]
        return steps + [("finish", FINISH_SPLIT[top_p])]
    if SMALL_BATCH_PASSES < 1:  # the gather places its keys by the last pass's per-chunk counts
        raise ValueError(f"SMALL_BATCH_PASSES must be >= 1, got {SMALL_BATCH_PASSES}")
    for name, size in (("SORT_CAPACITY", SORT_CAPACITY), ("SHORT_SORT", SHORT_SORT)):
        if size < 1 or size & (size - 1):  # tl.sort sizes
            raise ValueError(f"{name} must be a power of two, got {size}")
    nb = WIDE_SPLIT[top_p]
    steps = [("compact", 0)] + [("pass", nb)] * SMALL_BATCH_PASSES + [("gather", nb)]
    return steps if top_p else steps + [("kept", 0)]


def _split(bs: int, vocab: int, most_chunks: int | None = None) -> tuple[int, int]:
    """(chunk length, chunks): enough (chunk, row) programs to fill the GPU, at most most_chunks."""
    steps = triton.cdiv(vocab, CHUNK_ALIGN)
    chunks = max(1, min(steps, triton.cdiv(TARGET_PROGRAMS, bs), most_chunks or steps))
    chunk_len = CHUNK_ALIGN * triton.cdiv(steps, chunks)
    return chunk_len, triton.cdiv(vocab, chunk_len)


def _renormalise_torch(probs: torch.Tensor, pivot: torch.Tensor) -> torch.Tensor:
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs)).double()
    mass = kept.sum(-1, keepdim=True)
    scale = torch.where(mass > 0, 1.0 / torch.where(mass > 0, mass, torch.ones_like(mass)), torch.zeros_like(mass))
    return (kept * scale).float()


def _top_k_torch(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    desc = probs.sort(dim=-1, descending=True).values
    k_idx = (k.to(torch.int64).clamp(1, probs.shape[1]) - 1)[:, None]
    return _renormalise_torch(probs, desc.gather(1, k_idx))


def _top_p_torch(probs: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    asc = probs.sort(dim=-1).values
    cum = asc.double().cumsum(-1)
    # The total is the cumsum's last entry, so p = 0 keeps exactly the largest entries.
    target = (1.0 - p.double().clamp(0.0, 1.0))[:, None] * cum[:, -1:]
    dropped = (cum < target).sum(-1, keepdim=True)  # how many of the smallest go
    pivot = asc.gather(1, dropped.clamp(max=probs.shape[1] - 1))
    pivot = torch.where(dropped < probs.shape[1], pivot, torch.full_like(pivot, float("inf")))
    return _renormalise_torch(probs, pivot)


def _param_tensor(name, value, bs, dtypes, kind, device) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        check_tensor(name, value, dtype=dtypes, shape=(bs,))
        if value.device != device:
            raise ValueError(f"{name} must be on device {device} (probs' device), got {value.device}")
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind[-1].__name__} or a tensor of shape [bs], got {type(value).__name__}")
    if value != value:
        raise ValueError(f"{name} must not be NaN")
    return None


def _check_probs(probs) -> None:
    check_tensor("probs", probs, dtype=torch.float32, ndim=2)
    if check_mode_enabled() and probs.numel() and not bool((probs >= 0).all()):
        raise ValueError("probs must be non-negative and not NaN")


def _run(probs, param, param_t, *, top_p: bool) -> torch.Tensor:
    bs, vocab = probs.shape
    if probs.numel() == 0:
        return torch.zeros_like(probs)
    if launch_mode(probs, param_t) == "torch":
        if param_t is None:
            # scalar p is used at fp32 precision, as the kernel receives it
            param_t = torch.full((bs,), param, dtype=torch.float32 if top_p else torch.int64, device=probs.device)
        return _top_p_torch(probs, param_t) if top_p else _top_k_torch(probs, param_t)
    out = torch.empty_like(probs)
    state = _select(probs, param, param_t, top_p=top_p)
    block, warps = WRITE
    chunk_len, _ = _split(bs, vocab)
    rk._write_kernel[(triton.cdiv(vocab, chunk_len), bs)](
        probs, out, state, state.view(torch.float64), vocab, chunk_len, TOP_P=top_p, W=rk.STATE_WORDS,
        BLOCK=block, num_warps=warps,
    )
    return out


def _select(probs, param, param_t, *, top_p: bool) -> torch.Tensor:
    """Launch the first pass and the plan; returns the per-row state (pivot key in word LO,
    kept mass, the compaction attempt that took the row or 0: COMPACTED)."""
    bs, vocab = probs.shape
    chunk_len, chunks = _split(bs, vocab)
    plan = _plan(bs, top_p)
    # Small batches compact once, so their scratch holds a whole row (a few MiB at most): every
    # row fits. Large batches cap it and retry as the range narrows.
    cap = vocab if bs < FINISH_MIN_ROWS else min(CANDIDATE_CAPACITY, vocab)
    # One zero-filled buffer: per-row state (range, counts, fp64 masses, flags) and ticket counters.
    state = torch.zeros((bs, rk.STATE_WORDS), dtype=torch.int64, device=probs.device)
    fstate = state.view(torch.float64)
    part = torch.empty((bs, chunks, rk.PART_W), dtype=torch.float64, device=probs.device)
    compacts = any(kind == "compact" for kind, _ in plan)
    cand = torch.empty((bs, cap) if compacts else (1, 1), dtype=torch.float32, device=probs.device)
    gathers = any(kind == "gather" for kind, _ in plan)
    gath = torch.empty((bs, vocab) if gathers else (1, 1), dtype=torch.float32, device=probs.device)
    grid = (chunks, bs)
    sizes = (vocab, chunk_len, chunks, cap)
    common = dict(W=rk.STATE_WORDS, CHUNKS_P2=next_pow2(chunks))
    # Small batches switch to a narrower grid after their compaction (full rows that did not fit
    # are still covered: any chunk length x chunks spanning the vocab will do).
    small_len, small_chunks = _split(bs, vocab, SMALL_BATCH_CHUNKS[top_p])
    small = ((small_chunks, bs), (vocab, small_len, small_chunks, cap),
             dict(W=rk.STATE_WORDS, CHUNKS_P2=next_pow2(small_chunks)))
    param_ptr, param_scalar = (probs, param) if param_t is None else (param_t, 0)
    param_kw = dict(TOP_P=top_p, PARAM_IS_TENSOR=param_t is not None)
    tickets = iter(range(rk.FIRST_TICKET, rk.STATE_WORDS))
    attempts = iter(range(1, COMPACT_ATTEMPTS + 1))
    steps = [("first pass", 4)] + plan
    for kind, nb in steps:
        if kind in ("pass", "gather", "kept"):  # small-batch steps after the compaction
            grid, sizes, common = small
        if kind in ("first pass", "pass", "skip-compacted pass"):
            block, warps = NARROW_PASS if nb == 4 else WIDE_PASS[top_p]
            rk._pass_kernel[grid](
                probs, cand, part, state, fstate, param_ptr, param_scalar, *sizes, **param_kw,
                FIRST=kind == "first pass", SKIP_COMPACTED=kind == "skip-compacted pass", NB=nb,
                TICKET=next(tickets), BLOCK=block, num_warps=warps, **common,
            )
        elif kind == "gather":  # the passes' BLOCK: the same shares of the candidates
            block, warps = WIDE_PASS[top_p][0], GATHER_WARPS
            rk._gather_finish_kernel[grid](
                probs, cand, gath, part, state, fstate, param_ptr, param_scalar, *sizes, **param_kw, NB=nb,
                SORT_CAP=SORT_CAPACITY, SHORT_SORT=min(SHORT_SORT, SORT_CAPACITY), TICKET=next(tickets), BLOCK=block, num_warps=warps, **common,
            )
        elif kind == "compact":
            block, warps = COMPACT
            rk._compact_kernel[grid](probs, cand, part, state, fstate, *sizes, TOP_P=top_p, ATTEMPT=next(attempts),
                                     ADAPT=bs < FINISH_MIN_ROWS, TICKET=next(tickets), BLOCK=block, num_warps=warps,
                                     **common)
        elif kind == "finish":
            block, warps = FINISH
            rk._finish_kernel[(bs,)](probs, cand, state, fstate, param_ptr, param_scalar, vocab, cap, **param_kw,
                                     NB=nb, W=rk.STATE_WORDS, BLOCK=block, num_warps=warps)
        else:  # "kept"
            block, warps = NARROW_PASS
            rk._kept_mass_kernel[grid](probs, cand, part, state, fstate, *sizes, TICKET=next(tickets), BLOCK=block,
                                       num_warps=warps, **common)
    return state


def top_k_renorm(probs, k):
    """Keep each row's entries >= its k-th largest and renormalise (new tensor)."""
    _check_probs(probs)
    k_t = _param_tensor("k", k, probs.shape[0], INDEX_DTYPES, (int,), probs.device)
    if k_t is None:
        k = min(max(k, 1), max(probs.shape[1], 1))  # host-side clamp keeps the scalar in range
    return _run(probs, k, k_t, top_p=False)


def top_p_renorm(probs, p):
    """Drop the smallest entries holding < (1 - p) of each row's mass and renormalise."""
    _check_probs(probs)
    p_t = _param_tensor("p", p, probs.shape[0], (torch.float32, torch.float64), (int, float), probs.device)
    if p_t is None:
        p = min(max(float(p), 0.0), 1.0)
    return _run(probs, p, p_t, top_p=True)
