"""One case of the op table against an engine function: the call, the comparison, the shrinking.

The in-place argument is handed over as a view into a poisoned buffer with guard rows on both
sides, so a write outside it (a negative or past-the-end address) is seen instead of corrupting
memory. A differing sample is shrunk by dropping rows while it still differs. Bad-value samples
(docs/design.md §10) are read with ``getattr(op, "bad_value_samples", None)``, so the kit picks
them up from any op table that declares them. Imports torch, impl.testing and the kit's adapter.
"""
from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

import torch

from impl.testing.conformance.adapter import OpAdapter, engine_call, engine_outputs, unexpressible
from impl.testing.op_table import OpInfo, clone_kwargs, mismatch, run_reference
from impl.validation import check_mode
from reference.bits import bits_view

MAX_SHRINK_CALLS = 120


@dataclass
class CaseResult:
    """One case: a sample, an error input or a bad-value sample."""

    kind: str  # "sample", "error", "bad-value"
    name: str
    status: str  # "agree", "differ", "raises", "raises-differently", "not-applicable"
    in_contract: bool  # a difference here fails the run
    detail: str = ""
    shrunk: str = ""  # the smallest differing call found (rows kept and their values)

    @property
    def bad(self) -> bool:
        return self.status in ("differ", "raises", "raises-differently")


