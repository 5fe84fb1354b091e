"""One end-to-end configuration as a library call: prompts, references, the engine, the verdict.

``run_case(cfg, options)`` makes ``options.batch`` prompts (or takes the
caller's), computes the greedy reference (the reference decoder -- full
recompute, with top-2 margins -- or the non-speculative engine), runs the
:class:`SpecEngine` and compares. Everything the run needs comes in the frozen
:class:`impl.run_options.RunOptions`; margins come back as values in the
result. The CLI is :mod:`impl.e2e`; this module must never import it (nor
``impl.distributed``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from impl.engine.drafting import DraftSource
from impl.engine.engine import SpecEngine
from impl.engine.prompts import make_prompts
from impl.engine.verdict import Verdict, lossless_verdict, margin_for
from impl.model.tiny_config import TinyConfig
from impl.model.weights import target_weights
from impl.run_options import RunOptions
from reference.decoder import greedy_decode_reference

REFERENCES = ("decoder", "plain-engine")
__all__ = ["E2EResult", "ReferenceRun", "make_prompts", "plain_continuations", "reference_continuations", "run_case"]


@dataclass
class ReferenceRun:
    tokens: dict[int, list[int]]  # rid -> greedy continuation
    margins: dict[int, list[float]] = field(default_factory=dict)  # rid -> top-2 logit gap per token (decoder)

    @property
    def all_margins(self) -> list[float]:
        return [m for rid in sorted(self.margins) for m in self.margins[rid]]


@dataclass
class E2EResult:
    outputs: dict[int, list[int]]
    references: dict[int, list[int]]
    margins: list[float]
    engine: SpecEngine
    mismatches: dict[int, int] = field(default_factory=dict)  # rid -> first differing index
    mismatch_margins: dict[int, float] = field(default_factory=dict)  # rid -> reference top-2 margin there

    @property
    def lossless(self) -> bool:
        """Every request's tokens equal the reference's (the verdict ``yes``)."""
        return self.verdict.word == "yes" and set(self.outputs) == set(self.references)

    @property
    def verdict(self) -> Verdict:
        """The one lossless rule (docs/design.md §7.3): yes, near-tie or no."""
        return lossless_verdict(self.mismatches, self.mismatch_margins, margin=margin_for(self.engine.cfg))

    @property
    def full_check(self) -> bool:
        """Every reference token decided by more than the near-tie margin (equality checked everywhere)."""
        return self.min_margin > margin_for(self.engine.cfg)

    @property
    def min_margin(self) -> float:
        return min(self.margins) if self.margins else float("inf")

    @property
    def accept_length(self) -> float:
        return self.engine.stats.avg_accept_length


def reference_continuations(cfg, weights, prompts, max_new: int) -> ReferenceRun:
    """The reference decoder's greedy tokens and per-token top-2 margins, per request."""
    refs = [greedy_decode_reference(weights, cfg, p, max_new) for p in prompts]
    return ReferenceRun({i: r.tokens for i, r in enumerate(refs)}, {i: list(r.margins) for i, r in enumerate(refs)})


def plain_continuations(cfg, weights, prompts, max_new: int, options: RunOptions, device) -> dict[int, list[int]]:
    """Greedy continuations from the engine with spec_algorithm 'none' (one token per step)."""
    from impl.model.target import TargetModel

    plain_options = options.replace(algorithm="none", draft="model", sampling=None, graph=False, checked=False,
                                    device=str(device))
    plain = SpecEngine(cfg, plain_options, num_slots=max(1, len(prompts)), target=TargetModel(cfg, device, weights))
    for i, p in enumerate(prompts):
        plain.add_request(p, max_new, rid=i)
    return plain.run()


def run_case(
    cfg: TinyConfig,
    options: RunOptions,
    *,
    prompts: list[list[int]] | None = None,
    with_reference: bool = True,
    reference: str = "decoder",
    reference_run: ReferenceRun | None = None,
    on_step: Callable[[SpecEngine], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> E2EResult:
    """Run one configuration; ``reference`` = "decoder" (full recompute, reports margins) or
    "plain-engine" (non-speculative batched decode with this engine: fast, for long runs).
    ``reference_run``: a reference already computed for these prompts (at least
    ``max_new_tokens + gamma + 1`` tokens per request), reused instead of recomputed.
    ``on_step(engine)`` is called after every engine step and ``log(text)`` at each phase
    (progress reports)."""
    from impl.model.target import TargetModel
    from impl.platform import default_device

    if reference not in REFERENCES:
        raise ValueError(f"reference must be 'decoder' or 'plain-engine', got {reference!r}")
    device = torch.device(options.device) if options.device is not None else default_device()
    options = options.replace(device=str(device))
    g = options.gamma_for(cfg.gamma)
    max_new = options.max_new_tokens
    prompts = make_prompts(cfg, options.batch, g, options.seed) if prompts is None else prompts
    weights = target_weights(cfg, device)
    ref = ReferenceRun({}) if reference_run is None else reference_run
    if reference_run is None and (with_reference or DraftSource.parse(options.draft).needs_continuation):
        # gamma + 1 extra tokens so an oracle can propose past the last one kept
        if log is not None:
            log(f"reference ({reference}): {len(prompts)} request(s) x {max_new + g + 1} tokens")
        if reference == "decoder":
            ref = reference_continuations(cfg, weights, prompts, max_new + g + 1)
        else:
            ref = ReferenceRun(plain_continuations(cfg, weights, prompts, max_new + g + 1, options, device))
    engine = SpecEngine(cfg, options, num_slots=options.num_slots or max(1, (len(prompts) + 1) // 2),
                        continuations=ref.tokens, target=TargetModel(cfg, device, weights))
    for i, p in enumerate(prompts):
        engine.add_request(p, max_new, rid=i)
    if log is not None:
        log(f"engine: {len(prompts)} request(s) x {max_new} tokens on {engine.spec.num_slots} slot(s)")
    while not engine.idle:
        engine.step()
        if on_step is not None:
            on_step(engine)
    outputs = {rid: r.generated for rid, r in sorted(engine.finished.items())}
    result = E2EResult(outputs, {i: t[:max_new] for i, t in ref.tokens.items()} if with_reference else {},
                       ref.all_margins, engine)
    if with_reference and options.sampling is None:
        for rid, want in result.references.items():
            got = outputs.get(rid, [])
            if got != want:
                idx = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                result.mismatches[rid] = idx
                per_token = ref.margins.get(rid, [])
                if idx < len(per_token):
                    result.mismatch_margins[rid] = per_token[idx]
    return result
