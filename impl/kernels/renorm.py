"""Top-k / top-p renormalisation of probability rows (SPEC §3.9, graph safe).

Pivot semantics: a row keeps every entry ``>= pivot`` (ties at the pivot all
survive), then is divided by its kept mass (zero mass -> zeros, never NaN).
  top-k: pivot = the k-th largest entry, k clamped to [1, V].
  top-p: drop the smallest entries whose cumulative mass is < (1 - p) * row mass,
         p clamped to [0, 1]; for a row summing to 1 this is SPEC's "< 1 - p".
         p = 1 is a no-op, p = 0 keeps the largest entries (and their ties).

The Triton path finds the pivot without sorting, by a radix select: non-negative
fp32 values order like their int32 bit patterns ("keys"), so the pivot's key is
built a few bits at a time, most significant first. Each pass histograms, per
row, the next digit of the keys that still match the prefix found so far (a
count per digit for top-k, an fp64 mass per digit for top-p) and picks the digit
holding the pivot. Rows are split into chunks, one program per (chunk, row);
each program writes its partial histogram and the last one of a row to finish
(an atomic ticket) reduces them and writes the new prefix. A fixed number of
launches per call and no host sync keep it CUDA-graph safe.

Candidate compaction (rows >= COMPACT_MIN_ROWS): once the prefix fixes the
exponent (bits 31..23), one pass copies the entries still matching it into a
fixed-capacity per-row scratch (atomic cursor), and the remaining passes (and
top-k's kept-mass pass) read only those candidates. A row whose candidates
overflow the scratch keeps reading its full row, so the result is always exact.
Candidates share one exponent, so their fp64 mass sums are exact in any order.
"""
from __future__ import annotations

import torch

from impl.kernels._backend import launch_mode, next_pow2, tl, triton
from impl.validation import INDEX_DTYPES, check_mode_enabled, check_tensor

# Per-row state words (int64; the fp64 ones are stored through a float64 view of the buffer).
# The kernels address them by these literal offsets (row * W + offset).
_PREFIX, _COUNT_ABOVE, _TARGET, _MASS_BELOW, _TOTAL, _KEPT, _NCAND, _MASS_ABOVE, _TICKETS = range(9)
_MAX_LAUNCHES = 20  # one ticket counter per reducing launch
_STATE_WORDS = _TICKETS + _MAX_LAUNCHES
TOP_K_BITS = 8  # digit width of a top-k pass (counts via tl.histogram): 4 passes
# Digit width of a top-p pass (fp64 one-hot masses, cost grows with 2^bits): on the H200, 2 bits
# (16 passes) was fastest at 256 rows and 3 bits (11 passes, fewer launches) at 1 row.
TOP_P_BITS = {"few_rows": 3, "many_rows": 2}
TOP_P_MANY_ROWS = 32
# Launch shape per op, {top_p: value}: columns per loop step, warps, and how many
# (chunk, row) programs to aim for when splitting rows (tuned on the H200).
BLOCK_MAX = {False: 2048, True: 512}
NUM_WARPS = {False: 8, True: 4}
TARGET_PROGRAMS = {False: 528, True: 528}
# Compaction: batches of at least this many rows compact once the exponent is fixed (one row keeps
# the plain passes: an extra launch would cost more than it saves). Candidate scratch per row
# (fp32 values); a row with more candidates falls back to full-row passes.
COMPACT_MIN_ROWS = 2
CANDIDATE_CAPACITY = 16384
_EXPONENT_SHIFT = 23  # key bits >= 23 are the fp32 exponent (bit 31 is the sign, always 0)


@triton.jit
def _keys(x):
    # Order-preserving int32 key of a non-negative float; -0.0 maps to +0.0's key.
    return tl.maximum(x.to(tl.int32, bitcast=True), 0)


@triton.jit
def _source(
    probs_ptr, cand_ptr, state_ptr, row, chunk, V, chunk_len, num_chunks, cap,
    FROM_CANDIDATES: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr,
):
    # (pointer, start, end) this program scans: its chunk of the row, or, once the row's candidates
    # were compacted without overflow, its share of the candidate scratch.
    src = probs_ptr + row.to(tl.int64) * V
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    if FROM_CANDIDATES:
        n = tl.load(state_ptr + row * W + 6)  # _NCAND
        if n <= cap:
            n32 = n.to(tl.int32)
            share = tl.cdiv(tl.cdiv(n32, num_chunks), BLOCK) * BLOCK  # whole blocks per program
            src = cand_ptr + row.to(tl.int64) * cap
            start = chunk * share
            end = tl.minimum(start + share, n32)
    return src, start, end


