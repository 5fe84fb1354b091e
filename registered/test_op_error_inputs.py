"""Bad input -> one clear error naming the argument (docs/design.md §3), for every error input of the
op table, and every op's declared dtypes: accepted ones match the oracle, any other raises TypeError."""
from __future__ import annotations

import contextlib
import re

import pytest
import torch

from ci.registration import register
from impl.platform import default_device
from impl.testing.op_table import (
    HELPERS,
    OPS,
    clone_kwargs,
    error_case_id,
    error_cases,
    oracle_mismatches,
    run_op,
)
from impl.validation import check_mode

DEV = default_device()
ERROR_CASES = error_cases()
# every dtype an op could be handed; complex ones are left out (no op moves them)
CANDIDATE_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                    torch.bfloat16, torch.float32, torch.float64,
                    *(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)))


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("case", ERROR_CASES, ids=error_case_id)
def test_error_input_raises_its_error(case, monkeypatch):
    _, fn, err = case
    for name, value in err.env:
        monkeypatch.setenv(name, value)
    kwargs = err.make(DEV)
    with check_mode(True) if err.check else contextlib.nullcontext(), pytest.raises(err.error, match=err.match):
        fn(**kwargs)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_every_op_has_error_inputs_with_unique_names():
    for name, errors in [(op.name, op.error_inputs) for op in OPS] + [(n, e) for n, (_, e) in HELPERS.items()]:
        names = [e.name for e in errors()]
        assert names and len(set(names)) == len(names), name
        for e in errors():
            re.compile(e.match)
            assert e.error in (TypeError, ValueError) or e.env, f"{name}[{e.name}]: only gates raise other errors"


def _sample_dtypes(op) -> tuple[dict, set[torch.dtype]]:
    """The first sample whose dtype arguments all hold elements, and every dtype the samples give them."""
    first, seen = None, set()
    for sample in op.samples(False):
        kwargs = sample.make(DEV)
        tensors = [kwargs[a] for a in op.dtype_args if isinstance(kwargs.get(a), torch.Tensor)]
        seen |= {t.dtype for t in tensors}
        if first is None and len(tensors) == len(op.dtype_args) and all(t.numel() for t in tensors):
            first = kwargs
    assert first is not None, f"{op.name}: no sample gives every dtype argument a non-empty tensor"
    return first, seen


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=4)
@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_declared_dtypes_are_exactly_the_accepted_ones(op):
    """Samples use declared dtypes only; each declared dtype no sample uses (cast on every argument of
    ``dtype_args`` together) runs and matches the oracle; every other dtype raises a TypeError naming
    one of those arguments."""
    base, sampled = _sample_dtypes(op)
    assert sampled <= set(op.dtypes), f"{op.name}: samples use undeclared dtypes {sampled - set(op.dtypes)}"
    for dtype in CANDIDATE_DTYPES:
        kwargs = {**base, **{a: base[a].to(dtype) for a in op.dtype_args}}
        if dtype not in op.dtypes:
            with pytest.raises(TypeError, match="|".join(op.dtype_args) + "|unsupported dtype"):
                op.impl(**clone_kwargs(kwargs))
        elif dtype not in sampled:
            with check_mode(False):
                got = run_op(op, op.impl, clone_kwargs(kwargs))
            problems = oracle_mismatches(op, got, kwargs)
            assert not problems, (dtype, problems)
