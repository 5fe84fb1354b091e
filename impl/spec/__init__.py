"""DSpark / MTP components (docs/design.md §6): injector, greedy and sampling verify, MTP chain
drafts, acceptance accounting."""
from __future__ import annotations

from impl.spec.acceptance import AcceptanceStats, expected_accept_length
from impl.spec.greedy_verify import VerifyResult, greedy_verify
from impl.spec.injector import TargetHiddenInjector
from impl.spec.mtp import argmax_pick, chain_draft
from impl.spec.sampling_verify import sample_from, sampling_probs, sampling_verify, sampling_verify_probs

__all__ = [
    "AcceptanceStats",
    "expected_accept_length",
    "VerifyResult",
    "greedy_verify",
    "TargetHiddenInjector",
    "argmax_pick",
    "chain_draft",
    "sample_from",
    "sampling_probs",
    "sampling_verify",
    "sampling_verify_probs",
]
