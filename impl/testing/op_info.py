"""The op table's types (what one op entry declares) and the helpers that run an entry.

Every field is data a generic test reads; nothing here knows a particular op.
Imports torch, impl.validation and impl.testing.compare only.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from impl.testing.compare import Comparison, mismatch
from impl.validation import check_mode

Kwargs = dict[str, Any]
MakeKwargs = Callable[[torch.device], Kwargs]  # builds fresh, seeded arguments on a device


@dataclass(frozen=True)
class Sample:
    """One valid call of an op, named (the name is the test id's suffix)."""

    name: str
    make: MakeKwargs
    syncs: int | None = None  # overrides OpInfo.syncs for this sample (an eager path)


@dataclass(frozen=True)
class BadValueSample(Sample):
    """An out-of-contract call (docs/design.md §10), kept as data so any engine's kernels can be run on it.

    With check mode off, every kernel backend's outputs equal the oracle's (the decided answer of
    §10.2-§10.7); with check mode on, the op raises a ValueError matching ``match`` (§10.1)."""

    match: str = ""  # regex the check-mode ValueError must match; it names the offending argument
    rule: str = ""  # the design section that decides the answer, e.g. "§10.3"


@dataclass(frozen=True)
class ErrorInput:
    """One bad call and the error it must raise (PyTorch OpInfo's ErrorInput)."""

    name: str  # unique within its op
    make: MakeKwargs  # the bad call's arguments
    error: type[Exception]  # TypeError (wrong kind), ValueError (wrong value), GateError (bad gate value)
    match: str  # regex the message must match; it names the offending argument
    check: bool | None = None  # True: run in check mode (the value checks, which read device memory)
    env: tuple[tuple[str, str], ...] = ()  # gate variables set for the call


@dataclass(frozen=True)
class OpInfo:
    """One op: impl and oracle, valid samples, bad inputs, dtypes, comparison, sync contract."""

    name: str  # the exported name in impl.kernels and reference
    impl: Callable
    ref: Callable  # the pure-torch oracle (reference/), same signature
    samples: Callable[[bool], list[Sample]]  # large -> samples (large: GPU-sized)
    error_inputs: Callable[[], list[ErrorInput]]  # bad calls, each with its error and message
    compare: Comparison  # how outputs are compared with the oracle's
    dtypes: tuple[torch.dtype, ...]  # every dtype the op accepts for `dtype_args`; any other raises TypeError
    dtype_args: tuple[str, ...]  # the arguments that carry `dtypes` (cast together in the dtype test)
    graph_safe: bool  # capturable in a CUDA graph (no host sync, static shapes)
    syncs: int  # expected host syncs on the default path (0 for every graph-safe op)
    mutates: str | None = None  # the argument written in place (its final value is the output)
    written_rows: Callable[[Kwargs], set[int]] | None = None  # rows of `mutates` the op may change
    # extra keyword arguments, by name, that steer the op down its other code paths (renorm tunings);
    # ci.tools.compile_kernels runs every sample plainly and once with each
    variants: Callable[[], dict[str, Kwargs]] | None = None
    notes: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)  # "triton": the op launches Triton kernels
    # out-of-contract calls with a decided answer (docs/design.md §10); registered/test_op_bad_values.py runs them
    bad_value_samples: Callable[[], list[BadValueSample]] | None = None


def clone_kwargs(kwargs: Kwargs, device: torch.device | str | None = None) -> Kwargs:
    """Tensors cloned (moved to ``device`` when given), everything else as is."""
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            v = v.clone() if device is None else v.to(device, copy=True)
        out[k] = v
    return out


def run_op(op: OpInfo, fn: Callable, kwargs: Kwargs) -> tuple[torch.Tensor, ...]:
    """Call ``fn`` on ``kwargs`` (already cloned) and return its outputs as a tuple."""
    result = fn(**kwargs)
    if op.mutates is not None:
        return (kwargs[op.mutates],)
    return tuple(result) if isinstance(result, tuple) else (result,)


def run_reference(op: OpInfo, kwargs: Kwargs) -> tuple[torch.Tensor, ...]:
    """The oracle's outputs, computed on CPU copies of ``kwargs``."""
    return run_op(op, op.ref, clone_kwargs(kwargs, "cpu"))


def oracle_mismatches(op: OpInfo, got: tuple[torch.Tensor, ...], kwargs: Kwargs) -> list[str]:
    """How ``got`` (impl's outputs on ``kwargs``) differs from the oracle's under ``op.compare``; [] if in no way."""
    want = run_reference(op, kwargs)
    if len(got) != len(want):
        return [f"{op.name} returned {len(got)} outputs, the oracle {len(want)}"]
    problems = [(i, mismatch(op.compare, g, w)) for i, (g, w) in enumerate(zip(got, want))]
    return [f"{op.name} output {i}: {problem}" for i, problem in problems if problem]


def sample_mismatches(op: OpInfo, sample: Sample, device: torch.device | str, *, check: bool | None = None,
                      fn: Callable | None = None) -> list[str]:
    """Run ``fn`` (default: the op's impl) on the sample (check mode forced on/off unless ``check`` is None)
    and compare with the oracle: [] when every output matches."""
    kwargs = sample.make(device)
    with contextlib.nullcontext() if check is None else check_mode(check):
        got = run_op(op, fn or op.impl, clone_kwargs(kwargs))
    return oracle_mismatches(op, got, kwargs)


def bad_value_cases(ops: list[OpInfo]) -> list[tuple[OpInfo, BadValueSample]]:
    """Every (op, bad-value sample) pair of ``ops``."""
    return [(op, s) for op in ops if op.bad_value_samples is not None for s in op.bad_value_samples()]


def check_mode_rejection(op: OpInfo, sample: BadValueSample, device: torch.device | str,
                         fn: Callable | None = None) -> str | None:
    """None when ``fn`` (default: the op's impl) in check mode raises a ValueError matching ``sample.match``,
    else what happened instead."""
    try:
        with check_mode(True):
            (fn or op.impl)(**sample.make(device))
    except ValueError as exc:
        if re.search(sample.match, str(exc)):
            return None
        return f"{op.name}[{sample.name}]: check mode raised {str(exc)!r}, which does not match {sample.match!r}"
    return f"{op.name}[{sample.name}]: check mode accepted an out-of-contract call ({sample.rule})"


def expected_syncs(op: OpInfo, sample: Sample) -> int:
    return op.syncs if sample.syncs is None else sample.syncs