@triton.jit
def _renorm_kernel(
    probs_ptr, cand_ptr, part_ptr, state_ptr, fstate_ptr, param_ptr, param_scalar, V, chunk_len, num_chunks,
    cap, TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, HI: tl.constexpr, SHIFT: tl.constexpr,
    NB: tl.constexpr, TICKET: tl.constexpr, FROM_CANDIDATES: tl.constexpr, W: tl.constexpr,
    BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr,
):
    # One radix pass: key bits [SHIFT, HI) of the keys whose bits >= HI equal the row's prefix.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    srow = state_ptr + row * W
    frow = fstate_ptr + row * W
    prefix = tl.load(srow + 0).to(tl.int32)
    digits = tl.arange(0, NB)
    row_ptr, start, end = _source(
        probs_ptr, cand_ptr, state_ptr, row, chunk, V, chunk_len, num_chunks, cap, FROM_CANDIDATES, W, BLOCK,
    )
    if TOP_P:
        mass = tl.zeros([BLOCK, NB], tl.float64)  # per-lane, per-digit fp64 sums
    else:
        count = tl.zeros([2 * NB], tl.int32)  # bin NB collects the keys off the prefix
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = tl.load(row_ptr + offs, mask=ok, other=0.0)
        key = _keys(x)
        match = ok & ((key >> HI) == prefix)  # key >= 0, so key >> 31 == 0 == the first prefix
        digit = (key >> SHIFT) & ((1 << (HI - SHIFT)) - 1)
        if TOP_P:
            hit = match[:, None] & (digit[:, None] == digits[None, :])
            mass += tl.where(hit, x.to(tl.float64)[:, None], 0.0)
        else:
            count += tl.histogram(tl.where(match, digit, NB), 2 * NB)
    if TOP_P:
        part = tl.sum(mass, axis=0)
    else:
        # Keep bins [0, NB): view the 2*NB bins as [2, NB] and take row 0.
        halves = tl.reshape(count, [2, NB])
        part = tl.sum(tl.where(tl.arange(0, 2)[:, None] == 0, halves, 0), axis=0).to(tl.float64)
    tl.store(part_ptr + (row * num_chunks + chunk) * NB + digits, part)
    # The last program of this row to finish (acq_rel ticket: it sees every partial) reduces.
    ticket = tl.atomic_add(srow + TICKET, 1)
    if ticket == num_chunks - 1:
        c = tl.arange(0, CHUNKS_P2)
        parts = tl.load(
            part_ptr + (row * num_chunks + c[:, None]) * NB + digits[None, :],
            mask=(c < num_chunks)[:, None], other=0.0, cache_modifier=".cg",
        )
        hist = tl.sum(parts, axis=0)  # [NB] fp64, exact (counts, or fp64 sums of fp32 values)
        upto = tl.cumsum(hist, axis=0)  # inclusive prefix sums over digits
        if TOP_P:
            if HI == 31:  # first pass: every key matches, so the digits hold the whole row
                if PARAM_IS_TENSOR:
                    p = tl.load(param_ptr + row).to(tl.float64)
                else:
                    p = tl.full([], 0.0, tl.float64) + param_scalar
                p = tl.minimum(tl.maximum(p, 0.0), 1.0)
                total = tl.sum(hist, axis=0)
                tl.store(frow + 4, total)
                tl.store(frow + 2, (1.0 - p) * total)
            target = tl.load(frow + 2)
            below = tl.load(frow + 3)
            # pivot digit: the largest d whose strictly-smaller mass stays < target (d = 0 always may).
            # The pivot is an entry of positive mass when target > 0, so d never passes the highest
            # digit holding mass: an exact bound where rounded sums (p = 0: target = total) could tie.
            top = tl.max(tl.where(hist > 0.0, digits, 0), axis=0)
            fits = (below + (upto - hist) < target) & (digits <= top)
            best = tl.max(tl.where(fits, digits, 0), axis=0)
            below += tl.sum(tl.where(digits < best, hist, 0.0), axis=0)
            tl.store(frow + 3, below)
            if SHIFT == 0:
                tl.store(frow + 5, tl.load(frow + 4) - below)  # kept mass = total - dropped mass
        else:
            if PARAM_IS_TENSOR:
                k = tl.load(param_ptr + row).to(tl.int64)
            else:
                k = tl.full([], 0, tl.int64) + param_scalar
            k = tl.minimum(tl.maximum(k, 1), V).to(tl.float64)
            above = tl.load(srow + 1).to(tl.float64)
            at_or_above = above + tl.sum(hist, axis=0) - (upto - hist)  # count of keys >= digit d
            # pivot digit: the largest d with at least k keys at or above it (d = 0 always may)
            best = tl.max(tl.where(at_or_above >= k, digits, 0), axis=0)
            above += tl.sum(tl.where(digits > best, hist, 0.0), axis=0)
            tl.store(srow + 1, above.to(tl.int64))
        tl.store(srow + 0, ((prefix << (HI - SHIFT)) | best).to(tl.int64))


