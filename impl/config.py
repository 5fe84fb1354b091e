"""One config object, the single source of truth for gamma (docs/design.md §1-§2).

Everything derived from gamma -- rows verified per request for each role, the
ring size, the graph token tiers -- is a property computed on demand, never a
second stored copy that could drift.
"""
from __future__ import annotations

from dataclasses import dataclass

ROLES = ("target", "draft", "server")


@dataclass(frozen=True)
class SpecConfig:
    gamma: int = 5
    window: int = 128
    head_dim: int = 512
    rope_dim: int = 64
    num_slots: int = 8
    capture_batch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    ring_override: int | None = None  # None: the minimal safe ring, window + gamma

    def __post_init__(self) -> None:
        for name in ("gamma", "window", "head_dim", "num_slots"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SpecConfig.{name} must be a positive int, got {value!r}")
        if not isinstance(self.rope_dim, int) or self.rope_dim < 0 or self.rope_dim % 2:
            raise ValueError(f"SpecConfig.rope_dim must be a non-negative even int, got {self.rope_dim!r}")
        if self.rope_dim > self.head_dim:
            raise ValueError(
                f"SpecConfig.rope_dim ({self.rope_dim}) must not exceed head_dim ({self.head_dim})"
            )
        if not self.capture_batch_sizes or any(
            not isinstance(b, int) or b < 1 for b in self.capture_batch_sizes
        ):
            raise ValueError(
                f"SpecConfig.capture_batch_sizes must be positive ints, got {self.capture_batch_sizes!r}"
            )
        if self.ring_override is not None:
            need = self.window + self.num_draft_tokens - 1
            if self.ring_override < need:
                raise ValueError(
                    f"SpecConfig.ring_override={self.ring_override} is too small: a ring must hold "
                    f"window + num_draft_tokens - 1 = {self.window} + {self.num_draft_tokens} - 1 = {need} "
                    "rows, or writes of this step overwrite positions its queries still read"
                )

    # ---- derived values (never stored) ----
    @property
    def num_draft_tokens(self) -> int:
        """Rows the target verifies per request: the anchor plus gamma drafts."""
        return self.gamma + 1

    @property
    def ring(self) -> int:
        return self.window + self.gamma if self.ring_override is None else self.ring_override

    def verify_rows(self, role: str) -> int:
        """Rows verified per request by ``role``: target gamma+1, DSpark draft worker gamma,
        server-style arguments keep the gamma+1 convention."""
        if role in ("target", "server"):
            return self.gamma + 1
        if role == "draft":
            return self.gamma
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")

    @property
    def graph_token_tiers(self) -> tuple[int, ...]:
        """Captured CUDA-graph token counts for target verify, ascending."""
        return tuple(sorted({b * self.num_draft_tokens for b in self.capture_batch_sizes}))

    def ring_rows(self) -> int:
        return self.num_slots * self.ring
