"""A trivially correct pool model (docs/design.md §5): a dict from (layer, slot, position) to a row.

No rings, no tables, no free lists: a write stores the row under its key, a
read looks it up (zeros when absent). Skips follow the contract in words:
prefill tokens with ``pos <= final_pos - window`` and verify columns
``col >= commit_len`` are not written.
"""
from __future__ import annotations

import torch

from reference.ops_ring import fused_norm_rope_


class DictPool:
    def __init__(self, *, window: int, head_dim: int, rope_dim: int, dtype=torch.bfloat16):
        self.window, self.head_dim, self.rope_dim, self.dtype = window, head_dim, rope_dim, dtype
        self.rows: dict[tuple[int, int, int], torch.Tensor] = {}

    def write_token(self, layer, slot, pos, kv_row, *, norm_weight, eps, cos, sin):
        row = kv_row.to(self.dtype).clone().reshape(1, -1)
        fused_norm_rope_(row, norm_weight, eps, cos, sin, torch.tensor([pos]), rope_dim=self.rope_dim)
        self.rows[(layer, int(slot), int(pos))] = row[0]

    def read(self, layer, slot, pos) -> torch.Tensor:
        return self.rows.get((layer, int(slot), int(pos)), torch.zeros(self.head_dim, dtype=self.dtype))

    def gather(self, layer, slots, positions) -> torch.Tensor:
        if len(positions) == 0:
            return torch.zeros(0, self.head_dim, dtype=self.dtype)
        return torch.stack([self.read(layer, s, p) for s, p in zip(slots, positions)])

    def release(self, slot):
        for key in [k for k in self.rows if k[1] == int(slot)]:
            del self.rows[key]
