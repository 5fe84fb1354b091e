"""DSpark block draft (docs/design.md §7): one forward pass proposes gamma tokens.

Query rows per request: the anchor token at position p (the newest token, not
yet seen by the target) and gamma copies of the mask-token embedding at
positions p+1..p+gamma. They attend, sliding-window, over

* the draft's own KV pool, which holds *projected target hidden states*
  (``inject_rows``: ``hidden @ inject_proj``, then the pool writer's RMSNorm +
  RoPE) for the request's committed positions < p, written by the injector, and
* the block itself (causally; the block's K is computed here and never stored).

Row i (1..gamma) predicts the token at position p+i. The draft shares the
target's embedding and LM head.
"""
from __future__ import annotations

import torch

from impl.model.attention import ExtendRows, attend, project_q, rms_norm, window_keys
from impl.model.mlp import Mlp
from impl.model.tiny_config import TinyConfig
from impl.model.weights import DSparkDraftWeights, TargetWeights, dspark_weights

DRAFT_LAYER = 0  # the draft pool has one layer


class PoolReader:
    """Adapter: window reads ``[N, W]`` -> the pool's flat ``gather``."""

    def __init__(self, pool):
        self.pool = pool

    def read(self, layer, slots, positions):
        shape = positions.shape
        rows = self.pool.gather(layer, slots.reshape(-1).contiguous(), positions.reshape(-1).contiguous())
        return rows.view(*shape, rows.shape[-1])


class InjectedDraft:
    """What every draft that reads injected target hidden states shares: its weights
    (one attention layer + MLP), rope tables, and the projection the injector applies."""

    def __init__(self, cfg: TinyConfig, target_w: TargetWeights, cos, sin, weights):
        self.cfg = cfg
        self.target_w = target_w
        self.w = weights
        self.cos, self.sin = cos, sin
        self.mlp = Mlp(self.w.layer.mlp, cfg.eps)

    @property
    def kv_norm_weight(self) -> torch.Tensor:
        return self.w.layer.attn.kv_norm

    def inject_rows(self, hidden: torch.Tensor) -> torch.Tensor:
        """Pre-norm KV rows (bf16 ``[N, head_dim]``) for target hidden states ``[N, hidden]``."""
        return (hidden.float() @ self.w.inject_proj).to(torch.bfloat16)


class DSparkDraft(InjectedDraft):
    def __init__(self, cfg: TinyConfig, target_w: TargetWeights, cos, sin, weights: DSparkDraftWeights | None = None):
        super().__init__(cfg, target_w, cos, sin,
                         weights if weights is not None else dspark_weights(cfg, target_w.embed.device))

    # ---- the block forward ----
    def block_logits(self, anchor: torch.Tensor, anchor_pos: torch.Tensor, slots: torch.Tensor, pool,
                     gamma: int) -> torch.Tensor:
        """Logits ``[bs, gamma, vocab]`` for positions p+1..p+gamma (p = ``anchor_pos``)."""
        cfg, a = self.cfg, self.w.layer.attn
        bs, rows_per = anchor.shape[0], gamma + 1
        device = anchor.device
        col = torch.arange(rows_per, device=device)
        positions = (anchor_pos.view(-1, 1) + col).reshape(-1)
        h = torch.cat(
            [self.target_w.embed[anchor].unsqueeze(1), self.w.mask_embed.expand(bs, gamma, -1)], dim=1
        ).reshape(bs * rows_per, -1)
        rows = ExtendRows(
            positions=positions,
            slots=slots.view(-1, 1).expand(-1, rows_per).reshape(-1),
            prefix=anchor_pos.view(-1, 1).expand(-1, rows_per).reshape(-1),
            row_start=(torch.arange(bs, device=device) * rows_per).view(-1, 1).expand(-1, rows_per).reshape(-1),
        )
        x = rms_norm(h, a.attn_norm, cfg.eps)
        q = project_q(x, a, cfg.n_q_heads, cfg.head_dim, self.cos, self.sin, positions, cfg.rope_dim)
        k = (x @ a.wkv).to(torch.bfloat16)
        pool.norm_rope_(k, positions=positions, norm_weight=a.kv_norm, eps=cfg.eps, cos=self.cos, sin=self.sin)
        keys, valid = window_keys(rows, k, PoolReader(pool), DRAFT_LAYER, cfg.window)
        h = h + attend(q, keys, valid).reshape(h.shape[0], -1) @ a.wo
        h = h + self.mlp(h)
        logits = rms_norm(h, self.w.final_norm, cfg.eps) @ self.target_w.lm_head
        return logits.view(bs, rows_per, -1)[:, 1:, :]
