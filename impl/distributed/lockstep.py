"""The control channel that keeps data-parallel ranks in lock step and fails them together.

Every collective-bearing point of a step (the step's "has work" vote, the
prefill and decode votes, the row-count exchange before each tensor-parallel
MLP) is one *control exchange*: an ``all_gather`` of a small int64 vector
``[status, seq, kind, value]`` per rank. It carries

* ``value``: the rank's vote or row count (what the caller asked to share);
* ``status``: 0, or 1 when this rank raised (``report_failure``) -- every
  rank looks at every status before it issues the next collective, so a rank
  that raises mid-step turns into a :class:`RankFailure` on all ranks at the
  very next control point instead of a hang;
* ``seq`` / ``kind``: the running count and type of control points; ranks that
  disagree have left lock step (a bug), reported as :class:`LockstepError`.

A rank that fails between a control exchange and the tensor collective right
after it (inside one MLP call) cannot be caught this way; the process group's
``timeout`` bounds that case. A rank whose process dies is caught by the
launcher (``torch.multiprocessing.spawn`` ends the others).

Fault injection for tests: ``FaultPlan(rank, step, mlp_call, mode)`` makes
``rank`` misbehave at the ``mlp_call``-th MLP call of engine step ``step`` -- in
the middle of a forward, after other ranks have entered it: ``raise`` an
exception (reported through the control channel), ``exit`` the process at
once (the launcher notices), or ``hang`` (the others' collectives time out).
"""
from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist

from impl.distributed.faults import FAULT_ENV, FAULT_MODES, FaultPlan, InjectedFault  # noqa: F401 (re-exported)

OK, FAILED = 0, 1
KINDS = {"step": 1, "prefill": 2, "decode": 3, "mlp": 4}
KIND_NAMES = {v: k for k, v in KINDS.items()}


class RankFailure(RuntimeError):
    """A rank raised; raised on every rank, naming the one(s) that failed."""

    def __init__(self, failed_ranks: list[int], step: int, messages: dict[int, str]):
        self.failed_ranks = failed_ranks
        self.step = step
        self.messages = messages
        detail = "; ".join(f"rank {r}: {messages.get(r, '?')}" for r in failed_ranks)
        super().__init__(f"rank {', '.join(map(str, failed_ranks))} failed at step {step} ({detail})")


class LockstepError(RuntimeError):
    """Ranks reached different control points: they no longer issue the same collectives."""


class Lockstep:
    """Control exchanges over the default process group (see the module docstring)."""

    def __init__(self, device: torch.device, fault: FaultPlan | None = None):
        if not dist.is_initialized():
            raise RuntimeError("Lockstep needs torch.distributed.init_process_group first")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.device = torch.device(device)
        self.fault = fault
        self.seq = 0
        self.step = 0
        self.mlp_calls = 0  # MLP calls so far in this step (fault injection)

    def begin_step(self, step: int) -> None:
        self.step, self.mlp_calls = step, 0

    def exchange(self, kind: str, value: int) -> list[int]:
        """All ranks' ``value`` for control point ``kind``; raises RankFailure if any rank failed."""
        rows = self._gather(OK, KINDS[kind], value)
        failed = [r for r, row in enumerate(rows) if row[0] != OK]
        if failed:
            self._raise_failure(failed, message=None)
        seqs = {(row[1], row[2]) for row in rows}
        if len(seqs) != 1:
            where = ", ".join(f"rank {r}: #{row[1]} {KIND_NAMES.get(row[2], row[2])}" for r, row in enumerate(rows))
            raise LockstepError(f"ranks left lock step at step {self.step} ({where})")
        return [row[3] for row in rows]

    def any(self, kind: str, local: bool) -> bool:
        return max(self.exchange(kind, int(bool(local)))) > 0

    def before_mlp(self) -> None:
        """Hook at the start of every MLP call (real or idle): counts calls, injects the planned fault."""
        f = self.fault
        if f is not None and f.rank == self.rank and f.step == self.step and f.mlp_call == self.mlp_calls:
            if f.mode == "exit":
                os._exit(3)  # a crash: no report, no cleanup
            if f.mode == "hang":
                time.sleep(3600)  # never reaches the next collective
            raise InjectedFault(f"injected fault (rank {self.rank}, step {self.step}, MLP call {self.mlp_calls})")
        self.mlp_calls += 1

    def report_failure(self, exc: BaseException) -> None:
        """Tell the other ranks this rank failed (at their next control point), then raise RankFailure."""
        rows = self._gather(FAILED, 0, 0)
        failed = [r for r, row in enumerate(rows) if row[0] != OK]
        self._raise_failure(failed, message=f"{type(exc).__name__}: {exc}", cause=exc)

    # ---- internals ----
    def _gather(self, status: int, kind: int, value: int) -> list[list[int]]:
        self.seq += 1
        mine = torch.tensor([status, self.seq, kind, value], dtype=torch.int64, device=self.device)
        out = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(out, mine)
        return torch.stack(out).tolist()

    def _raise_failure(self, failed: list[int], message: str | None, cause: BaseException | None = None):
        # Every rank reaches this right after the same control exchange, so one more
        # (object) collective is safe: it carries the failing ranks' messages to all.
        messages: list = [None] * self.world_size
        dist.all_gather_object(messages, message)
        err = RankFailure(failed, self.step, {r: m for r, m in enumerate(messages) if m is not None})
        if cause is not None:
            raise err from cause
        raise err
