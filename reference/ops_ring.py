"""Oracle for the ring writers and norm+RoPE (docs/design.md §3.1-§3.3): plain loops, float64.

Written for obviousness, not speed. Out-of-contract values get the answers of
docs/design.md §10, as impl gives them: a row whose loc is negative or past the end
of ``unified`` is skipped (§10.3), positions outside the cos/sin table are clamped
into it (§10.3), and duplicate destinations keep the last row in row order (§10.2).
"""
from __future__ import annotations

import torch

from reference.bits import bits_view


def scatter_into_unified(kv, loc, unified, *, check=None):
    """For each row i with 0 <= loc[i] < len(unified): unified[loc[i]] = kv[i], bit for bit.

    A loc past the end is skipped like a negative one (docs/design.md §10.3). Duplicate
    destinations (out of contract; check mode raises in impl): the last row in row order
    wins, so each written slot holds exactly one of the rows aimed at it."""
    src, dst = bits_view(kv), bits_view(unified)
    for i in range(kv.shape[0]):
        target = int(loc[i])
        if target < 0 or target >= unified.shape[0]:
            continue
        dst[target] = src[i]
    return unified


def ring_address(slot: int, pos: int, ring: int) -> int:
    return slot * ring + pos % ring


def store_swa_into_unified(kv, state_slot, positions, unified, *, window, ring, final_pos=None):
    """Row i goes to slot*ring + pos%ring, unless pos <= final_pos - window, pos/slot < 0, or the
    address lies past the end of ``unified`` (docs/design.md §10.3)."""
    loc = []
    for i in range(kv.shape[0]):
        slot, pos = int(state_slot[i]), int(positions[i])
        trimmed = final_pos is not None and pos <= int(final_pos[i]) - window
        loc.append(-1 if (slot < 0 or pos < 0 or trimmed) else ring_address(slot, pos, ring))
    return scatter_into_unified(kv, torch.tensor(loc, dtype=torch.int64), unified)


def fused_norm_rope_(kv, weight, eps, cos, sin, positions, *, rope_dim):
    """RMSNorm (float64) then interleaved RoPE on the last rope_dim columns, in place.

    A position outside the cos/sin table is clamped into [0, len(cos) - 1] (docs/design.md §10.3)."""
    d = kv.shape[-1]
    nope = d - rope_dim
    heads = kv.shape[1] if kv.dim() == 3 else 1
    rows = kv.reshape(-1, d)
    w = weight.double()
    for r in range(rows.shape[0]):
        x = rows[r].double()
        y = x / torch.sqrt((x * x).mean() + eps) * w
        pos = min(max(int(positions[r // heads]), 0), cos.shape[0] - 1)
        for j in range(rope_dim // 2):
            c, s = float(cos[pos, j]), float(sin[pos, j])
            e, o = float(y[nope + 2 * j]), float(y[nope + 2 * j + 1])
            y[nope + 2 * j] = e * c - o * s
            y[nope + 2 * j + 1] = e * s + o * c
        rows[r] = y.to(kv.dtype)
    return kv
