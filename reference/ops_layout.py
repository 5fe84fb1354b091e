"""Oracle for the index builders (docs/design.md §3.4-§3.8): python loops over requests."""
from __future__ import annotations

import torch


def _loc(slot: int, pos: int, ring: int) -> int:
    return -1 if slot < 0 or pos < 0 else slot * ring + pos % ring


def build_commit_inject_layout(req_pool_indices, prefix_lens, commit_lens, *, stride, ring):
    positions, swa_loc = [], []
    for r in range(len(req_pool_indices)):
        for c in range(stride):
            pos = int(prefix_lens[r]) + c
            positions.append(pos)
            swa_loc.append(_loc(int(req_pool_indices[r]), pos, ring) if c < int(commit_lens[r]) else -1)
    return torch.tensor(positions, dtype=torch.int64), torch.tensor(swa_loc, dtype=torch.int32)


def unified_inject_loc(positions, state_slot, *, ring, window, final_pos=None, commit_lens=None, verify_len=None):
    if state_slot is None:
        raise ValueError("state_slot is required")
    out = []
    for i in range(len(positions)):
        pos = int(positions[i])
        loc = _loc(int(state_slot[i]), pos, ring)
        if final_pos is not None and pos <= int(final_pos[i]) - window:
            loc = -1
        if commit_lens is not None and i % verify_len >= int(commit_lens[i // verify_len]):
            loc = -1
        out.append(loc)
    return torch.tensor(out, dtype=torch.int32)


def expand_prefill_causally(seq_lens, extend_lens, req_pool_indices, *, num_tokens=None):
    """Out-of-contract values as decided: negative extend counts as 0, prefix = max(seq - ext, 0),
    and ``num_tokens`` below the total keeps the first ``num_tokens`` rows."""
    causal, slots = [], []
    for r in range(len(extend_lens)):
        ext = max(int(extend_lens[r]), 0)
        first_position = max(int(seq_lens[r]) - ext, 0)
        for j in range(ext):
            causal.append(first_position + j + 1)  # seq_len_causal = position + 1
            slots.append(int(req_pool_indices[r]))
    if num_tokens is not None:
        del causal[num_tokens:], slots[num_tokens:]
        while len(causal) < num_tokens:  # padding rows
            causal.append(1)
            slots.append(int(req_pool_indices[-1]))
    return (torch.tensor(causal, dtype=seq_lens.dtype), torch.tensor(slots, dtype=req_pool_indices.dtype))


def select_token_tier(need, tiers):
    fitting = [t for t in sorted(tiers) if t >= need]
    if not fitting:
        raise ValueError(f"need={need} exceeds the largest tier")
    return fitting[0]


def pad_verify_lens_to_bucket(verify_lens, tier, padded_bs):
    """Negative lens count as 0; padding is never negative (0 when the tier is below the sum)."""
    lens = [max(int(v), 0) for v in verify_lens]
    leftover = max(tier - sum(lens), 0)
    n_pad = padded_bs - len(lens)
    if n_pad > 0:
        lens += [leftover // n_pad + (1 if i < leftover % n_pad else 0) for i in range(n_pad)]
    elif lens:
        lens[-1] += leftover
    return torch.tensor(lens, dtype=torch.int32)


def prefill_inject_meta(req_pool_indices, prefix_lens, extend_lens):
    positions, slots, final = [], [], []
    for r in range(len(extend_lens)):
        prefix, ext = max(int(prefix_lens[r]), 0), max(int(extend_lens[r]), 0)  # negatives count as 0
        for j in range(ext):
            positions.append(prefix + j)
            slots.append(int(req_pool_indices[r]))
            final.append(prefix + ext - 1)
    as_i64 = lambda xs: torch.tensor(xs, dtype=torch.int64)  # noqa: E731
    return as_i64(positions), as_i64(slots), as_i64(final)
