"""Small index builders for the unified ring (docs/design.md §3.4-§3.8), in torch.

Graph safe (static shapes, no host sync) unless a docstring says otherwise.
Rows whose position or slot is negative get loc -1 (skipped); check mode
reports negative inputs as errors instead, since positions are never negative.
"""
from __future__ import annotations

from typing import Sequence

import torch

from impl.kernels import _checks
from impl.validation import check_mode_enabled, check_nonnegative, check_positive_int


def _ring_loc(slot: torch.Tensor, pos: torch.Tensor, ring: int) -> torch.Tensor:
    """int64 ``slot * ring + pos % ring``, or -1 where slot or position is negative."""
    slot, pos = slot.to(torch.int64), pos.to(torch.int64)
    loc = slot * ring + pos % ring
    return torch.where((slot >= 0) & (pos >= 0), loc, torch.full_like(loc, -1))


def build_commit_inject_layout(req_pool_indices, prefix_lens, commit_lens, *, stride, ring):
    """Verify rows -> (positions [bs*stride] int64, swa_loc [bs*stride] int32), graph safe.

    Row r, column c: position prefix_lens[r] + c; swa_loc = ring address of it, or -1
    where c >= commit_lens[r] (commit_len 0 skips the row, >= stride writes it all).
    """
    bs = _checks.index_vector("req_pool_indices", req_pool_indices).shape[0]
    _checks.index_vector("prefix_lens", prefix_lens, bs)
    _checks.index_vector("commit_lens", commit_lens, bs)
    _checks.same_device(req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, commit_lens=commit_lens)
    check_positive_int("stride", stride)
    check_positive_int("ring", ring)
    if stride > ring:
        raise ValueError(f"stride ({stride}) must not exceed ring ({ring}): a request's rows would collide")
    if check_mode_enabled():
        check_nonnegative("prefix_lens", prefix_lens)
        check_nonnegative("req_pool_indices", req_pool_indices)
    cols = torch.arange(stride, device=prefix_lens.device)
    positions = prefix_lens.to(torch.int64)[:, None] + cols[None, :]
    loc = _ring_loc(req_pool_indices[:, None].expand(bs, stride), positions, ring)
    committed = cols[None, :] < commit_lens.to(torch.int64)[:, None]
    swa_loc = torch.where(committed, loc, torch.full_like(loc, -1))
    return positions.reshape(-1), swa_loc.reshape(-1).to(torch.int32)


def unified_inject_loc(positions, state_slot, *, ring, window, final_pos=None, commit_lens=None, verify_len=None):
    """int32 ring addresses for injected rows, -1 for skipped ones (graph safe).

    final_pos [N]: skip rows with pos <= final_pos - window (window trim).
    commit_lens [bs] with verify_len: rows form [bs, verify_len]; skip column c >= commit_lens[r].
    """
    n = _checks.index_vector("positions", positions).shape[0]
    if state_slot is None:
        raise ValueError("state_slot is required: a ring address needs each row's request slot")
    _checks.index_vector("state_slot", state_slot, n)
    _checks.optional_index_vector("final_pos", final_pos, n)
    _checks.ring_and_window(ring, window)
    if commit_lens is not None:
        bs = _checks.index_vector("commit_lens", commit_lens).shape[0]
        check_positive_int("verify_len", verify_len)
        if bs * verify_len != n:
            raise ValueError(
                f"commit_lens has {bs} requests and verify_len is {verify_len}, so positions must have "
                f"{bs * verify_len} rows, got {n}"
            )
    elif verify_len is not None:
        raise ValueError("verify_len is only used together with commit_lens")
    _checks.same_device(positions=positions, state_slot=state_slot, final_pos=final_pos, commit_lens=commit_lens)
    if check_mode_enabled():
        check_nonnegative("positions", positions)
        check_nonnegative("state_slot", state_slot)
    loc = _ring_loc(state_slot, positions, ring)
    skip = torch.zeros_like(loc, dtype=torch.bool)
    if final_pos is not None:
        skip |= positions.to(torch.int64) <= final_pos.to(torch.int64) - window
    if commit_lens is not None:
        col = torch.arange(verify_len, device=positions.device)
        skip |= (col[None, :] >= commit_lens.to(torch.int64)[:, None]).reshape(-1)
    return torch.where(skip, torch.full_like(loc, -1), loc).to(torch.int32)


