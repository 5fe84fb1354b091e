"""MTP/EAGLE chain draft (docs/design.md §7): k sequential steps, one token each.

Step j (position p+j, p = the anchor's position) takes the previous hidden
state (step 0: the target's last hidden state, at position p-1) and the
embedding of the newest token (step 0: the anchor), fuses them
(``concat(norm(h), norm(embed)) @ fuse``), runs one attention + MLP layer and
predicts the token at p+j+1. Its attention reads its own small KV: rows for
committed positions < p in the draft pool (projected target hidden states,
written by the injector, as for DSpark) plus the K rows of this chain's
earlier steps (kept here, never stored). Shares the target's embedding and LM head.
"""
from __future__ import annotations

import torch

from impl.model.attention import ExtendRows, attend, project_q, rms_norm, window_keys
from impl.model.dspark_draft import DRAFT_LAYER, InjectedDraft, PoolReader
from impl.model.tiny_config import TinyConfig
from impl.model.weights import MtpDraftWeights, TargetWeights, mtp_weights
from impl.spec.mtp import Pick, argmax_pick, chain_draft


class MtpDraft(InjectedDraft):
    def __init__(self, cfg: TinyConfig, target_w: TargetWeights, cos, sin, weights: MtpDraftWeights | None = None):
        super().__init__(cfg, target_w, cos, sin,
                         weights if weights is not None else mtp_weights(cfg, target_w.embed.device))

    def chain(self, last_hidden: torch.Tensor, anchor: torch.Tensor, anchor_pos: torch.Tensor,
              slots: torch.Tensor, pool, steps: int, pick: Pick = argmax_pick) -> tuple[torch.Tensor, torch.Tensor]:
        """Draft tokens ``[bs, steps]`` and their logits ``[bs, steps, vocab]``: this model's
        step in the chain loop of :func:`impl.spec.mtp.chain_draft`."""
        cfg, a = self.cfg, self.w.layer.attn
        bs, device = anchor.shape[0], anchor.device
        chain_k = torch.zeros(bs * steps, cfg.head_dim, dtype=torch.bfloat16, device=device)
        base = torch.arange(bs, device=device) * steps

        def step(j: int, h_prev: torch.Tensor, tok: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            pos = anchor_pos + j
            fused = torch.cat(
                [rms_norm(h_prev, self.w.hidden_norm, cfg.eps),
                 rms_norm(self.target_w.embed[tok], self.w.embed_norm, cfg.eps)],
                dim=-1,
            ) @ self.w.fuse
            x = rms_norm(fused, a.attn_norm, cfg.eps)
            q = project_q(x, a, cfg.n_q_heads, cfg.head_dim, self.cos, self.sin, pos, cfg.rope_dim)
            k = (x @ a.wkv).to(torch.bfloat16)
            pool.norm_rope_(k, positions=pos, norm_weight=a.kv_norm, eps=cfg.eps, cos=self.cos, sin=self.sin)
            chain_k[base + j] = k
            rows = ExtendRows(positions=pos, slots=slots, prefix=anchor_pos, row_start=base)
            keys, valid = window_keys(rows, chain_k, PoolReader(pool), DRAFT_LAYER, cfg.window)
            h = fused + attend(q, keys, valid).reshape(bs, -1) @ a.wo
            h = h + self.mlp(h)
            return rms_norm(h, self.w.final_norm, cfg.eps) @ self.target_w.lm_head, h

        return chain_draft(step, last_hidden.float(), anchor, steps, pick=pick)
