"""Where the gamma draft tokens of a step come from.

The draft *model* (DSpark block or MTP chain) always runs when an algorithm is
on -- so its reads of the injected KV are exercised every step -- and the
``source`` decides which tokens are proposed: the model's own (argmax or
samples), or an oracle / noisy oracle / random override (docs/design.md §7).

Parsing must stay torch-free (the CLIs validate ``--draft`` with it before
importing torch); the draft classes are imported when a source is built.
"""
from __future__ import annotations

from dataclasses import dataclass

SOURCES = ("model", "oracle", "noisy", "random")


@dataclass(frozen=True)
class DraftSource:
    kind: str = "model"
    q: float = 0.0  # noisy oracle: probability that each draft token is wrong

    @classmethod
    def parse(cls, text: str) -> "DraftSource":
        """``model`` | ``oracle`` | ``random`` | ``noisy:Q`` (Q in [0, 1])."""
        name, _, arg = text.partition(":")
        if name not in SOURCES:
            raise ValueError(f"draft source must be one of {list(SOURCES)} (noisy as noisy:Q), got {text!r}")
        if name == "noisy":
            try:
                q = float(arg)
            except ValueError:
                raise ValueError(f"noisy draft needs an error probability, e.g. noisy:0.3; got {text!r}") from None
            if not 0.0 <= q <= 1.0:
                raise ValueError(f"noisy draft error probability must be in [0, 1], got {q}")
            return cls("noisy", q)
        if arg:
            raise ValueError(f"draft source {name!r} takes no argument, got {text!r}")
        return cls(name)

    @property
    def needs_continuation(self) -> bool:
        return self.kind in ("oracle", "noisy")

    def build(self, continuations, vocab: int, seed: int):
        from impl.model.oracle_draft import NoisyOracleDraft, OracleDraft, RandomDraft

        if self.kind == "oracle":
            return OracleDraft(continuations, vocab)
        if self.kind == "noisy":
            return NoisyOracleDraft(continuations, vocab, self.q, seed=seed)
        if self.kind == "random":
            return RandomDraft(vocab, seed=seed)
        return None