def expand_prefill_causally(seq_lens, extend_lens, req_pool_indices, *, num_tokens=None):
    """Per prefill token: (seq_len_causal = position + 1, req_index = its request's slot).

    Request r's token j: prefix_r + 1 + j with prefix_r = seq_lens[r] - extend_lens[r]. With
    ``num_tokens`` the output has exactly that many rows and is graph safe: padding rows get
    causal length 1 and the last request's slot, and repeat_interleave gets an
    ``output_size`` equal to the sum of its repeats (the padding is an extra repeat).
    Without it the total is read back: exactly one host sync.
    Outputs keep the dtypes of seq_lens and req_pool_indices.

    Out-of-contract values (check mode raises for each instead): a negative extend_lens[r]
    counts as 0; seq_lens[r] < extend_lens[r] gives prefix 0; ``num_tokens`` below the real
    total gives the first ``num_tokens`` rows of the full expansion, each with its own
    position (a request cut short keeps its true prefix).
    """
    bs = _checks.index_vector("req_pool_indices", req_pool_indices).shape[0]
    _checks.index_vector("seq_lens", seq_lens, bs)
    _checks.index_vector("extend_lens", extend_lens, bs)
    _checks.same_device(seq_lens=seq_lens, extend_lens=extend_lens, req_pool_indices=req_pool_indices)
    if num_tokens is not None:
        check_positive_int("num_tokens", num_tokens, minimum=0)
        if bs == 0 and num_tokens > 0:
            raise ValueError(f"num_tokens={num_tokens} needs at least one request to take the padding rows")
    device = extend_lens.device
    if check_mode_enabled():
        check_nonnegative("extend_lens", extend_lens)
        if bs and bool((seq_lens.to(torch.int64) < extend_lens.to(torch.int64)).any()):
            raise ValueError("seq_lens must be >= extend_lens for every request")
        if num_tokens is not None and int(extend_lens.to(torch.int64).sum()) > num_tokens:
            raise ValueError(f"num_tokens={num_tokens} is smaller than sum(extend_lens)={int(extend_lens.sum())}")
    ext = extend_lens.to(torch.int64).clamp_min(0)
    prefix = (seq_lens.to(torch.int64) - ext).clamp_min(0)
    requests = torch.arange(bs + 1, device=device)
    if num_tokens is None:
        rows = ext
        req_of_token = torch.repeat_interleave(requests[:bs], rows)  # the one host sync
    else:
        # Cap the running total at num_tokens so the repeats sum to exactly num_tokens
        # whatever the caller passed (invariant 12): a too-small num_tokens keeps the
        # first num_tokens rows (check mode reports it) instead of writing out of bounds.
        ends = ext.cumsum(0).clamp_max(num_tokens)
        rows = torch.diff(ends, prepend=ends.new_zeros(1))
        pad = (num_tokens - ends[-1:]) if bs else ext.new_full((1,), num_tokens)
        req_of_token = torch.repeat_interleave(requests, torch.cat([rows, pad]), output_size=num_tokens)
    total_rows = req_of_token.shape[0]
    starts = torch.cat([rows.new_zeros(1), rows.cumsum(0)])  # exclusive cumsum of the rows laid out
    is_real = req_of_token < bs
    offset = torch.arange(total_rows, device=device) - starts[req_of_token]
    first_causal = torch.cat([prefix + 1, ext.new_ones(1)])  # from the full extend, not the rows kept
    causal = first_causal[req_of_token] + torch.where(is_real, offset, torch.zeros_like(offset))
    slots = torch.cat([req_pool_indices, req_pool_indices[-1:]])  # padding: the last request's slot
    return causal.to(seq_lens.dtype), slots[req_of_token]


