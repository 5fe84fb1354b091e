"""Benchmark of the whole verify-step write (metadata -> commit-inject layout ->
norm+RoPE -> scatter into the ring) for one batch, eager and as one CUDA graph."""
from __future__ import annotations

import torch

from impl.bench import timing
from impl.config import SpecConfig
from impl.pools.unified import UnifiedKVPool
from impl.sync_detector import count_syncs
from impl.verify_step import VerifyStep


def _rope_tables(max_pos: int, rope_dim: int, device: str):
    inv = 1.0 / (10000 ** (torch.arange(0, rope_dim // 2, dtype=torch.float64) / (rope_dim // 2)))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float().to(device), ang.sin().float().to(device)


def measure_verify_step(batch: int = 64, gamma: int = 5, device: str = "cuda") -> list[dict]:
    cfg = SpecConfig(gamma=gamma, num_slots=batch, capture_batch_sizes=(batch,))
    pool = UnifiedKVPool(cfg, num_layers=1, device=device)
    gen = torch.Generator().manual_seed(1)
    cos, sin = _rope_tables(8192, cfg.rope_dim, device)
    weight = (1 + 0.1 * torch.randn(cfg.head_dim, generator=gen)).to(device)
    step = VerifyStep(pool, batch_size=batch, norm_weight=weight, eps=1e-6, cos=cos, sin=sin,
                      platform="cuda", algorithm="dspark")
    rows = batch * cfg.num_draft_tokens
    step.load(
        req_pool_indices=torch.randperm(batch, generator=gen).to(device),
        prefix_lens=torch.randint(0, 4000, (batch,), generator=gen).to(device),
        commit_lens=torch.randint(0, cfg.num_draft_tokens + 1, (batch,), generator=gen).to(device),
        kv=torch.randn(rows, cfg.head_dim, generator=gen).to(device=device, dtype=torch.bfloat16),
    )
    with count_syncs() as log:
        step.run()
    out = []
    eager_us = timing.median_us(step.run)
    out.append({"op": "verify_step", "shape": f"bs{batch} gamma{gamma} D{cfg.head_dim}", "rows": rows,
                "variant": "eager", "us": eager_us, "host_syncs": log.count})
    if device == "cuda":
        step.capture()
        graph_us = timing.median_us(step.replay)
        out.append({"op": "verify_step", "shape": f"bs{batch} gamma{gamma} D{cfg.head_dim}", "rows": rows,
                    "variant": "one CUDA graph", "us": graph_us, "host_syncs": log.count})
    return out
