"""Tensor-parallel SwiGLU MLP for data-parallel attention (drop-in for ``impl.model.mlp.Mlp``).

Weights: each rank keeps a contiguous slice of ``mlp_dim`` -- columns
``[r*m/W, (r+1)*m/W)`` of ``w_gate`` and ``w_up`` (column-parallel) and the
same rows of ``w_down`` (row-parallel) -- cut from the full single-rank
weights, so W ranks together hold exactly the single-rank model.

Forward (every rank, same order of calls -- see :mod:`impl.distributed.lockstep`):

1. ``x = RMSNorm(h)`` on the rank's own rows (row-wise, so local);
2. the ranks exchange their row counts (a control exchange), pad ``x`` to the
   largest count and ``all_gather`` it: every rank now holds all ranks' rows;
3. each rank computes its partial ``silu(x @ gate_r) * (x @ up_r) @ down_r``
   for ALL rows; an ``all_reduce`` (sum) completes the down projection;
4. each rank returns its own rows (offset = sum of the lower ranks' counts).

A rank with no tokens still takes part (``h`` of shape ``[0, hidden]``): the
other ranks' rows need its slice of the weights. The result equals the
single-rank MLP up to summation order (the down projection is summed in W
partial sums), so greedy tokens match whenever logit gaps exceed fp32 noise.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from impl.model.attention import rms_norm
from impl.model.weights import MlpWeights


def shard_bounds(size: int, rank: int, world_size: int) -> tuple[int, int]:
    if size % world_size:
        raise ValueError(f"mlp_dim {size} is not divisible by the world size {world_size}")
    part = size // world_size
    return rank * part, (rank + 1) * part


class TensorParallelMlp:
    def __init__(self, full: MlpWeights, eps: float, lockstep):
        self.lockstep = lockstep
        rank, world = lockstep.rank, lockstep.world_size
        lo, hi = shard_bounds(full.w_gate.shape[1], rank, world)
        self.mlp_norm = full.mlp_norm
        # .contiguous() makes real copies: the full weights can be dropped
        self.w_gate = full.w_gate[:, lo:hi].contiguous()
        self.w_up = full.w_up[:, lo:hi].contiguous()
        self.w_down = full.w_down[lo:hi, :].contiguous()
        self.eps = eps
        self.world_size = world
        self.rank = rank

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        self.lockstep.before_mlp()
        x = rms_norm(h, self.mlp_norm, self.eps)  # fp32 [n, hidden]
        n, hidden = x.shape
        counts = self.lockstep.exchange("mlp", n)
        widest = max(counts)
        if widest == 0:  # no rank has rows: every rank skips the tensor collectives alike
            return x.new_zeros(0, hidden)
        padded = x.new_zeros(widest, hidden)
        padded[:n] = x
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        everyone = torch.cat([p[:c] for p, c in zip(parts, counts)])
        partial = (torch.nn.functional.silu(everyone @ self.w_gate) * (everyone @ self.w_up)) @ self.w_down
        dist.all_reduce(partial)  # row-parallel down projection: sum the W partial products
        start = sum(counts[: self.rank])
        return partial[start:start + n]
