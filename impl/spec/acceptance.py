"""Acceptance accounting (docs/design.md §6): accepted drafts and accepted tokens, per step and averaged.

Per request and verify step: ``accepted_drafts = correct_len`` and
``accepted_tokens = commit_len = correct_len + 1`` (drafts plus the bonus).
The average accept length is tokens per (request, verify step): an always-right
draft of gamma tokens gives gamma + 1; a draft that is never right gives 1.

Accumulation reads counts back to the host (``update`` syncs); call it outside
captured graphs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class AcceptanceStats:
    steps: int = 0  # (request, verify step) pairs counted
    accepted_drafts: int = 0
    accepted_tokens: int = 0
    per_step_tokens: list[float] = field(default_factory=list)  # mean tokens per request, each step

    def update(self, correct_len: torch.Tensor, *, active: torch.Tensor | None = None) -> None:
        """Count one verify step. ``correct_len [bs]``; ``active [bs]`` bool masks padding requests."""
        c = correct_len.to(torch.int64).reshape(-1)
        if active is not None:
            if active.shape != c.shape:
                raise ValueError(f"active must have shape {list(c.shape)}, got {list(active.shape)}")
            c = c[active.to(torch.bool)]
        n = int(c.numel())
        if n == 0:
            return
        if bool((c < 0).any()):
            raise ValueError(f"correct_len must be >= 0, got {c.tolist()}")
        drafts = int(c.sum())
        self.steps += n
        self.accepted_drafts += drafts
        self.accepted_tokens += drafts + n
        self.per_step_tokens.append((drafts + n) / n)

    @property
    def avg_accept_length(self) -> float:
        """Accepted tokens (drafts + bonus) per request per verify step."""
        return self.accepted_tokens / self.steps if self.steps else 0.0

    @property
    def avg_accepted_drafts(self) -> float:
        return self.accepted_drafts / self.steps if self.steps else 0.0

    def summary(self) -> str:
        return (
            f"verify steps x requests: {self.steps}, accepted drafts: {self.accepted_drafts}, "
            f"accepted tokens: {self.accepted_tokens}, avg accept length: {self.avg_accept_length:.3f}"
        )


def expected_accept_length(gamma: int, wrong_prob: float) -> float:
    """Expected tokens per verify step when each draft is independently wrong with
    probability ``wrong_prob``: ``1 + sum_{i=1..gamma} (1 - wrong_prob)^i``."""
    if not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"gamma must be a positive int, got {gamma!r}")
    if not 0.0 <= wrong_prob <= 1.0:
        raise ValueError(f"wrong_prob must be in [0, 1], got {wrong_prob!r}")
    right = 1.0 - wrong_prob
    return 1.0 + sum(right**i for i in range(1, gamma + 1))
