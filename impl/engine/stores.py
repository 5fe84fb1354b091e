"""Binds one target forward's write locations to a pool (the model's ``KVStore``)."""
from __future__ import annotations

import torch

from impl.model.attention import ExtendRows
from impl.model.dspark_draft import PoolReader
from impl.prefill_metadata import TokenMetadata
from impl.step_timing import section


class TargetStore(PoolReader):
    """``write`` = the pool writer (norm + RoPE in place, scatter, skip loc < 0) at ``loc``."""

    def __init__(self, pool, *, positions: torch.Tensor, loc: torch.Tensor, cos, sin, eps: float):
        super().__init__(pool)
        self.positions, self.loc = positions, loc
        self.cos, self.sin, self.eps = cos, sin, eps

    def write(self, layer, kv, norm_weight):
        with section("writes"):
            self.pool.write(layer, kv, self.loc, positions=self.positions, norm_weight=norm_weight, eps=self.eps,
                            cos=self.cos, sin=self.sin)
        return kv


def rows_from_metadata(md: TokenMetadata, prefix_lens: torch.Tensor) -> ExtendRows:
    """The attention's per-token view of a prefill/verify layout built by ``build_prefill_metadata``."""
    r = md.token_batch_index
    return ExtendRows(
        positions=md.positions,
        slots=md.req_indices.to(torch.int64),
        prefix=prefix_lens.to(torch.int64)[r],
        row_start=md.extend_start_loc.to(torch.int64)[r],
    )
