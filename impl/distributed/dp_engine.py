"""Data-parallel attention + tensor-parallel MLP over the single-rank ``SpecEngine``.

Each rank runs its own :class:`impl.engine.SpecEngine` -- its own requests,
slots, target/draft pools, injector and per-rank verify metadata -- on the
requests ``i`` with ``i % world_size == rank`` (round robin by request index).
Attention, pools and the LM head are per rank and replicated: the LM head is
*replicated* (every rank holds the full ``[hidden, vocab]`` matrix and scores
its own rows), so sampling and verify stay local. Only the MLPs are split
(:class:`TensorParallelMlp`, target layers and the draft's layer alike).

Lock step: every MLP call is collective, so all ranks must issue the same
forwards each step. ``SpecEngine.step`` asks this object before its prefill
and its decode phase whether any rank has work (``agree``); a rank without
work then runs the phase's MLP calls on zero rows (``idle``): prefill = one
call per target layer; decode = the draft's calls (DSpark: one block pass;
MTP: gamma chain steps) then one per target layer. The loop runs while any
rank has work (a vote at the top of each step).

An exception on any rank becomes a :class:`RankFailure` on every rank at the
next control exchange (see :mod:`impl.distributed.lockstep`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed

from impl.distributed.lockstep import FaultPlan, Lockstep, RankFailure
from impl.distributed.tp_mlp import TensorParallelMlp
from impl.engine.engine import SpecEngine
from impl.model.target import TargetModel
from impl.model.tiny_config import TinyConfig
from impl.model.weights import target_weights
from impl.run_options import RunOptions


def requests_of_rank(num_requests: int, rank: int, world_size: int) -> list[int]:
    """Round-robin split: request ``i`` belongs to rank ``i % world_size``."""
    return [i for i in range(num_requests) if i % world_size == rank]


@dataclass
class RankResult:
    rank: int
    outputs: dict[int, list[int]]  # rid -> generated tokens
    accept_lens: dict[int, list[int]]  # rid -> tokens committed per verify step
    accepted_tokens: int
    verify_steps: int  # (request, verify step) pairs on this rank
    engine_steps: int  # lock-step iterations (the same on every rank)
    busy_steps: int  # steps in which this rank had a prefill or a decode of its own
    idle_phases: int  # phases run with zero tokens for the other ranks

    @property
    def accept_length(self) -> float:
        return self.accepted_tokens / self.verify_steps if self.verify_steps else 0.0


class DpEngine:
    """One rank of a DP-attention / TP-MLP run (call inside an initialised process group)."""

    def __init__(self, cfg: TinyConfig, options: RunOptions, *, fault: FaultPlan | None = None,
                 num_slots: int | None = None, continuations: dict[int, list[int]] | None = None):
        device = torch.device(options.device or "cpu")
        self.lockstep = Lockstep(device, fault)
        self.rank, self.world_size = self.lockstep.rank, self.lockstep.world_size
        weights = target_weights(cfg, device)  # the full single-rank weights, same seed
        target = TargetModel(cfg, device, weights)
        self.engine = SpecEngine(cfg, options, num_slots=num_slots, continuations=continuations, target=target,
                                 lockstep=self)
        target.mlps = [TensorParallelMlp(layer.mlp, cfg.eps, self.lockstep) for layer in weights.layers]
        if self.engine.draft is not None:
            self.engine.draft.mlp = TensorParallelMlp(self.engine.draft.w.layer.mlp, cfg.eps, self.lockstep)
        self.idle_phases = 0

    def add_requests(self, prompts: list[list[int]], max_new_tokens: int) -> list[int]:
        mine = requests_of_rank(len(prompts), self.rank, self.world_size)
        for i in mine:
            self.engine.add_request(prompts[i], max_new_tokens, rid=i)
        return mine

    # ---- the SpecEngine lockstep hooks ----
    def agree(self, phase: str, local: bool) -> bool:
        return self.lockstep.any(phase, local)

    def idle(self, phase: str) -> None:
        eng = self.engine
        empty = torch.zeros(0, eng.cfg.hidden, device=eng.device)
        calls = []
        if phase == "decode" and eng.gamma and eng.draft is not None:
            calls += [eng.draft.mlp] * (1 if eng.algorithm == "dspark" else eng.gamma)
        calls += eng.target.mlps  # prefill and verify: one target forward
        with torch.no_grad():
            for mlp in calls:
                mlp(empty)
        self.idle_phases += 1

    # ---- the loop ----
    def run(self) -> RankResult:
        eng = self.engine
        busy = 0
        try:
            while self.lockstep.any("step", not eng.idle):
                self.lockstep.begin_step(eng.step_index)
                record = eng.step()
                busy += bool(record.joined or record.verified)
        except (RankFailure, KeyboardInterrupt, torch.distributed.DistError):
            raise  # already every rank's failure, or the process group itself is broken
        except Exception as exc:  # this rank failed: make every rank fail, naming it
            self.lockstep.report_failure(exc)
        outputs = {rid: r.generated for rid, r in sorted(eng.finished.items())}
        return RankResult(
            rank=self.rank, outputs=outputs,
            accept_lens={rid: r.accept_lens for rid, r in sorted(eng.finished.items())},
            accepted_tokens=eng.stats.accepted_tokens, verify_steps=eng.stats.steps,
            engine_steps=eng.step_index, busy_steps=busy, idle_phases=self.idle_phases,
        )
