"""The SwiGLU MLP block, a module of its own so tensor parallelism can split it
(column-split gate/up, row-split down, one all-reduce) without touching attention."""
from __future__ import annotations

import torch

from impl.model.attention import rms_norm
from impl.model.weights import MlpWeights


class Mlp:
    def __init__(self, weights: MlpWeights, eps: float):
        self.w = weights
        self.eps = eps

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        """Residual update ``silu(x @ gate) * (x @ up) @ down`` for ``x = norm(h)``."""
        x = rms_norm(h, self.w.mlp_norm, self.eps)
        return (torch.nn.functional.silu(x @ self.w.w_gate) * (x @ self.w.w_up)) @ self.w.w_down
