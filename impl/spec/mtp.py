"""MTP/EAGLE chain drafts on the same verify / commit contract as DSpark (docs/design.md §6, §7).

A chain draft makes ``k = gamma`` sequential steps; each takes the previous
hidden state and the newest token and predicts the next token. The target then
verifies ``gamma + 1`` rows per request exactly as for DSpark (greedy or
sampling verify), and commits ``commit_len`` tokens.

Metadata for the target verify is built with ``algorithm="mtp"``: on HIP the
sync policy keeps the ``repeat_interleave`` sync for MTP (the field fault), so
this path is the synced one there; on CUDA it takes the shortcut when exact.
"""
from __future__ import annotations

from typing import Callable

import torch

from impl.config import SpecConfig
from impl.prefill_metadata import TokenMetadata
from impl.spec.greedy_verify import VerifyResult, greedy_verify
from impl.spec.sampling_verify import sample_from, sampling_probs, sampling_verify
from impl.verify_metadata import RaggedVerifyLayout, build_verify_metadata

# step(hidden [bs, H], token [bs]) -> (logits [bs, V], next hidden [bs, H])
ChainStep = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def chain_draft(
    step: ChainStep,
    hidden: torch.Tensor,
    token: torch.Tensor,
    k: int,
    *,
    temperature: float | None = None,
    top_k: int | torch.Tensor | None = None,
    top_p: float | torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``k`` chain steps. Greedy (argmax) when ``temperature`` is None, else sampled
    from the processed draft distribution. Returns (draft_tokens [bs, k], draft_logits [bs, k, V])."""
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    tokens, logits_all = [], []
    for _ in range(k):
        logits, hidden = step(hidden, token)
        if temperature is None:
            token = logits.argmax(dim=-1)
        else:
            probs = sampling_probs(logits.unsqueeze(1), temperature=temperature, top_k=top_k, top_p=top_p)
            u = torch.rand((logits.shape[0],), generator=generator, device=logits.device, dtype=torch.float64)
            token = sample_from(probs.squeeze(1), u)
        tokens.append(token)
        logits_all.append(logits)
    return torch.stack(tokens, dim=1), torch.stack(logits_all, dim=1)


class MTPVerifier:
    """Target verify for MTP/EAGLE chain drafts (gamma drafts, gamma + 1 verified rows)."""

    algorithm = "mtp"

    def __init__(self, config: SpecConfig, *, platform: str | None = None) -> None:
        if not isinstance(config, SpecConfig):
            raise TypeError(f"config must be a SpecConfig, got {type(config).__name__}")
        self.config = config
        self.platform = platform

    @property
    def k(self) -> int:
        return self.config.gamma

    def metadata(
        self, seq_lens: torch.Tensor, req_pool_indices: torch.Tensor, *, ragged: RaggedVerifyLayout | None = None
    ) -> TokenMetadata:
        return build_verify_metadata(
            self.config, seq_lens=seq_lens, req_pool_indices=req_pool_indices, role="target",
            ragged=ragged, platform=self.platform, algorithm=self.algorithm,
        )

    def _check_k(self, draft_tokens: torch.Tensor) -> None:
        if draft_tokens.dim() != 2 or draft_tokens.shape[1] != self.k:
            raise ValueError(
                f"draft_tokens must be [bs, {self.k}] (k = gamma = {self.k} chain steps), got {list(draft_tokens.shape)}"
            )

    def verify_greedy(self, target, draft_tokens, *, prefix_lens, verify_lens=None) -> VerifyResult:
        self._check_k(draft_tokens)
        return greedy_verify(target, draft_tokens, prefix_lens=prefix_lens, verify_lens=verify_lens)

    def verify_sampling(self, target_logits, draft_logits, draft_tokens, *, prefix_lens, **kw) -> VerifyResult:
        self._check_k(draft_tokens)
        return sampling_verify(target_logits, draft_logits, draft_tokens, prefix_lens=prefix_lens, **kw)
