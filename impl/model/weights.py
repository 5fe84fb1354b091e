"""Deterministic weights for the tiny target and its drafts, from one seed.

Every tensor is drawn on the CPU from a ``torch.Generator`` seeded with
``TinyConfig.seed`` (then moved to the device), so CPU and GPU runs build the
same model bit for bit. Scales are chosen so that logits are spread widely
(std about 4 over the vocab): greedy equality between the engine and the
reference decoder -- which differ only in summation order -- relies on the
top-2 logit gap being far above fp32 rounding noise. The reference decoder
reports the smallest gap it saw.

The drafts share the target's embedding and LM head (as DeepSeek-V4's MTP and
DSpark heads do) and own everything else.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from impl.model.tiny_config import TinyConfig


def _normal(gen: torch.Generator, *shape: int, std: float) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * std


def _norm_weight(gen: torch.Generator, n: int) -> torch.Tensor:
    # Near 1 but not exactly: a wrong norm weight must change the result.
    return 1.0 + _normal(gen, n, std=0.1)


class _Moveable:
    def to(self, device):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                setattr(self, f.name, value.to(device))
            elif isinstance(value, list):
                setattr(self, f.name, [v.to(device) for v in value])
        return self


@dataclass
class AttentionWeights(_Moveable):
    attn_norm: torch.Tensor  # [hidden]
    wq: torch.Tensor  # [hidden, n_q_heads * head_dim]
    wkv: torch.Tensor  # [hidden, head_dim]: the one latent KV head, K = V
    kv_norm: torch.Tensor  # [head_dim]: RMSNorm weight applied by the pool writer
    wo: torch.Tensor  # [n_q_heads * head_dim, hidden]


@dataclass
class MlpWeights(_Moveable):
    mlp_norm: torch.Tensor  # [hidden]
    w_gate: torch.Tensor  # [hidden, mlp_dim]
    w_up: torch.Tensor  # [hidden, mlp_dim]
    w_down: torch.Tensor  # [mlp_dim, hidden]


@dataclass
class LayerWeights(_Moveable):
    attn: AttentionWeights
    mlp: MlpWeights

    def to(self, device):
        self.attn.to(device)
        self.mlp.to(device)
        return self


@dataclass
class TargetWeights:
    embed: torch.Tensor  # [vocab, hidden]
    layers: list[LayerWeights]
    final_norm: torch.Tensor  # [hidden]
    lm_head: torch.Tensor  # [hidden, vocab]

    def to(self, device):
        self.embed = self.embed.to(device)
        self.final_norm = self.final_norm.to(device)
        self.lm_head = self.lm_head.to(device)
        for layer in self.layers:
            layer.to(device)
        return self


@dataclass
class DSparkDraftWeights:
    inject_proj: torch.Tensor  # [hidden, head_dim]: target hidden -> draft KV row (pre-norm)
    mask_embed: torch.Tensor  # [hidden]: embedding of the mask token filling the block
    layer: LayerWeights  # its wkv projects the block rows' own K; kv_norm is shared with injection
    final_norm: torch.Tensor

    def to(self, device):
        self.inject_proj = self.inject_proj.to(device)
        self.mask_embed = self.mask_embed.to(device)
        self.final_norm = self.final_norm.to(device)
        self.layer.to(device)
        return self


@dataclass
class MtpDraftWeights:
    inject_proj: torch.Tensor  # [hidden, head_dim]: target hidden -> MTP KV row (pre-norm)
    hidden_norm: torch.Tensor  # [hidden]
    embed_norm: torch.Tensor  # [hidden]
    fuse: torch.Tensor  # [2 * hidden, hidden]: concat(norm(h), norm(embed)) -> hidden
    layer: LayerWeights
    final_norm: torch.Tensor

    def to(self, device):
        for name in ("inject_proj", "hidden_norm", "embed_norm", "fuse", "final_norm"):
            setattr(self, name, getattr(self, name).to(device))
        self.layer.to(device)
        return self


def _layer(gen: torch.Generator, cfg: TinyConfig) -> LayerWeights:
    h, d, nq, m = cfg.hidden, cfg.head_dim, cfg.n_q_heads, cfg.mlp_dim
    attn = AttentionWeights(
        attn_norm=_norm_weight(gen, h),
        # q rows of std ~1.5 against unit-RMS keys: attention is neither flat nor one-hot.
        wq=_normal(gen, h, nq * d, std=1.5 / h**0.5),
        wkv=_normal(gen, h, d, std=1.0 / h**0.5),
        kv_norm=_norm_weight(gen, d),
        wo=_normal(gen, nq * d, h, std=1.0 / (nq * d) ** 0.5),
    )
    mlp = MlpWeights(
        mlp_norm=_norm_weight(gen, h),
        w_gate=_normal(gen, h, m, std=1.0 / h**0.5),
        w_up=_normal(gen, h, m, std=1.0 / h**0.5),
        w_down=_normal(gen, m, h, std=1.0 / m**0.5),
    )
    return LayerWeights(attn, mlp)


def target_weights(cfg: TinyConfig, device: str | torch.device = "cpu") -> TargetWeights:
    gen = torch.Generator().manual_seed(cfg.seed)
    w = TargetWeights(
        embed=_normal(gen, cfg.vocab, cfg.hidden, std=1.0),
        layers=[_layer(gen, cfg) for _ in range(cfg.n_layers)],
        final_norm=_norm_weight(gen, cfg.hidden),
        # Unit-RMS final hidden -> logits of std ~4: wide gaps between the top two.
        lm_head=_normal(gen, cfg.hidden, cfg.vocab, std=4.0 / cfg.hidden**0.5),
    )
    return w.to(device)


def dspark_weights(cfg: TinyConfig, device: str | torch.device = "cpu") -> DSparkDraftWeights:
    gen = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    w = DSparkDraftWeights(
        inject_proj=_normal(gen, cfg.hidden, cfg.head_dim, std=1.0 / cfg.hidden**0.5),
        mask_embed=_normal(gen, cfg.hidden, std=1.0),
        layer=_layer(gen, cfg),
        final_norm=_norm_weight(gen, cfg.hidden),
    )
    return w.to(device)


def mtp_weights(cfg: TinyConfig, device: str | torch.device = "cpu") -> MtpDraftWeights:
    gen = torch.Generator().manual_seed(cfg.seed + 2_000_003)
    w = MtpDraftWeights(
        inject_proj=_normal(gen, cfg.hidden, cfg.head_dim, std=1.0 / cfg.hidden**0.5),
        hidden_norm=_norm_weight(gen, cfg.hidden),
        embed_norm=_norm_weight(gen, cfg.hidden),
        fuse=_normal(gen, 2 * cfg.hidden, cfg.hidden, std=1.0 / (2 * cfg.hidden) ** 0.5),
        layer=_layer(gen, cfg),
        final_norm=_norm_weight(gen, cfg.hidden),
    )
    return w.to(device)
