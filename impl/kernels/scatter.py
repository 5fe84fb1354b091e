"""Writing KV rows into the unified ring (docs/design.md §3.1, §3.2). Both ops are graph safe.

Rows move as raw bits (an integer view of the same width), so fp8 / bf16 /
NaN payloads arrive unchanged. A row is skipped when its destination is
negative -- and, defensively, when it lies past the end of ``unified``: the
fast path never writes out of bounds. Check mode (may sync) turns out-of-range
and duplicate destinations into a clear ValueError instead.

Colliding destinations with check mode off (out of contract): the torch backend
keeps the LAST row aimed at a slot, in row order (one ``scatter_reduce``: amax
of the row index per slot; graph safe, no sync), never the sum of the rows'
deltas. The Triton kernel moves each row as one vectorised access, so under the
interpreter (programs run in order) the last row lands too. Compiled on a GPU,
racing writes to one slot are not ordered: one row lands in practice, but the
hardware does not make a whole-row write atomic. An exact rule in the kernel
would cost a scan of every later row (O(rows^2): minutes at the benchmark's 1M
rows) or a second launch over a per-slot claim array; the kernel keeps its one
launch (check mode reports the collision instead).
"""
from __future__ import annotations

import torch

from impl.kernels import _checks
from impl.kernels._backend import launch_mode, next_pow2, tl, triton
from impl.validation import check_locs, check_mode_enabled, check_nonnegative, check_tensor


