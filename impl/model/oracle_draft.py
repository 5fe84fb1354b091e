"""Drafts with controlled acceptance (docs/design.md §7): oracle, noisy oracle, random.

They know the target's greedy continuation of each request (from the
reference decoder, or any lossless decode) and propose from it:

* ``OracleDraft``: the true next gamma tokens -> every draft is accepted, so
  each verify step yields gamma + 1 tokens.
* ``NoisyOracleDraft(q)``: each of the gamma tokens is independently replaced,
  with probability q, by a *different* token (uniform over the other vocab-1),
  so it is certainly rejected. The number of leading correct drafts C has
  P(C >= j) = (1-q)^j for j <= gamma, so the expected tokens per step is
  E = 1 + sum_{j=1..gamma} (1-q)^j = (1 - (1-q)^(gamma+1)) / q   (q > 0):
  ``impl.spec.acceptance.expected_accept_length(gamma, q)``.
* ``RandomDraft``: uniform random tokens (output must still be lossless).

Randomness comes from a seeded ``torch.Generator`` on the CPU, so runs repeat.
"""
from __future__ import annotations

import torch


class OracleDraft:
    """Proposes the known continuation; ``continuations[rid]`` are the generated tokens."""

    def __init__(self, continuations: dict[int, list[int]], vocab: int):
        self.continuations = continuations
        self.vocab = vocab

    def true_tokens(self, rid: int, generated: int, gamma: int) -> list[int]:
        cont = self.continuations.get(rid)
        if cont is None:
            raise ValueError(f"oracle draft has no continuation for request {rid}")
        nxt = cont[generated : generated + gamma]
        if len(nxt) < gamma:  # past the known continuation: pad with token 0 (may be rejected)
            nxt = nxt + [0] * (gamma - len(nxt))
        return nxt

    def propose(self, rids: list[int], generated: list[int], gamma: int) -> torch.Tensor:
        """Draft tokens ``[bs, gamma]`` (int64, CPU) for requests that have ``generated`` tokens so far."""
        return torch.tensor([self.true_tokens(r, g, gamma) for r, g in zip(rids, generated)], dtype=torch.int64).view(
            len(rids), gamma
        )


class NoisyOracleDraft(OracleDraft):
    def __init__(self, continuations: dict[int, list[int]], vocab: int, q: float, seed: int = 0):
        super().__init__(continuations, vocab)
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"noisy oracle error probability q must be in [0, 1], got {q}")
        self.q = q
        self.gen = torch.Generator().manual_seed(seed)

    def propose(self, rids, generated, gamma):
        true = super().propose(rids, generated, gamma)
        wrong = torch.rand(true.shape, generator=self.gen) < self.q
        shift = torch.randint(1, self.vocab, true.shape, generator=self.gen)  # never 0: certainly different
        return torch.where(wrong, (true + shift) % self.vocab, true)


class RandomDraft:
    def __init__(self, vocab: int, seed: int = 0):
        self.vocab = vocab
        self.gen = torch.Generator().manual_seed(seed)

    def propose(self, rids, generated, gamma):
        return torch.randint(0, self.vocab, (len(rids), gamma), generator=self.gen)
