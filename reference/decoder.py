"""Reference greedy decoder for the tiny target model: no cache, full recompute.

Every step re-runs the whole model over the whole sequence with an explicit
sliding-window causal mask (a query at position q sees keys at (q - window, q]).
Math is fp32 (or the ``dtype`` asked for); K is rounded through bf16 exactly
as the KV ring stores it (projection -> bf16 -> RMSNorm + interleaved RoPE in
fp32 -> bf16), so the only difference from the engine is summation order.
It also reports the top-2 logit gap of every decoded token: greedy equality
across summation orders needs those gaps far above rounding noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class ReferenceDecode:
    tokens: list[int]  # the generated tokens (prompt excluded)
    margins: list[float]  # top-1 minus top-2 logit at each generated token

    @property
    def min_margin(self) -> float:
        return min(self.margins) if self.margins else math.inf


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight.to(x.dtype)


def _rope(x: torch.Tensor, positions: torch.Tensor, rope_dim: int, theta: float) -> torch.Tensor:
    """Interleaved RoPE on the trailing rope_dim columns; angles from the same fp32 table."""
    if rope_dim == 0:
        return x
    half = rope_dim // 2
    inv_freq = theta ** (-torch.arange(half, dtype=torch.float64) * 2.0 / rope_dim)
    angles = positions.double().cpu()[:, None] * inv_freq[None, :]
    cos = angles.cos().float().to(x.device, x.dtype)
    sin = angles.sin().float().to(x.device, x.dtype)
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    d = x.shape[-1]
    out = x.clone()
    even = x[..., d - rope_dim :: 2]
    odd = x[..., d - rope_dim + 1 :: 2]
    out[..., d - rope_dim :: 2] = even * cos - odd * sin
    out[..., d - rope_dim + 1 :: 2] = even * sin + odd * cos
    return out


ROUNDINGS = ("nearest", "truncate")


def round_to_bf16(x: torch.Tensor, rounding: str = "nearest") -> torch.Tensor:
    """fp32 -> bf16 by round-to-nearest-even (torch, compiled Triton) or by truncation
    (what the Triton *interpreter* does for ``.to(tl.bfloat16)``: it drops the low 16 bits)."""
    if rounding == "nearest":
        return x.float().to(torch.bfloat16)
    if rounding == "truncate":
        bits = x.float().contiguous().view(torch.int32) & -65536  # keep sign, exponent, 7 mantissa bits
        return bits.view(torch.float32).to(torch.bfloat16)  # exact: already representable
    raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")


def stored_key(x: torch.Tensor, wkv: torch.Tensor, kv_norm: torch.Tensor, positions: torch.Tensor,
               cfg, rounding: str = "nearest") -> torch.Tensor:
    """The K row the ring holds: project, round to bf16, RMSNorm + RoPE in fp32, round to bf16
    (the last rounding as the ring writer does it, see :func:`round_to_bf16`)."""
    kv = (x.float() @ wkv.float()).to(torch.bfloat16).float()
    kv = _rms(kv, kv_norm.float(), cfg.eps)
    kv = _rope(kv, positions, cfg.rope_dim, cfg.rope_theta)
    return round_to_bf16(kv, rounding)


def reference_logits(weights, cfg, tokens: torch.Tensor, dtype=torch.float32,
                     rounding: str = "nearest") -> tuple[torch.Tensor, torch.Tensor]:
    """Logits ``[L, vocab]`` and hidden states ``[L, hidden]`` for one whole sequence."""
    L = tokens.shape[0]
    positions = torch.arange(L, device=tokens.device)
    # mask[q, k]: key k is visible to query q iff q - window < k <= q.
    q_idx, k_idx = positions[:, None], positions[None, :]
    visible = (k_idx <= q_idx) & (k_idx > q_idx - cfg.window)
    h = weights.embed[tokens].to(dtype)
    for layer in weights.layers:
        a = layer.attn
        x = _rms(h, a.attn_norm, cfg.eps)
        q = (x @ a.wq.to(dtype)).view(L, cfg.n_q_heads, cfg.head_dim)
        q = _rope(q, positions, cfg.rope_dim, cfg.rope_theta)
        k = stored_key(x.float(), a.wkv, a.kv_norm, positions, cfg, rounding).to(dtype)  # [L, D], K = V
        scores = torch.einsum("qhd,kd->hqk", q, k) / math.sqrt(cfg.head_dim)
        scores = scores.masked_fill(~visible[None], float("-inf"))
        out = torch.einsum("hqk,kd->qhd", torch.softmax(scores, dim=-1), k).reshape(L, -1)
        h = h + out @ a.wo.to(dtype)
        m = layer.mlp
        x = _rms(h, m.mlp_norm, cfg.eps)
        gate = x @ m.w_gate.to(dtype)
        h = h + (gate * torch.sigmoid(gate) * (x @ m.w_up.to(dtype))) @ m.w_down.to(dtype)
    logits = _rms(h, weights.final_norm, cfg.eps) @ weights.lm_head.to(dtype)
    return logits, h


def greedy_decode_reference(weights, cfg, prompt, max_new_tokens: int, dtype=torch.float32,
                            rounding: str = "nearest") -> ReferenceDecode:
    """Greedy continuation of ``prompt`` (list of ints or 1-D tensor), recomputed from scratch per token.

    ``rounding``: how K is rounded to bf16; the ring writer rounds to nearest even on
    every backend (the Triton kernel does it explicitly, so the interpreter agrees).
    """
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    device = weights.embed.device
    seq = torch.as_tensor(list(prompt) if not isinstance(prompt, torch.Tensor) else prompt.tolist(),
                          dtype=torch.int64, device=device)
    if seq.dim() != 1 or seq.numel() == 0:
        raise ValueError("prompt must be a non-empty 1-D sequence of token ids")
    out, margins = [], []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            logits, _ = reference_logits(weights, cfg, seq, dtype, rounding)
            top2 = torch.topk(logits[-1].double(), 2).values
            token = int(torch.argmax(logits[-1]))
            margins.append(float(top2[0] - top2[1]))
            out.append(token)
            seq = torch.cat([seq, seq.new_tensor([token])])
    return ReferenceDecode(out, margins)
