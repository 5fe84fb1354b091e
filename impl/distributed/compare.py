"""What a distributed run must produce, and the table that compares it.

For a :class:`DistCase`, the expected tokens come from two independent
sources run in this (the launcher's) process: the single-rank ``SpecEngine``
on the same prompts and weights, and the reference decoder (full recompute,
no cache). A distributed run is right when its merged outputs equal both.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from impl.distributed.dp_engine import RankResult
from impl.distributed.launch import DistCase, merged_outputs


@dataclass
class Expected:
    single: dict[int, list[int]]  # single-rank SpecEngine
    reference: dict[int, list[int]]  # reference decoder
    min_margin: float  # smallest top-2 logit gap the reference saw
    single_accept_length: float


def prepare(case: DistCase, device: str | torch.device = "cpu") -> DistCase:
    """Fill ``case.continuations`` when its draft source (oracle / noisy) needs them."""
    from impl.engine.drafting import DraftSource
    from impl.engine.run import reference_continuations
    from impl.model.weights import target_weights

    if DraftSource.parse(case.options.draft).needs_continuation and not case.continuations:
        weights = target_weights(case.cfg, device)
        case.continuations = reference_continuations(case.cfg, weights, case.prompts,
                                                     case.max_new_tokens + case.gamma + 1).tokens
    return case


def expected(case: DistCase, device: str | torch.device = "cpu") -> Expected:
    from impl.engine.run import run_case

    options = case.options.replace(num_slots=max(1, len(case.prompts)), device=str(device), checked=False,
                                   batch=len(case.prompts))
    res = run_case(case.cfg, options, prompts=case.prompts)
    return Expected(res.outputs, res.references, res.min_margin, res.accept_length)


def describe(case: DistCase) -> str:
    o = case.options
    return f"{o.algorithm}/{o.kv_backend} g={case.gamma} {o.draft} batch={len(case.prompts)}"


def table(cases: list[DistCase], results: list[list[RankResult]], expectations: list[Expected]) -> tuple[str, bool]:
    """A short Markdown-ish table, and whether every case matched both expectations."""
    lines = ["| case | ranks | idle phases per rank | accept len per rank | == single-rank | == reference "
             "| min margin |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    all_ok = True
    for case, per_rank, exp in zip(cases, results, expectations):
        got = merged_outputs(per_rank)
        same_single, same_ref = got == exp.single, got == exp.reference
        all_ok &= same_single and same_ref
        lines.append(
            f"| {describe(case)} | {len(per_rank)} | {' '.join(str(r.idle_phases) for r in per_rank)} | "
            f"{' '.join(f'{r.accept_length:.2f}' for r in per_rank)} | {'yes' if same_single else 'NO'} | "
            f"{'yes' if same_ref else 'NO'} | {exp.min_margin:.3g} |"
        )
    return "\n".join(lines), all_ok
