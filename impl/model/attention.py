"""Sliding-window MQA over one latent KV head (K = V), reading K from a KV pool.

Per layer: ``q = x @ wq`` (n_q_heads heads of head_dim, RoPE'd on the trailing
rope_dim columns, interleaved pairs), ``kv = x @ wkv`` cast to bf16 and handed
to the pool writer, which applies RMSNorm + the same RoPE in place and scatters
the rows (docs/design.md §3.3, §5). A query at position q attends to the keys at
positions (q - window, q]: those before its request's first new position come
from the pool (ring or paged), the rest from the rows computed in this forward.
Values are the keys (K = V). Math in fp32; K is bf16 exactly as stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from impl.model.weights import AttentionWeights


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def rope_tables(rope_dim: int, max_pos: int, theta: float, device) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 cos/sin tables ``[max_pos, rope_dim // 2]``; pair j turns at theta^(-2j/rope_dim)."""
    half = rope_dim // 2
    inv_freq = theta ** (-torch.arange(half, dtype=torch.float64) * 2.0 / max(rope_dim, 1))
    angles = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq[None, :]
    return angles.cos().float().to(device), angles.sin().float().to(device)


def rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
                     rope_dim: int) -> torch.Tensor:
    """RoPE on the trailing ``rope_dim`` columns of fp32 ``x [N, ..., D]``, pairs (2j, 2j+1)."""
    if rope_dim == 0:
        return x
    d = x.shape[-1]
    c = cos[positions]  # [N, rope_dim/2]
    s = sin[positions]
    while c.dim() < x.dim():  # broadcast over head axes
        c, s = c.unsqueeze(1), s.unsqueeze(1)
    rot = x[..., d - rope_dim:]
    even, odd = rot[..., 0::2], rot[..., 1::2]
    out = torch.empty_like(rot)
    out[..., 0::2] = even * c - odd * s
    out[..., 1::2] = even * s + odd * c
    return torch.cat([x[..., : d - rope_dim], out], dim=-1)


@dataclass
class ExtendRows:
    """Per-token description of a ragged forward: each token's request slot, position,
    the request's first new position (``prefix``) and the flat index of that first row."""

    positions: torch.Tensor  # [N] int64
    slots: torch.Tensor  # [N] int64: state slot (req_pool_idx) of the token's request
    prefix: torch.Tensor  # [N] int64: keys at positions < prefix come from the pool
    row_start: torch.Tensor  # [N] int64: flat row of the request's position ``prefix``

    @property
    def num_tokens(self) -> int:
        return self.positions.shape[0]


class KVReader(Protocol):
    def read(self, layer: int, slots: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """bf16 rows ``[*slots.shape, head_dim]`` stored for (slot, position); any value
        where the position was never written (the caller masks those)."""


def window_keys(
    rows: ExtendRows, new_k: torch.Tensor, reader: KVReader, layer: int, window: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys ``[N, window, D]`` (fp32) and validity ``[N, window]`` for each query row.

    Slot w of row i holds position ``pos_i - (window - 1) + w``. Keys at or after
    the request's ``prefix`` come from ``new_k`` (this forward's rows), older
    ones from the pool. No host sync: shapes depend only on N and window.
    """
    offsets = torch.arange(window, device=rows.positions.device) - (window - 1)
    key_pos = rows.positions[:, None] + offsets[None, :]  # [N, W]
    valid = key_pos >= 0
    safe_pos = key_pos.clamp_min(0)
    from_new = key_pos >= rows.prefix[:, None]
    new_index = (rows.row_start[:, None] + (key_pos - rows.prefix[:, None])).clamp(0, max(new_k.shape[0] - 1, 0))
    pooled = reader.read(layer, rows.slots[:, None].expand_as(safe_pos), torch.where(from_new, 0, safe_pos))
    fresh = new_k[new_index]
    keys = torch.where(from_new[..., None], fresh, pooled).float()
    return keys, valid


def attend(q: torch.Tensor, keys: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Softmax attention of ``q [N, H, D]`` over ``keys [N, W, D]`` (values = keys)."""
    scale = q.shape[-1] ** -0.5
    scores = torch.einsum("nhd,nwd->nhw", q, keys) * scale
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("nhw,nwd->nhd", probs, keys)


def project_q(x: torch.Tensor, w: AttentionWeights, n_heads: int, head_dim: int, cos, sin, positions,
              rope_dim: int) -> torch.Tensor:
    q = (x @ w.wq).view(x.shape[0], n_heads, head_dim)
    return rope_interleaved(q, cos, sin, positions, rope_dim)
