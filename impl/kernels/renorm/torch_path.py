"""The torch path of top-k / top-p renorm (the kernel_backend gate "torch"): sort-based, same results.

The same decided semantics as the kernels (docs/design.md §3.9): NaN, +-inf and negative entries
weigh 0, ties at the pivot survive, zero mass gives zeros. Imports torch only: never the kernels,
the plan or the workspace. The API reads these functions through this module
(``torch_path._top_k_torch``), so a test patches them here.
"""
from __future__ import annotations

import torch

_INF = float("inf")


def _clean(probs: torch.Tensor) -> torch.Tensor:
    """NaN, +-inf and negative entries weigh 0 (the kernels' _load_keys)."""
    return torch.where((probs > 0) & (probs < _INF), probs, torch.zeros_like(probs))


def _renormalise_torch(probs: torch.Tensor, pivot: torch.Tensor) -> torch.Tensor:
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs)).double()
    mass = kept.sum(-1, keepdim=True)
    scale = torch.where(mass > 0, 1.0 / torch.where(mass > 0, mass, torch.ones_like(mass)), torch.zeros_like(mass))
    return (kept * scale).float()


def _top_k_torch(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    probs = _clean(probs)
    desc = probs.sort(dim=-1, descending=True).values
    k_idx = (k.to(torch.int64).clamp(1, probs.shape[1]) - 1)[:, None]
    return _renormalise_torch(probs, desc.gather(1, k_idx))


def _top_p_torch(probs: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    probs = _clean(probs)
    asc = probs.sort(dim=-1).values
    cum = asc.double().cumsum(-1)
    p = p.float().double().nan_to_num(nan=1.0).clamp(0.0, 1.0)  # p's fp32 value; a NaN p keeps every positive entry
    # The total is the cumsum's last entry, so p = 0 keeps exactly the largest entries.
    target = (1.0 - p)[:, None] * cum[:, -1:]
    dropped = (cum < target).sum(-1, keepdim=True)  # how many of the smallest go
    pivot = asc.gather(1, dropped.clamp(max=probs.shape[1] - 1))
    pivot = torch.where(dropped < probs.shape[1], pivot, torch.full_like(pivot, float("inf")))
    return _renormalise_torch(probs, pivot)