@triton.jit
def _compact_kernel(
    probs_ptr, cand_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len, num_chunks, cap,
    TOP_P: tl.constexpr, HI: tl.constexpr, TICKET: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
):
    # Copy the entries whose key bits >= HI equal the prefix into the row's candidate scratch, at
    # slots claimed from an atomic cursor (which keeps counting past cap: that flags the overflow).
    # Top-k also sums (fp64) the mass strictly above the candidates, part of its kept mass.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    cursor = state_ptr + row * W + 6  # _NCAND
    prefix = tl.load(state_ptr + row * W).to(tl.int32)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    row_ptr = probs_ptr + row.to(tl.int64) * V
    cand_row = cand_ptr + row.to(tl.int64) * cap
    above = tl.zeros([BLOCK], tl.float64)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = tl.load(row_ptr + offs, mask=ok, other=0.0)
        high = _keys(x) >> HI
        match = ok & (high == prefix)
        ones = match.to(tl.int32)
        n = tl.sum(ones, axis=0)
        if n > 0:
            first = tl.atomic_add(cursor, n.to(tl.int64))  # this block's first slot
            slot = first + (tl.cumsum(ones, axis=0) - 1).to(tl.int64)
            tl.store(cand_row + slot, x, mask=match & (slot < cap))
        if not TOP_P:
            above += tl.where(ok & (high > prefix), x.to(tl.float64), 0.0)
    if not TOP_P:
        tl.store(part_ptr + row * num_chunks + chunk, tl.sum(above, axis=0))
        ticket = tl.atomic_add(state_ptr + row * W + TICKET, 1)
        if ticket == num_chunks - 1:
            c = tl.arange(0, CHUNKS_P2)
            parts = tl.load(part_ptr + row * num_chunks + c, mask=c < num_chunks, other=0.0, cache_modifier=".cg")
            tl.store(fstate_ptr + row * W + 7, tl.sum(parts, axis=0))  # _MASS_ABOVE


@triton.jit
def _kept_mass_kernel(
    probs_ptr, cand_ptr, part_ptr, state_ptr, fstate_ptr, V, chunk_len, num_chunks, cap,
    TICKET: tl.constexpr, FROM_CANDIDATES: tl.constexpr, W: tl.constexpr, BLOCK: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
):
    # Mass of the entries >= pivot (top-k), fp64, split and reduced like a pass. From candidates,
    # the mass strictly above them (summed by the compaction) is added at the end.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    pivot = tl.load(state_ptr + row * W).to(tl.int32)
    row_ptr, start, end = _source(
        probs_ptr, cand_ptr, state_ptr, row, chunk, V, chunk_len, num_chunks, cap, FROM_CANDIDATES, W, BLOCK,
    )
    acc = tl.zeros([BLOCK], tl.float64)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = tl.load(row_ptr + offs, mask=ok, other=0.0)
        acc += tl.where(ok & (_keys(x) >= pivot), x.to(tl.float64), 0.0)
    tl.store(part_ptr + row * num_chunks + chunk, tl.sum(acc, axis=0))
    ticket = tl.atomic_add(state_ptr + row * W + TICKET, 1)
    if ticket == num_chunks - 1:
        c = tl.arange(0, CHUNKS_P2)
        parts = tl.load(part_ptr + row * num_chunks + c, mask=c < num_chunks, other=0.0, cache_modifier=".cg")
        kept = tl.sum(parts, axis=0)
        if FROM_CANDIDATES:
            if tl.load(state_ptr + row * W + 6) <= cap:  # the candidates were used
                kept += tl.load(fstate_ptr + row * W + 7)
        tl.store(fstate_ptr + row * W + 5, kept)