def select_token_tier(need, tiers: Sequence[int]) -> int:
    """The smallest captured token tier >= need; a clear error above the largest."""
    check_positive_int("need", need, minimum=0)
    tiers = sorted(tiers)
    if not tiers or any(isinstance(t, bool) or not isinstance(t, int) or t < 1 for t in tiers):
        raise ValueError(f"tiers must be a non-empty list of positive ints, got {tiers!r}")
    for tier in tiers:
        if tier >= need:
            return tier
    raise ValueError(f"need={need} tokens exceeds the largest captured tier {tiers[-1]} (tiers {tiers})")


def pad_verify_lens_to_bucket(verify_lens, tier, padded_bs):
    """int32 [padded_bs] summing exactly to ``tier`` (docs/design.md §3.7), graph safe.

    leftover = tier - sum(verify_lens): pad rows share it (leftover // n_pad each, the
    first leftover % n_pad one more); without pad rows the last real row absorbs it.
    Out-of-contract values (check mode raises for each, it needs the values on the host):
    negative verify_lens count as 0, and a tier below their sum leaves the padding at 0
    (never negative) -- the result then sums to more than ``tier``.
    """
    bs = _checks.index_vector("verify_lens", verify_lens).shape[0]
    check_positive_int("tier", tier, minimum=0)
    check_positive_int("padded_bs", padded_bs, minimum=0)
    if padded_bs < bs:
        raise ValueError(f"padded_bs ({padded_bs}) must be >= the batch size ({bs})")
    if padded_bs == 0 and tier != 0:
        raise ValueError(f"tier ({tier}) cannot be spread over padded_bs = 0 rows")
    if check_mode_enabled() and bs:
        check_nonnegative("verify_lens", verify_lens)
        total = int(verify_lens.to(torch.int64).sum())
        if total > tier:
            raise ValueError(f"tier ({tier}) is too small for sum(verify_lens) = {total}")
    lens = verify_lens.to(torch.int64).clamp_min(0)
    out = torch.zeros(padded_bs, dtype=torch.int32, device=verify_lens.device)
    out[:bs] = lens.to(torch.int32)
    leftover = (tier - lens.sum()).clamp_min(0)
    n_pad = padded_bs - bs
    if n_pad:
        extra = (torch.arange(n_pad, device=out.device) < leftover % n_pad).to(torch.int64)
        out[bs:] = (leftover // n_pad + extra).to(torch.int32)
    elif bs:
        out[bs - 1] += leftover.to(torch.int32)
    return out


def prefill_inject_meta(req_pool_indices, prefix_lens, extend_lens):
    """Per prefill token: (positions, state_slot, final_pos), all int64.

    positions = prefix + arange(extend); state_slot = the request's slot;
    final_pos = prefix + extend - 1. NOT graph safe: the token count is read back
    from the device (exactly one sync, a repeat_interleave without output_size),
    as the sync policy allows for this eager prefill path. Out-of-contract values
    (check mode raises for each): a negative prefix counts as 0, a negative extend as 0.
    """
    bs = _checks.index_vector("req_pool_indices", req_pool_indices).shape[0]
    _checks.index_vector("prefix_lens", prefix_lens, bs)
    _checks.index_vector("extend_lens", extend_lens, bs)
    _checks.same_device(req_pool_indices=req_pool_indices, prefix_lens=prefix_lens, extend_lens=extend_lens)
    if check_mode_enabled():
        check_nonnegative("prefix_lens", prefix_lens)
        check_nonnegative("extend_lens", extend_lens)
    ext = extend_lens.to(torch.int64).clamp_min(0)
    prefix = prefix_lens.to(torch.int64).clamp_min(0)
    req = torch.repeat_interleave(torch.arange(bs, device=ext.device), ext)  # the one host sync
    starts = ext.cumsum(0) - ext
    offset = torch.arange(req.shape[0], device=ext.device) - starts[req]
    positions = prefix[req] + offset
    return positions, req_pool_indices.to(torch.int64)[req], (prefix + ext - 1)[req]
