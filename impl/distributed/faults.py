"""Fault plans for the multi-rank tests and CLI: which rank misbehaves, when, and how.

``FaultPlan(rank, step, mlp_call, mode)`` makes ``rank`` misbehave at the
``mlp_call``-th MLP call of engine step ``step`` (see
:mod:`impl.distributed.lockstep`, which acts on it). Torch-free, so the CLIs can
validate ``--fault`` before importing torch; it must never import torch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

FAULT_ENV = "DSPARK_FAULT"  # "RANK:STEP[:MLP_CALL[:MODE]]" for the CLI
FAULT_MODES = ("raise", "exit", "hang")


class InjectedFault(RuntimeError):
    """The fault a :class:`FaultPlan` raises."""


@dataclass(frozen=True)
class FaultPlan:
    rank: int
    step: int
    mlp_call: int = 1  # 0-based index of the MLP call within the step at which to fail
    mode: str = "raise"  # raise | exit | hang

    def __post_init__(self) -> None:
        if self.mode not in FAULT_MODES:
            raise ValueError(f"fault mode must be one of {FAULT_MODES}, got {self.mode!r}")

    @classmethod
    def parse(cls, text: str) -> "FaultPlan":
        """``RANK:STEP[:MLP_CALL[:MODE]]``, e.g. ``1:3`` or ``1:3:0:exit``."""
        parts = text.split(":")
        mode = parts.pop() if len(parts) == 4 else "raise"
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            nums = []
        if len(nums) not in (2, 3) or min(nums) < 0:
            raise ValueError(f"fault plan must be RANK:STEP[:MLP_CALL[:MODE]] with non-negative ints, got {text!r}")
        return cls(*nums, mode=mode)

    @classmethod
    def from_env(cls) -> "FaultPlan | None":
        text = os.environ.get(FAULT_ENV, "").strip()
        return cls.parse(text) if text else None
