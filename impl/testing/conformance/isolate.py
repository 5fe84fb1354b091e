"""Run one op's cases in child processes (spawned), one fresh child after any case that faults the device.

The engine's code runs only in the children: the parent (the kit's own process) never imports an
engine module, it receives the load outcome (found, not found, load error) and the case results
through a pipe (issue 30: the engine's tree is code we execute, the kit's process stays clean).
A wrong address in an engine's kernel can fault the GPU (``illegal memory access``); the fault is
sticky, so every later CUDA call of that process fails. After a faulting case the child stops and
the next one starts at the following case. A child that dies without a word (a segfault) gets its
current case reported as crashed. A child that sends nothing for ``case_timeout`` seconds (its
module's load, or one case) is stopped (SIGTERM, then SIGKILL) and its current case reported as
hung; the next child starts at the following case. Imports the kit's cases and adapter types (the
loader only in the child).
"""
from __future__ import annotations

import multiprocessing as mp
from dataclasses import dataclass, field

from impl.testing.conformance.adapter import EngineAdapter, OpAdapter
from impl.testing.conformance.cases import CaseResult, case_list, claimed, device_fault


CASE_TIMEOUT_S = 600.0  # generous: a first case may compile Triton kernels, the interpreter is slow on large samples
HUNG = object()  # next_message: the child said nothing in time (it has been stopped)
CLOSED = object()  # next_message: the child's end of the pipe closed (it died, or exited)


def next_message(receive, child, timeout: float):
    """The child's next message, CLOSED when its end of the pipe closed, or HUNG after ``timeout``
    seconds of silence (the child is then stopped)."""
    if receive.poll(timeout):
        try:
            return receive.recv()
        except EOFError:
            return CLOSED
    stop(child)
    return HUNG


def stop(child, grace: float = 2.0) -> None:
    """End ``child``: SIGTERM, ``grace`` seconds, then SIGKILL; reaped either way."""
    if child.is_alive():
        child.terminate()
        child.join(grace)
    if child.is_alive():
        child.kill()
    child.join()


def reap(child, timeout: float) -> None:
    """Wait for a child that is done to exit, at most ``timeout`` seconds (engine code may leave a
    thread that keeps it alive), then stop it."""
    child.join(timeout)
    stop(child)


def stop_message(timeout: float) -> str:
    return f"sent nothing for {timeout:g} s (hung; the process was stopped; --case-timeout sets the limit)"


@dataclass
class IsolatedRun:
    """What the children reported: the load outcome, then the cases."""

    load: str = "loaded"  # "loaded", "not provided", "load error"
    detail: str = ""
    stubs: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    cases: list[CaseResult] = field(default_factory=list)


def _worker(engine: EngineAdapter, adapter: OpAdapter, root: str, device: str, kinds, large: bool, start: int,
            out) -> None:
    import torch

    import impl.kernels  # noqa: F401 - Triton's mode (interpreter on CPU) is fixed before the engine loads
    from impl.testing.conformance.cases import _exc_text, run_case
    from impl.testing.conformance.loader import NotFound, load_function
    from impl.testing.op_table import OPS_BY_NAME

    op = OPS_BY_NAME[adapter.op]
    try:
        fn, log = load_function(root, adapter.module, adapter.function, engine.stubs_for(adapter))
    except NotFound as exc:
        out.send(("load", "not provided", f"not found at this commit: {exc}", [], []))
        out.send(None)
        return
    except Exception as exc:  # noqa: BLE001 - a module that fails to import is reported, not raised
        out.send(("load", "load error", _exc_text(exc), [], []))
        out.send(None)
        return
    out.send(("load", "loaded", "", list(log.stubs), list(log.files)))
    cases = case_list(op, kinds, large)
    for index in range(start, len(cases)):
        kind, case = cases[index]
        try:
            result = run_case(op, adapter, fn, kind, case, torch.device(device))
        except Exception as exc:  # noqa: BLE001 - the harness step (making inputs, the oracle) failed
            result = CaseResult(kind, case.name, "raises", claimed(adapter, kind, case), f"harness: {_exc_text(exc)}")
        out.send((index, result))  # a pipe, not a queue: sent before the next case can kill the process
        if device_fault(result):
            break
    out.send(None)


def run_cases_isolated(engine: EngineAdapter, adapter: OpAdapter, root: str, device: str, kinds, large: bool,
                       case_timeout: float = CASE_TIMEOUT_S) -> IsolatedRun:
    from impl.testing.op_table import OPS_BY_NAME
    cases = case_list(OPS_BY_NAME[adapter.op], kinds, large)
    ctx = mp.get_context("spawn")
    run = IsolatedRun()
    start, first = 0, True
    while first or start < len(cases):
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_worker, args=(engine, adapter, root, device, kinds, large, start, send))
        child.start()
        send.close()  # the child holds the only writer: its death ends the pipe
        finished = loaded = hung = False
        while True:
            message = next_message(receive, child, case_timeout)
            if message is HUNG or message is CLOSED:
                hung = message is HUNG
                break
            if message is None:  # the child's end marker
                finished = True
                break
            if message[0] == "load":
                _, run.load, run.detail, stubs, files = message
                loaded = True
                if first:
                    run.stubs, run.files = stubs, files
                continue
            index, result = message
            if device_fault(result):
                result.detail = f"faulted the device (later cases ran in a fresh process): {result.detail}"
            run.cases.append(result)
            start = index + 1
        receive.close()
        reap(child, case_timeout)
        first = False
        if run.load != "loaded":
            return run
        if not loaded:  # died (or hung) while loading the engine's module
            run.load = "load error"
            run.detail = ("loading " + stop_message(case_timeout) if hung
                          else f"loading crashed the process (exit code {child.exitcode})")
            return run
        if finished and start < len(cases):  # stopped after a fault: go on in a fresh child
            continue
        if not finished and start < len(cases):  # died without a word, or hung, on case `start`
            kind, case = cases[start]
            why = stop_message(case_timeout) if hung else f"crashed the process (exit code {child.exitcode})"
            run.cases.append(CaseResult(kind, case.name, "raises", claimed(adapter, kind, case), why))
            start += 1
    return run

