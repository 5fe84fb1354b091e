"""The paged draft KV pool (the non-unified gate value, docs/design.md §5).

Each request slot has a token -> row table (``table[slot, position]``, -1 when
absent) into one shared per-layer buffer, and rows come from a free list.
Writing position ``p`` for a slot first evicts that slot's positions
``<= p - ring`` (no query of this step can read them -- the same argument that
makes ``ring = window + gamma`` safe), so a slot holds at most ``ring`` live
rows and ``num_slots * ring`` rows always suffice. Semantics therefore match
the unified ring exactly; only the physical rows differ.

Allocation is host bookkeeping: ``locate`` and ``locate_commit`` read the
positions back (they sync) and are not CUDA-graph safe -- as in any paged
engine, allocation happens before the captured forward. ``read_loc``,
``gather``, ``write`` and ``store`` are sync-free.
"""
from __future__ import annotations

import torch

from impl.config import SpecConfig
from impl.pools.base import KVPool
from impl.validation import check_positive_int


class PagedKVPool(KVPool):
    kind = "paged"

    def __init__(
        self,
        config: SpecConfig,
        *,
        num_layers: int,
        max_positions: int = 4096,
        num_rows: int | None = None,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str | None = None,
    ) -> None:
        check_positive_int("max_positions", max_positions)
        rows = config.num_slots * config.ring if num_rows is None else num_rows
        super().__init__(config, num_layers=num_layers, num_rows=rows, dtype=dtype, device=device)
        self.max_positions = max_positions
        # token -> row table per slot, on the device so reads stay sync-free
        self.table = torch.full((config.num_slots, max_positions), -1, dtype=torch.int32, device=self.device)
        # host mirror and free list (rows handed out highest first, so physical
        # rows never coincide with ring addresses by accident)
        self._live: list[dict[int, int]] = [{} for _ in range(config.num_slots)]
        self._free: list[int] = list(range(rows))

    # ---- bookkeeping ----
    @property
    def free_rows(self) -> int:
        return len(self._free)

    def live_positions(self, slot: int) -> list[int]:
        """Positions that currently hold a row in ``slot`` (sorted)."""
        self._check_slot(slot)
        return sorted(self._live[slot])

    def _check_slot(self, slot: int) -> None:
        if not isinstance(slot, int) or not 0 <= slot < self.num_slots:
            raise ValueError(f"slot must be an int in [0, {self.num_slots}), got {slot!r}")

    def _row_for(self, slot: int, pos: int, changes: dict[tuple[int, int], int]) -> int:
        if not 0 <= slot < self.num_slots:
            raise ValueError(f"state_slot value {slot} is out of range [0, {self.num_slots})")
        if not 0 <= pos < self.max_positions:
            raise ValueError(f"position {pos} is out of range [0, {self.max_positions}) of the paged table")
        live = self._live[slot]
        if pos in live:
            return live[pos]
        for old in [p for p in live if p <= pos - self.ring]:  # evict rows no query can read
            self._free.append(live.pop(old))
            changes[(slot, old)] = -1
        if not self._free:
            raise RuntimeError(
                f"paged pool out of rows ({self.num_rows} rows, {self.num_slots} slots x ring {self.ring})"
            )
        row = self._free.pop()
        live[pos] = row
        changes[(slot, pos)] = row
        return row

    def _commit_table(self, changes: dict[tuple[int, int], int]) -> None:
        if not changes:
            return
        keys = list(changes)
        slots = torch.tensor([k[0] for k in keys], dtype=torch.int64, device=self.device)
        pos = torch.tensor([k[1] for k in keys], dtype=torch.int64, device=self.device)
        rows = torch.tensor([changes[k] for k in keys], dtype=torch.int32, device=self.device)
        self.table.index_put_((slots, pos), rows)

    def _allocate(self, slot: torch.Tensor, positions: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        slots, poss, keeps = slot.tolist(), positions.tolist(), keep.tolist()  # host bookkeeping: syncs
        changes: dict[tuple[int, int], int] = {}
        locs = [self._row_for(int(s), int(p), changes) if k else -1 for s, p, k in zip(slots, poss, keeps)]
        self._commit_table(changes)
        return torch.tensor(locs, dtype=torch.int32, device=positions.device)

    # ---- the pool contract ----
    def locate(self, state_slot, positions, *, final_pos=None):
        self._check_tokens(positions, final_pos)
        slot = self._slot_tensor(state_slot, positions)
        pos = positions.to(torch.int64)
        if final_pos is None:
            keep = torch.ones_like(pos, dtype=torch.bool)
        else:
            keep = pos > final_pos.to(torch.int64) - self.window  # the window trim, as in the ring
        return self._allocate(slot, pos, keep)

    def locate_commit(self, req_pool_indices, prefix_lens, commit_lens, *, stride):
        self._check_commit_args(req_pool_indices, prefix_lens, commit_lens, stride)
        device = req_pool_indices.device
        col = torch.arange(stride, device=device, dtype=torch.int64).view(1, -1)
        positions = (prefix_lens.to(torch.int64).view(-1, 1) + col).reshape(-1)
        slot = req_pool_indices.to(torch.int64).view(-1, 1).expand(-1, stride).reshape(-1)
        keep = (col < commit_lens.to(torch.int64).view(-1, 1)).reshape(-1)
        return positions, self._allocate(slot, positions, keep)

    def read_loc(self, state_slot, positions):
        self._check_tokens(positions, None)
        slot = self._slot_tensor(state_slot, positions).to(torch.int64)
        pos = positions.to(torch.int64)
        inside = (pos >= 0) & (pos < self.max_positions)
        loc = self.table[slot, pos.clamp(0, self.max_positions - 1)]
        return torch.where(inside, loc, torch.full_like(loc, -1))

    def release(self, slot: int) -> None:
        """Return the slot's rows to the free list and clear its table row."""
        self._check_slot(slot)
        live = self._live[slot]
        self._free.extend(live.values())
        live.clear()
        self.table[slot].fill_(-1)
