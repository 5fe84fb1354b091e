"""The tiny target model: embed -> layers (sliding-window MQA + SwiGLU MLP, pre-norm
residual) -> final RMSNorm -> LM head.

``forward_extend`` runs a ragged batch (prefill chunks and verify rows alike):
each layer projects K, hands it to ``store.write`` (the pool writer: fused
RMSNorm + RoPE in place, then scatter, rows with loc < 0 skipped) and attends
over the window, old keys read back through ``store.read``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from impl.model.attention import ExtendRows, KVReader, attend, project_q, rms_norm, rope_tables, window_keys
from impl.model.mlp import Mlp
from impl.model.tiny_config import TinyConfig
from impl.model.weights import TargetWeights, target_weights


class KVStore(KVReader, Protocol):
    def write(self, layer: int, kv: torch.Tensor, norm_weight: torch.Tensor) -> torch.Tensor:
        """Normalise + RoPE ``kv [N, D]`` bf16 (in place) at this forward's positions, store
        the rows this forward is allowed to store, and return the normalised rows."""


@dataclass
class ForwardOut:
    logits: torch.Tensor  # [N, vocab] fp32
    hidden: torch.Tensor  # [N, hidden] fp32: last residual stream (before the final norm)
    keys: list[torch.Tensor]  # per layer [N, head_dim] bf16: the rows handed to the pool


class TargetModel:
    def __init__(self, cfg: TinyConfig, device: str | torch.device = "cpu", weights: TargetWeights | None = None):
        self.cfg = cfg
        self.device = torch.device(device)
        self.w = weights if weights is not None else target_weights(cfg, self.device)
        self.cos, self.sin = rope_tables(cfg.rope_dim, cfg.max_pos, cfg.rope_theta, self.device)
        self.mlps = [Mlp(layer.mlp, cfg.eps) for layer in self.w.layers]

    def attention(self, layer: int, h: torch.Tensor, rows: ExtendRows,
                  store: KVStore) -> tuple[torch.Tensor, torch.Tensor]:
        cfg, w = self.cfg, self.w.layers[layer].attn
        x = rms_norm(h, w.attn_norm, cfg.eps)
        q = project_q(x, w, cfg.n_q_heads, cfg.head_dim, self.cos, self.sin, rows.positions, cfg.rope_dim)
        kv = (x @ w.wkv).to(torch.bfloat16)
        k = store.write(layer, kv, w.kv_norm)
        keys, valid = window_keys(rows, k, store, layer, cfg.window)
        out = attend(q, keys, valid).reshape(h.shape[0], -1)
        return out @ w.wo, k

    def forward_extend(self, tokens: torch.Tensor, rows: ExtendRows, store: KVStore) -> ForwardOut:
        if tokens.dim() != 1 or tokens.shape[0] != rows.num_tokens:
            raise ValueError(f"tokens must be [N] with N = {rows.num_tokens}, got {list(tokens.shape)}")
        h = self.w.embed[tokens]
        keys = []
        for layer in range(self.cfg.n_layers):
            update, k = self.attention(layer, h, rows, store)
            h = h + update
            h = h + self.mlps[layer](h)
            keys.append(k)
        logits = rms_norm(h, self.w.final_norm, self.cfg.eps) @ self.w.lm_head
        return ForwardOut(logits=logits, hidden=h, keys=keys)
