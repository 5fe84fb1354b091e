"""How the ring writer (``fused_norm_rope_``) rounds fp32 to bf16 on this backend.

Compiled Triton and torch round to nearest even; the Triton *interpreter*
(CPU CI) truncates, whatever ``fp_downcast_rounding`` says. The reference
decoder must round K exactly as the ring stores it, so it asks this probe,
which runs the real writer once on fixed data and compares with both modes.
"""
from __future__ import annotations

import functools

import torch

from reference.decoder import _rms, _rope, round_to_bf16


@functools.lru_cache(maxsize=None)
def _probe(backend: str, device: str) -> str:
    from impl.kernels import fused_norm_rope_

    gen = torch.Generator().manual_seed(1234)
    head_dim, rope_dim, eps = 32, 8, 1e-6
    kv = torch.randn(16, head_dim, generator=gen).to(torch.bfloat16)
    weight = 1.0 + 0.1 * torch.randn(head_dim, generator=gen)
    positions = torch.arange(16, dtype=torch.int64) * 7
    half = rope_dim // 2
    angles = positions.double()[:, None] * (10000.0 ** (-torch.arange(half, dtype=torch.float64) * 2.0 / rope_dim))
    cos, sin = angles.cos().float(), angles.sin().float()
    got = kv.to(device).clone()
    fused_norm_rope_(got, weight.to(device), eps, cos.to(device), sin.to(device), positions.to(device), rope_dim=rope_dim)
    exact = _rope(_rms(kv.float(), weight, eps), positions, rope_dim, 10000.0)
    misses = {mode: int((round_to_bf16(exact, mode) != got.cpu()).sum()) for mode in ("nearest", "truncate")}
    return min(misses, key=misses.get)


def ring_rounding(device: str | torch.device = "cpu") -> str:
    """"nearest" or "truncate": how K rows are rounded when the pool writer stores them."""
    from impl.platform import kernel_backend

    return _probe(kernel_backend(), str(torch.device(device)))
