"""Run the op table against an engine's functions: every op the adapter maps, every case the table declares.

For each :class:`~impl.testing.conformance.adapter.OpAdapter`, the engine's function is loaded by
path (``loader``), then every sample, error input and bad-value sample of the op (``cases``) is run
and compared with the oracle, in spawned children by default (``isolate``), and summed up into a
verdict: agree / differ / raises differently / not provided / load error.
Imports the kit's modules and impl.testing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from impl.testing.conformance.adapter import EngineAdapter, OpAdapter
from impl.testing.conformance.cases import CaseResult, _exc_text, case_list, run_case
from impl.testing.conformance.loader import NotFound, load_function
from impl.testing.op_table import OPS_BY_NAME

__all__ = ["CaseResult", "OpResult", "OPS_BY_NAME", "run_engine", "run_op"]


@dataclass
class OpResult:
    op: str
    where: str  # module.function in the engine's tree
    verdict: str  # "agree", "differ", "raises differently", "not provided", "load error"
    cases: list[CaseResult] = field(default_factory=list)
    stubs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def core_failures(self) -> list[CaseResult]:
        return [c for c in self.cases if c.in_contract and c.bad]

    @property
    def out_of_contract(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.in_contract and c.bad]

    @property
    def compared(self) -> int:
        """Cases that ran against the oracle (not-applicable ones left out)."""
        return sum(c.status != "not-applicable" for c in self.cases)

    @property
    def failed(self) -> bool:
        return self.verdict in ("differ", "raises differently", "load error")


def _verdict(cases: list[CaseResult]) -> str:
    core = [c for c in cases if c.in_contract and c.bad]
    if any(c.status == "differ" for c in core):
        return "differ"
    if core:
        return "raises differently"
    return "agree"


def run_op(engine: EngineAdapter, adapter: OpAdapter, root: str, device: torch.device | str,
           kinds: tuple[str, ...] = ("sample", "error", "bad-value"), large: bool = False,
           isolate: bool = True, case_timeout: float | None = None) -> OpResult:
    """Every case of one op. ``isolate`` (default: yes) runs them in spawned child processes, a fresh one after
    a case that faults the device or kills the process: an engine kernel given a wild address can fault a GPU
    (sticky for the process) or segfault even Triton's interpreter, and one such case must not take the other
    cases (or ops) with it; the engine's module is then loaded in the children only. ``isolate=False`` loads
    and runs the engine's code in this process (``--in-process``: faster; for trusted trees). Isolated, a
    child silent for ``case_timeout`` seconds (default: isolate.CASE_TIMEOUT_S) is stopped and its case
    reported as hung; in process nothing can stop a hung case."""
    op = OPS_BY_NAME.get(adapter.op)
    if op is None:
        return OpResult(adapter.op, adapter.where, "load error", detail=f"no op {adapter.op!r} in the op table")
    if isolate:  # the engine's module is loaded in the children only, never in this process
        from impl.testing.conformance.isolate import run_cases_isolated
        from impl.testing.conformance.isolate import CASE_TIMEOUT_S
        run = run_cases_isolated(engine, adapter, root, str(device), kinds, large,
                                 CASE_TIMEOUT_S if case_timeout is None else case_timeout)
        if run.load != "loaded":
            return OpResult(op.name, adapter.where, run.load, detail=run.detail)
        return OpResult(op.name, adapter.where, _verdict(run.cases), run.cases, run.stubs, run.files)
    try:
        fn, log = load_function(root, adapter.module, adapter.function, engine.stubs_for(adapter))
    except NotFound as exc:
        return OpResult(op.name, adapter.where, "not provided", detail=f"not found at this commit: {exc}")
    except Exception as exc:  # noqa: BLE001 - a module that fails to import is reported, not raised
        return OpResult(op.name, adapter.where, "load error", detail=_exc_text(exc))
    cases = [run_case(op, adapter, fn, kind, case, device) for kind, case in case_list(op, kinds, large)]
    return OpResult(op.name, adapter.where, _verdict(cases), cases, list(log.stubs), list(log.files))


def run_engine(engine: EngineAdapter, root: str, device: torch.device | str, ops: list[str] | None = None,
               **options) -> list[OpResult]:
    chosen = [a for a in engine.ops if not ops or a.op in ops]
    return [run_op(engine, a, root, device, **options) for a in chosen]