@triton.jit
def _scatter_rows_kernel(
    src_ptr, dst_ptr,  # [T, D] rows and [pages, D] destination, same integer view
    loc_ptr,  # [T] destination rows (ADDRESS_FROM_RING=False)
    slot_ptr, pos_ptr, final_ptr,  # [T] ring inputs (ADDRESS_FROM_RING=True)
    num_rows, row_width, num_dst_rows, ring, window,
    ADDRESS_FROM_RING: tl.constexpr, HAS_FINAL_POS: tl.constexpr,
    ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # Each program moves ROWS whole rows; a row is one vectorised BLOCK_D-wide access.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    in_batch = rows < num_rows
    if ADDRESS_FROM_RING:
        slot = tl.load(slot_ptr + rows, mask=in_batch, other=-1).to(tl.int64)
        pos = tl.load(pos_ptr + rows, mask=in_batch, other=-1).to(tl.int64)
        # Triton's % truncates; rows with pos < 0 are skipped, so it equals torch's floor %.
        dst_row = slot * ring + pos % ring
        keep = in_batch & (slot >= 0) & (pos >= 0)
        if HAS_FINAL_POS:
            final = tl.load(final_ptr + rows, mask=in_batch, other=0).to(tl.int64)
            keep = keep & (pos > final - window)  # only a request's last `window` tokens survive
    else:
        dst_row = tl.load(loc_ptr + rows, mask=in_batch, other=-1).to(tl.int64)
        keep = in_batch
    keep = keep & (dst_row >= 0) & (dst_row < num_dst_rows)  # never write out of bounds

    cols = tl.arange(0, BLOCK_D)
    mask = keep[:, None] & (cols < row_width)[None, :]
    src = src_ptr + rows.to(tl.int64)[:, None] * row_width + cols[None, :]  # int64 address math
    vals = tl.load(src, mask=mask)
    tl.store(dst_ptr + dst_row[:, None] * row_width + cols[None, :], vals, mask=mask)


def _launch(kv, unified, *, loc=None, slot=None, pos=None, final=None, ring=1, window=1) -> None:
    src, dst = _checks.bits_view(kv), _checks.bits_view(unified)
    num_rows, width = src.shape
    block_d = next_pow2(width)
    rows = max(1, min(16, 4096 // block_d))  # ~4K elements per program
    num_warps = 4 if block_d * src.element_size() <= 1024 else 8
    dummy = loc if loc is not None else slot
    _scatter_rows_kernel[(triton.cdiv(num_rows, rows),)](
        src, dst, dummy, dummy if slot is None else slot, dummy if pos is None else pos,
        dummy if final is None else final,
        num_rows, width, dst.shape[0], ring, window,
        ADDRESS_FROM_RING=slot is not None, HAS_FINAL_POS=final is not None,
        ROWS=rows, BLOCK_D=block_d, num_warps=num_warps,
    )


def _scatter_torch(kv: torch.Tensor, loc: torch.Tensor, unified: torch.Tensor) -> None:
    """Graph-safe torch scatter: add (new - old) at each kept row, 0 at skipped ones.

    Integer adds wrap, so old + (new - old) == new bit for bit; skipped rows add 0
    to row 0 (unchanged). No masked indexing, no host sync, no trash row needed.
    Of rows aimed at one slot only the last is kept, so the deltas never sum.
    """
    src, dst = _checks.bits_view(kv), _checks.bits_view(unified)
    loc = loc.to(torch.int64)
    keep = (loc >= 0) & (loc < dst.shape[0])
    target = torch.where(keep, loc, torch.zeros_like(loc))
    order = torch.arange(loc.shape[0], device=loc.device)
    last = torch.full((dst.shape[0],), -1, dtype=torch.int64, device=loc.device)
    last.scatter_reduce_(0, target, torch.where(keep, order, torch.full_like(order, -1)), reduce="amax")
    keep &= last.index_select(0, target) == order
    delta = torch.where(keep[:, None], src - dst.index_select(0, target), torch.zeros_like(src))
    dst.index_put_((target,), delta, accumulate=True)


def _ring_locs_torch(slot, pos, final, *, ring, window) -> torch.Tensor:
    slot, pos = slot.to(torch.int64), pos.to(torch.int64)
    keep = (slot >= 0) & (pos >= 0)
    if final is not None:
        keep &= pos > final.to(torch.int64) - window
    return torch.where(keep, slot * ring + pos % ring, torch.full_like(pos, -1))


def _check_addresses_fit(slot, pos, final, num_dst_rows: int, *, ring: int, window: int) -> None:
    """Check mode: every kept row's ring address lies inside ``unified`` (names the slot that does not)."""
    locs = _ring_locs_torch(slot, pos, final, ring=ring, window=window)
    past = locs >= num_dst_rows
    if locs.numel() and bool(past.any()):
        i = int(past.nonzero()[0])
        raise ValueError(f"state_slot[{i}] = {int(slot[i])} puts row {i} at ring address {int(locs[i])}, past the "
                         f"end of unified ({num_dst_rows} rows: {num_dst_rows // ring} slots of ring {ring})")


def _check_rows(kv: object, unified: object) -> tuple[int, int]:
    check_tensor("kv", kv, ndim=2)
    check_tensor("unified", unified, ndim=2, dtype=kv.dtype)
    if unified.shape[1] != kv.shape[1]:
        raise ValueError(f"unified rows are {unified.shape[1]} wide but kv rows are {kv.shape[1]} wide")
    _checks.bits_view(kv)
    return kv.shape


def scatter_into_unified(kv, loc, unified, *, check=None):
    """``unified[loc[i]] = kv[i]`` for every row with ``loc[i] >= 0`` (docs/design.md §3.1, graph safe).

    kv [T, D], loc [T] int32/int64, unified [pages, D] of kv's dtype; bits are copied
    exactly (1-byte dtypes included). ``check=True`` (or check mode) reports
    out-of-range and duplicate locs; it may sync. Returns ``unified``.
    """
    num_rows, _ = _check_rows(kv, unified)
    _checks.index_vector("loc", loc, num_rows)
    _checks.same_device(kv=kv, loc=loc, unified=unified)
    if check or (check is None and check_mode_enabled()):
        check_locs("loc", loc, unified.shape[0])
    if num_rows == 0 or unified.shape[0] == 0:
        return unified
    if launch_mode(kv, loc, unified) == "torch":
        _scatter_torch(kv, loc, unified)
    else:
        _launch(kv, unified, loc=loc)
    return unified


def store_swa_into_unified(kv, state_slot, positions, unified, *, window, ring, final_pos=None):
    """Scatter rows to ``state_slot * ring + pos % ring`` (docs/design.md §3.2, graph safe).

    With ``final_pos`` a row is skipped when ``pos <= final_pos - window`` (only a
    request's last ``window`` tokens survive). Rows with a negative slot or position
    are skipped; check mode reports them, and duplicate/out-of-range addresses.
    Returns ``unified``.
    """
    num_rows, _ = _check_rows(kv, unified)
    _checks.index_vector("state_slot", state_slot, num_rows)
    _checks.index_vector("positions", positions, num_rows)
    _checks.optional_index_vector("final_pos", final_pos, num_rows)
    _checks.ring_and_window(ring, window)
    _checks.same_device(kv=kv, state_slot=state_slot, positions=positions, unified=unified, final_pos=final_pos)
    if check_mode_enabled():
        check_nonnegative("positions", positions)
        check_nonnegative("state_slot", state_slot)
        _check_addresses_fit(state_slot, positions, final_pos, unified.shape[0], ring=ring, window=window)
        check_locs("ring address", _ring_locs_torch(state_slot, positions, final_pos, ring=ring, window=window),
                   unified.shape[0])
    if num_rows == 0 or unified.shape[0] == 0:
        return unified
    if launch_mode(kv, state_slot, positions, unified, final_pos) == "torch":
        locs = _ring_locs_torch(state_slot, positions, final_pos, ring=ring, window=window)
        _scatter_torch(kv, locs, unified)
    else:
        _launch(kv, unified, slot=state_slot, pos=positions, final=final_pos, ring=ring, window=window)
    return unified