# ---------------------------------------------------------------- guarded in-place argument
def _guarded(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """A copy of ``tensor`` living inside a larger buffer with poisoned guard rows before and after."""
    rows = tensor.shape[0]
    guard = max(rows, 16)
    gen = torch.Generator().manual_seed(12345)
    shape = (rows + 2 * guard, *tensor.shape[1:])
    raw = torch.randint(0, 256, (int(torch.tensor(shape).prod()) * tensor.element_size(),), generator=gen,
                        dtype=torch.int64).to(torch.uint8)
    buffer = raw.view(tensor.dtype).reshape(shape).to(tensor.device)
    view = buffer[guard:guard + rows]
    view.copy_(tensor)
    return view, buffer, guard


def _guard_problem(name: str, buffer: torch.Tensor, before: torch.Tensor, guard: int, rows: int) -> str | None:
    changed = (bits_view(buffer.cpu()) != bits_view(before)).reshape(buffer.shape[0], -1).any(dim=1)
    low, high = int(changed[:guard].sum()), int(changed[guard + rows:].sum())
    if not (low or high):
        return None
    where = []
    if low:
        first = guard - int(changed[:guard].nonzero()[-1])
        where.append(f"{low} row(s) before its start (nearest at index -{first})")
    if high:
        first = int(changed[guard + rows:].nonzero()[0])
        where.append(f"{high} row(s) past its end (first at index {rows + first})")
    return f"wrote outside {name}: " + ", ".join(where)


# ---------------------------------------------------------------- one call
class MappingError(Exception):
    """The adapter could not turn our arguments into the engine's (a derivation failed on them)."""


@dataclass
class Outcome:
    outputs: tuple[torch.Tensor, ...] | None = None
    error: BaseException | None = None
    guard: str | None = None


def call_engine(op: OpInfo, adapter: OpAdapter, fn: Callable, kwargs: dict[str, Any], copy: bool = True) -> Outcome:
    """Call the engine on (a copy of) our kwargs; a contiguous in-place argument becomes the guarded buffer.

    ``copy=False`` hands the tensors over as made (error inputs: a clone would make a strided one contiguous)."""
    kw = clone_kwargs(kwargs) if copy else dict(kwargs)
    guard_info = None
    target = kw.get(op.mutates) if op.mutates is not None else None
    guardable = isinstance(target, torch.Tensor) and target.dim() >= 1 and target.device.type != "meta"
    if guardable and target.is_contiguous():
        view, buffer, guard = _guarded(kw[op.mutates])
        kw[op.mutates] = view
        guard_info = (buffer, buffer.cpu().clone(), guard, view.shape[0])
    try:
        call = engine_call(adapter, kw)
    except Exception as exc:  # noqa: BLE001
        return Outcome(error=MappingError(_exc_text(exc)))
    try:
        result = fn(*call.args, **call.kwargs)
        if torch.cuda.is_available():  # an asynchronous fault belongs to this call
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the engine's error is the observation
        return Outcome(error=exc)
    mapped = engine_outputs(adapter, result)
    if mapped is None:
        if op.mutates is not None:
            mapped = (kw[op.mutates],)
        else:
            mapped = tuple(result) if isinstance(result, tuple) else (result,)
    guard = _guard_problem(op.mutates, *guard_info) if guard_info else None
    return Outcome(outputs=mapped, guard=guard)


def compare_outcome(op: OpInfo, outcome: Outcome, kwargs: dict[str, Any]) -> tuple[str, str]:
    """(status, detail) of an engine outcome against the oracle on the same kwargs."""
    try:
        want = run_reference(op, kwargs)
    except Exception as exc:  # noqa: BLE001
        oracle_error = exc
    else:
        oracle_error = None
    if isinstance(outcome.error, MappingError):
        return "not-applicable", f"the adapter cannot map this call: {outcome.error}"
    if outcome.error is not None:
        if oracle_error is not None:
            return "agree", f"both raise ({type(outcome.error).__name__} / {type(oracle_error).__name__})"
        return "raises", _exc_text(outcome.error)
    if oracle_error is not None:
        return "differ", f"the oracle raises {_exc_text(oracle_error)}, the engine returns"
    problems = []
    if outcome.guard:
        problems.append(outcome.guard)
    got = outcome.outputs
    if len(got) != len(want):
        problems.append(f"{len(got)} output(s), the oracle has {len(want)}")
    else:
        for i, (g, w) in enumerate(zip(got, want)):
            if not isinstance(g, torch.Tensor):
                problems.append(f"output {i} is {type(g).__name__}, not a tensor")
            elif (m := mismatch(op.compare, g, w)) is not None:
                problems.append(f"output {i}: {m}")
    return ("differ", "; ".join(problems)) if problems else ("agree", "")


def _exc_text(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}({text!r})"


# ---------------------------------------------------------------- shrinking
def _row_args(op: OpInfo, kwargs: dict[str, Any]) -> tuple[int, list[str]]:
    """(row count, names of the tensors with one entry per row). The first tensor argument sets the count
    (kv, req_pool_indices, ...); the in-place argument is a row argument only when it is that first one
    (norm+RoPE's kv), never when it is a destination (the ring ``unified``)."""
    tensors = [(k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.dim() >= 1]
    if not tensors:
        return 0, []
    first, n = tensors[0][0], tensors[0][1].shape[0]
    return n, [k for k, v in tensors if v.shape[0] == n and (k != op.mutates or k == first)]


def _take(kwargs: dict[str, Any], names: list[str], keep: list[int]) -> dict[str, Any]:
    out = dict(kwargs)
    for k in names:
        index = torch.tensor(keep, dtype=torch.long, device=kwargs[k].device)
        out[k] = kwargs[k].index_select(0, index).contiguous()
    return out


def shrink(op: OpInfo, adapter: OpAdapter, fn: Callable, kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """Drop rows (halves, then quarters, ... then single rows) while the call still differs from the oracle."""
    n, names = _row_args(op, kwargs)
    keep = list(range(n))
    if n <= 1:
        return kwargs, keep
    calls = 0

    def still_differs(rows: list[int]) -> bool:
        nonlocal calls
        calls += 1
        trial = _take(kwargs, names, rows)
        try:
            run_reference(op, trial)
        except Exception:  # noqa: BLE001 - a cut that breaks the oracle's preconditions is no smaller sample
            return False
        status, _ = compare_outcome(op, call_engine(op, adapter, fn, trial), trial)
        return status in ("differ", "raises")

    chunk = max(len(keep) // 2, 1)
    while chunk >= 1 and calls < MAX_SHRINK_CALLS:
        start = 0
        while start < len(keep) and calls < MAX_SHRINK_CALLS and len(keep) > 1:
            trial = keep[:start] + keep[start + chunk:]
            if trial and still_differs(trial):
                keep = trial
            else:
                start += chunk
        chunk //= 2
    return _take(kwargs, names, keep), keep


def describe_call(kwargs: dict[str, Any], limit: int = 12) -> str:
    """The call's arguments in a line: small index tensors by value, others by shape and dtype."""
    parts = []
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            if v.dim() <= 1 and v.numel() <= limit and not v.dtype.is_floating_point:
                parts.append(f"{k}={v.tolist()}")
            else:
                parts.append(f"{k}={list(v.shape)} {str(v.dtype).removeprefix('torch.')}")
        elif v is not None:
            parts.append(f"{k}={v!r}")
    return ", ".join(parts)


# ---------------------------------------------------------------- the three kinds of case
def _sample_contract(op: OpInfo, adapter: OpAdapter, kwargs: dict[str, Any]) -> str:
    """"" when the adapter claims the sample, else why not."""
    for name in op.dtype_args:
        value = kwargs.get(name)
        if isinstance(value, torch.Tensor) and not adapter.claims_dtype(value.dtype):
            return f"dtype {str(value.dtype).removeprefix('torch.')} not claimed"
    return adapter.unclaimed_rank(kwargs)


def run_sample(op, adapter, fn, sample, device, kind="sample", in_contract=True, why_out="") -> CaseResult:
    kwargs = sample.make(device)
    missing = unexpressible(adapter, kwargs)
    if missing:
        return CaseResult(kind, sample.name, "not-applicable", False, f"engine takes no {', '.join(missing)}")
    unclaimed = _sample_contract(op, adapter, kwargs)
    in_contract = in_contract and not unclaimed
    why = "; ".join(x for x in (why_out, unclaimed) if x)
    with check_mode(False):
        status, detail = compare_outcome(op, call_engine(op, adapter, fn, kwargs), kwargs)
        shrunk = ""
        if status == "differ":
            small, keep = shrink(op, adapter, fn, kwargs)
            n = _row_args(op, kwargs)[0]
            _, small_detail = compare_outcome(op, call_engine(op, adapter, fn, small), small)
            if len(keep) < n:
                shrunk = f"rows {keep} of {n}: {describe_call(small)} -> {small_detail}"
            else:
                shrunk = f"not shrinkable below {n} rows: {describe_call(small)}"
    if why and status != "agree":
        detail = f"[out of contract: {why}] {detail}"
    return CaseResult(kind, sample.name, status, in_contract, detail, shrunk)


@contextlib.contextmanager
def _env(pairs):
    saved = {k: os.environ.get(k) for k, _ in pairs}
    os.environ.update(dict(pairs))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_error_input(op, adapter, fn, err, device) -> CaseResult:
    if err.env:
        return CaseResult("error", err.name, "not-applicable", False, "about a dspark gate variable")
    if err.check:
        in_contract, clause = "check-mode" in adapter.claims, "check mode not claimed"
    else:
        in_contract, clause = "error-types" in adapter.claims, "error clause not claimed"
    kwargs = err.make(device)
    missing = unexpressible(adapter, kwargs)
    if missing:
        return CaseResult("error", err.name, "not-applicable", False, f"engine takes no {', '.join(missing)}")
    with check_mode(bool(err.check)), _env(err.env):
        outcome = call_engine(op, adapter, fn, kwargs, copy=False)
    want = f"{err.error.__name__} matching {err.match!r}"
    if isinstance(outcome.error, MappingError):
        return CaseResult("error", err.name, "not-applicable", False, f"the adapter cannot map it: {outcome.error}")
    if outcome.error is None:
        status, detail = "raises-differently", f"does not raise (want {want})"
        if outcome.guard:
            detail += f"; {outcome.guard}"
    elif not isinstance(outcome.error, err.error):
        status, detail = "raises-differently", f"raises {_exc_text(outcome.error)} (want {want})"
    elif "error-messages" in adapter.claims and not re.search(err.match, str(outcome.error)):
        status, detail = "raises-differently", f"raises {_exc_text(outcome.error)} (want {want})"
    else:
        status, detail = "agree", f"raises {type(outcome.error).__name__}"
    if status != "agree" and not in_contract:
        detail = f"[out of contract: {clause}] {detail}"
    return CaseResult("error", err.name, status, in_contract, detail)


def bad_value_samples(op: OpInfo) -> list:
    """The op table's out-of-contract samples (docs/design.md §10), when the table declares them."""
    source = getattr(op, "bad_value_samples", None)
    return list(source()) if source is not None else []


def run_bad_value(op, adapter, fn, sample, device) -> CaseResult:
    rule = getattr(sample, "rule", "") or "§10"
    claimed = "§10" in adapter.claims or rule in adapter.claims
    return run_sample(op, adapter, fn, sample, device, kind="bad-value", in_contract=claimed,
                      why_out="" if claimed else f"{rule} not claimed")


def case_list(op: OpInfo, kinds: tuple[str, ...], large: bool = False) -> list[tuple[str, Any]]:
    """Every (kind, case) the op table declares for ``op``, in a fixed order."""
    out: list[tuple[str, Any]] = []
    if "sample" in kinds:
        out += [("sample", s) for s in op.samples(large)]
    if "error" in kinds:
        out += [("error", e) for e in op.error_inputs()]
    if "bad-value" in kinds:
        out += [("bad-value", s) for s in bad_value_samples(op)]
    return out


def run_case(op: OpInfo, adapter: OpAdapter, fn: Callable, kind: str, case: Any, device) -> CaseResult:
    if kind == "sample":
        return run_sample(op, adapter, fn, case, device)
    if kind == "error":
        return run_error_input(op, adapter, fn, case, device)
    return run_bad_value(op, adapter, fn, case, device)


def claimed(adapter: OpAdapter, kind: str, case: Any) -> bool:
    """Whether a difference on this case would be a core one (for a case that crashed before it could say)."""
    if kind == "sample":
        return True
    if kind == "error":
        return not case.env and ("check-mode" if case.check else "error-types") in adapter.claims
    return "§10" in adapter.claims or (getattr(case, "rule", "") or "§10") in adapter.claims


def device_fault(result: CaseResult) -> bool:
    """The case left the device unusable (a CUDA/HIP fault is sticky: later calls in the process fail too)."""
    text = result.detail
    return any(k in text for k in ("AcceleratorError", "CUDA error", "illegal memory access", "HIP error"))
