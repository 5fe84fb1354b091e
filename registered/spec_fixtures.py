"""Shared inputs for the pool / metadata / DSpark component tests (no tests here)."""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from impl.config import SpecConfig

NORM_ROPE_TOL = dict(atol=2**-6, rtol=2**-6)  # bf16 kernel (fp32 math) vs float64 oracle


def small_config(gamma: int = 3, **kw) -> SpecConfig:
    base = dict(gamma=gamma, window=8, head_dim=16, rope_dim=8, num_slots=4, capture_batch_sizes=(1, 2, 4))
    base.update(kw)
    return SpecConfig(**base)


def rope_tables(max_pos: int, rope_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 cos/sin ``[max_pos, rope_dim // 2]`` for interleaved pairs."""
    inv = theta ** (-torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim)
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def norm_weights(n: int, head_dim: int, gen: torch.Generator) -> list[torch.Tensor]:
    return [(1 + 0.25 * torch.randn(head_dim, generator=gen)).to(torch.bfloat16) for _ in range(n)]


def poison_(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Fill with random bit patterns so untouched rows are recognisable (no NaN: bitwise compares)."""
    t.copy_((torch.randn(t.shape, generator=gen) * 100).to(t.dtype))
    return t


class OutputSizeAudit(TorchDispatchMode):
    """Records every repeat_interleave given ``output_size`` with the true sum of its repeats
    (invariant 12). Reading the sum syncs; use only in tests."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "overloadpacket", None) is torch.ops.aten.repeat_interleave:
            size = kwargs.get("output_size")
            if size is None and func is torch.ops.aten.repeat_interleave.self_Tensor and len(args) > 3:
                size = args[3]
            if size is None and func is torch.ops.aten.repeat_interleave.Tensor and len(args) > 1:
                size = args[1]
            repeats = args[1] if func is torch.ops.aten.repeat_interleave.self_Tensor else args[0]
            if size is not None and isinstance(repeats, torch.Tensor):
                self.calls.append((int(size), int(repeats.sum())))
        return func(*args, **kwargs)


def random_verify_batch(gen, cfg, bs):
    """Static-shape inputs of one VerifyStep batch (distinct slots, random prefixes and commits)."""
    stride = cfg.verify_rows("target")
    return dict(
        req_pool_indices=torch.randperm(cfg.num_slots, generator=gen)[:bs],
        prefix_lens=torch.randint(0, 60, (bs,), generator=gen),
        commit_lens=torch.randint(0, stride + 1, (bs,), generator=gen),
        kv=torch.randn(bs * stride, cfg.head_dim, generator=gen).to(torch.bfloat16),
    )