@triton.jit
def _write_kernel(
    probs_ptr, out_ptr, state_ptr, fstate_ptr, V, chunk_len,
    W: tl.constexpr, BLOCK: tl.constexpr,
):
    # Keep the entries >= pivot, scaled by 1 / kept mass in fp64 (zero mass -> zeros).
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    pivot = tl.load(state_ptr + row * W).to(tl.int32)
    kept = tl.load(fstate_ptr + row * W + 5)
    scale = tl.where(kept > 0.0, 1.0 / tl.where(kept > 0.0, kept, 1.0), 0.0)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    base = row.to(tl.int64) * V
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = tl.load(probs_ptr + base + offs, mask=ok, other=0.0)
        y = tl.where(_keys(x) >= pivot, x.to(tl.float64) * scale, 0.0)
        tl.store(out_ptr + base + offs, y.to(tl.float32), mask=ok)


def _pass_bits(bits: int) -> list[tuple[int, int]]:
    """(HI, SHIFT) of each pass: key bits [SHIFT, HI), from bit 31 down to 0."""
    passes, hi = [], 31
    while hi > 0:
        passes.append((hi, max(hi - bits, 0)))
        hi = max(hi - bits, 0)
    return passes


def _split(bs: int, vocab: int, top_p: bool) -> tuple[int, int, int]:
    """(BLOCK, chunk length, chunks): enough (chunk, row) programs to fill the GPU."""
    block = min(next_pow2(vocab), BLOCK_MAX[top_p])
    steps = triton.cdiv(vocab, block)
    chunks = max(1, min(steps, triton.cdiv(TARGET_PROGRAMS[top_p], bs)))
    chunk_len = block * triton.cdiv(steps, chunks)
    return block, chunk_len, triton.cdiv(vocab, chunk_len)


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
    block, chunk_len, chunks = _split(bs, vocab, top_p)
    if top_p:
        bits = TOP_P_BITS["many_rows" if bs >= TOP_P_MANY_ROWS else "few_rows"]
    else:
        bits = TOP_K_BITS
    nb, passes = 1 << bits, _pass_bits(bits)
    # One zero-filled buffer: per-row state (prefix, counts, fp64 masses) and ticket counters.
    state = torch.zeros((bs, _STATE_WORDS), dtype=torch.int64, device=probs.device)
    fstate = state.view(torch.float64)
    part = torch.empty((bs, chunks, nb), dtype=torch.float64, device=probs.device)
    # Compact right after the first pass that fixes the exponent, unless that is the last pass.
    compact_after = next(i for i, (_, shift) in enumerate(passes) if shift <= _EXPONENT_SHIFT)
    if bs < COMPACT_MIN_ROWS or compact_after == len(passes) - 1:
        compact_after = len(passes)  # never
    cap = CANDIDATE_CAPACITY
    cand = torch.empty((bs, cap) if compact_after < len(passes) else (1, 1), dtype=torch.float32, device=probs.device)
    grid = (chunks, bs)
    common = dict(W=_STATE_WORDS, BLOCK=block, CHUNKS_P2=next_pow2(chunks), num_warps=NUM_WARPS[top_p])
    tickets = iter(range(_TICKETS, _STATE_WORDS))
    for i, (hi, shift) in enumerate(passes):
        _renorm_kernel[grid](
            probs, cand, part, state, fstate, probs if param_t is None else param_t,
            0 if param_t is not None else param, vocab, chunk_len, chunks, cap,
            TOP_P=top_p, PARAM_IS_TENSOR=param_t is not None, HI=hi, SHIFT=shift, NB=nb,
            TICKET=next(tickets), FROM_CANDIDATES=i > compact_after, **common,
        )
        if i == compact_after:
            _compact_kernel[grid](
                probs, cand, part, state, fstate, vocab, chunk_len, chunks, cap,
                TOP_P=top_p, HI=shift, TICKET=next(tickets), **common,
            )
    if not top_p:
        _kept_mass_kernel[grid](
            probs, cand, part, state, fstate, vocab, chunk_len, chunks, cap,
            TICKET=next(tickets), FROM_CANDIDATES=compact_after < len(passes), **common,
        )
    _write_kernel[grid](probs, out, state, fstate, vocab, chunk_len, W=_STATE_WORDS, BLOCK=block,
                        num_warps=NUM_WARPS[top_p])
    return out


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
