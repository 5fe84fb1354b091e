"""Draft KV pools (docs/design.md §5): the unified bf16 ring and the paged pool, one contract.

``make_pool(config, num_layers=...)`` picks the implementation from the
``kv_backend`` gate in effect (:func:`impl.gates.active_gates`: a run's gates, else
``DSPARK_KV_BACKEND``) unless ``kind`` is given.
"""
from __future__ import annotations

import torch

from impl.config import SpecConfig
from impl.gates import active_gates, validate_gate_value
from impl.pools.base import KVPool, check_gamma_consistent, check_pools_compatible
from impl.pools.paged import PagedKVPool
from impl.pools.unified import UnifiedKVPool

POOL_KINDS = {"unified": UnifiedKVPool, "paged": PagedKVPool}


def make_pool(
    config: SpecConfig,
    *,
    num_layers: int,
    kind: str | None = None,
    dtype: torch.dtype = torch.bfloat16,
    device: torch.device | str | None = None,
    **kwargs,
) -> KVPool:
    """A pool of ``kind`` ("unified" | "paged"; default: the kv_backend gate)."""
    kind = active_gates().kv_backend if kind is None else validate_gate_value("kv_backend", kind, source="kind")
    return POOL_KINDS[kind](config, num_layers=num_layers, dtype=dtype, device=device, **kwargs)


__all__ = [
    "KVPool",
    "UnifiedKVPool",
    "PagedKVPool",
    "POOL_KINDS",
    "make_pool",
    "check_pools_compatible",
    "check_gamma_consistent",
]
