"""Sizes of the tiny DeepSeek-V4-like model used end to end (docs/design.md §7).

``TinyConfig`` holds the model's own sizes; ``spec_config(gamma, num_slots)``
builds the :class:`impl.config.SpecConfig` from them, so window / head_dim /
rope_dim are stated once. Two presets: ``cpu_small()`` for CPU CI (Triton
interpreter) and ``dsv4_geometry()`` for GPU runs with DeepSeek-V4's KV row
geometry (head_dim 512 = 448 nope + 64 rope, window 128).
"""
from __future__ import annotations

from dataclasses import dataclass

from impl.config import SpecConfig


@dataclass(frozen=True)
class TinyConfig:
    vocab: int = 64
    hidden: int = 64
    n_q_heads: int = 2
    head_dim: int = 32
    rope_dim: int = 8
    window: int = 16
    n_layers: int = 2
    mlp_dim: int = 128
    seed: int = 0
    rope_theta: float = 10000.0
    eps: float = 1e-6
    max_pos: int = 4096  # rows of the cos/sin tables
    gamma: int = 3  # default block size for this preset

    def __post_init__(self) -> None:
        for name in ("vocab", "hidden", "n_q_heads", "head_dim", "window", "n_layers", "mlp_dim", "max_pos"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TinyConfig.{name} must be a positive int, got {value!r}")
        if self.rope_dim % 2 or not 0 <= self.rope_dim <= self.head_dim:
            raise ValueError(
                f"TinyConfig.rope_dim must be even and in [0, head_dim={self.head_dim}], got {self.rope_dim}"
            )
        if self.vocab < 3:
            raise ValueError("TinyConfig.vocab must be >= 3 (the noisy oracle needs a wrong token)")

    def spec_config(self, gamma: int | None = None, num_slots: int = 4, capture_batch_sizes=(1, 2, 4, 8)) -> SpecConfig:
        return SpecConfig(
            gamma=self.gamma if gamma is None else gamma,
            window=self.window,
            head_dim=self.head_dim,
            rope_dim=self.rope_dim,
            num_slots=num_slots,
            capture_batch_sizes=tuple(capture_batch_sizes),
        )


def cpu_small(seed: int = 0) -> TinyConfig:
    """Small enough for the Triton interpreter: 2 layers, window 16, head_dim 32."""
    return TinyConfig(vocab=64, hidden=64, n_q_heads=2, head_dim=32, rope_dim=8, window=16,
                      n_layers=2, mlp_dim=128, seed=seed, max_pos=1024, gamma=3)


def dsv4_geometry(seed: int = 0) -> TinyConfig:
    """DeepSeek-V4's KV geometry (head_dim 512, rope_dim 64, window 128, gamma 5), few layers."""
    return TinyConfig(vocab=512, hidden=256, n_q_heads=4, head_dim=512, rope_dim=64, window=128,
                      n_layers=3, mlp_dim=512, seed=seed, max_pos=4096, gamma=5)


PRESETS = {"cpu-small": cpu_small, "dsv4": dsv4_geometry}


def preset(name: str, seed: int = 0) -> TinyConfig:
    try:
        return PRESETS[name](seed)
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}") from None
