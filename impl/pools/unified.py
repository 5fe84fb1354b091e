"""The unified bf16 KV ring (docs/design.md §5): per layer one buffer of ``num_slots * ring + compress_rows`` rows.

Request slot ``s`` owns rows ``[s*ring, (s+1)*ring)``; position ``p`` lives at
``s*ring + p % ring``. Addressing is pure arithmetic, so every method here is
sync-free and CUDA-graph safe. The trailing ``compress_rows`` rows belong to
the compressed-KV path and are never addressed by a ring loc.
"""
from __future__ import annotations

import torch

from impl.config import SpecConfig
from impl.pools.base import KVPool, _ops
from impl.validation import check_positive_int


class UnifiedKVPool(KVPool):
    kind = "unified"

    def __init__(
        self,
        config: SpecConfig,
        *,
        num_layers: int,
        compress_rows: int = 0,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str | None = None,
    ) -> None:
        check_positive_int("compress_rows", compress_rows, minimum=0)
        self.compress_rows = compress_rows
        super().__init__(
            config,
            num_layers=num_layers,
            num_rows=config.num_slots * config.ring + compress_rows,
            dtype=dtype,
            device=device,
        )

    def get_unified_kv(self, layer: int) -> torch.Tensor:
        """The layer's whole ``[num_slots*ring + compress_rows, head_dim]`` buffer."""
        return self.buffer(layer)

    def locate(self, state_slot, positions, *, final_pos=None):
        self._check_tokens(positions, final_pos)
        slot = self._slot_tensor(state_slot, positions)
        return _ops().unified_inject_loc(positions, slot, ring=self.ring, window=self.window, final_pos=final_pos)

    def locate_commit(self, req_pool_indices, prefix_lens, commit_lens, *, stride):
        self._check_commit_args(req_pool_indices, prefix_lens, commit_lens, stride)
        return _ops().build_commit_inject_layout(
            req_pool_indices, prefix_lens, commit_lens, stride=stride, ring=self.ring
        )

    def read_loc(self, state_slot, positions):
        self._check_tokens(positions, None)
        slot = self._slot_tensor(state_slot, positions)
        loc = slot.to(torch.int64) * self.ring + positions.to(torch.int64) % self.ring
        return loc.to(torch.int32)

    def release(self, slot: int) -> None:
        """Nothing to free: the slot's ring rows are reused by the next request given this slot."""
        if not isinstance(slot, int) or not 0 <= slot < self.num_slots:
            raise ValueError(f"slot must be an int in [0, {self.num_slots}), got {slot!r}")
