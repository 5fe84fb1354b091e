"""MTP/EAGLE chain drafts: the chain loop the engine's MTP draft runs (docs/design.md §6.4, §7.1).

A chain draft makes ``k = gamma`` sequential steps; step ``j`` takes the
previous hidden state and the newest token and predicts the next token, which
``pick`` chooses from the step's logits (argmax, or the engine's sampler) and
feeds to step ``j + 1``. :class:`impl.model.mtp_draft.MtpDraft` supplies the
step (one fused attention + MLP layer over its own small KV); the engine
(:mod:`impl.engine.engine`) then verifies ``gamma + 1`` rows per request on the
same verify / commit / inject contract as DSpark, its verify metadata built
with ``algorithm="mtp"`` (on HIP the synced path, docs/design.md §4.3).
"""
from __future__ import annotations

from typing import Callable

import torch

# step(j, hidden [bs, H], token [bs]) -> (logits [bs, V], next hidden [bs, H])
ChainStep = Callable[[int, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
# picks the next token from logits [bs, V]: argmax or a sampler
Pick = Callable[[torch.Tensor], torch.Tensor]


def argmax_pick(logits: torch.Tensor) -> torch.Tensor:
    return torch.argmax(logits, dim=-1)


def chain_draft(
    step: ChainStep, hidden: torch.Tensor, token: torch.Tensor, k: int, *, pick: Pick = argmax_pick
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``k`` chain steps from ``hidden`` and ``token`` (the anchor).

    Returns (draft_tokens ``[bs, k]``, draft_logits ``[bs, k, V]``): step ``j``'s
    logits and the token ``pick`` chose from them.
    """
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if not callable(step) or not callable(pick):
        raise TypeError(f"step and pick must be callable, got {type(step).__name__} and {type(pick).__name__}")
    tokens, logits_all = [], []
    for j in range(k):
        logits, hidden = step(j, hidden, token)
        token = pick(logits)
        tokens.append(token)
        logits_all.append(logits)
    return torch.stack(tokens, dim=1), torch.stack(logits_all, dim=1)
