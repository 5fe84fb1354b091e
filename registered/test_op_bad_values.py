"""Out-of-contract values (docs/design.md §10) of the op table, on every kernel backend.

For each bad-value sample of :data:`impl.testing.op_table.OPS`: with check mode off the
torch backend and the default one (Triton's interpreter on CPU, compiled Triton on a GPU)
give exactly the oracle's answer, and the oracle itself answers (never raises); with check
mode on the op raises a ValueError naming the argument. The samples are data
(impl/testing/bad_values.py), so another engine's kernels can be run on the same calls.
"""
from __future__ import annotations

import re

import pytest

from ci.registration import register
from impl.platform import default_device, default_kernel_backend, use_kernel_backend
from impl.testing.op_table import OPS, bad_value_cases, check_mode_rejection, sample_mismatches

CASES = bad_value_cases(OPS)
BACKENDS = ["torch", default_kernel_backend()]  # triton-interpret on CPU, triton on a GPU


def _case_id(case) -> str:
    return f"{case[0].name}-{case[1].name}"


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_bad_value_gets_the_oracles_answer(case, backend):
    op, sample = case
    with use_kernel_backend(backend):
        problems = sample_mismatches(op, sample, default_device(), check=False)
    assert not problems, (sample.rule, problems)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_check_mode_rejects_bad_value_naming_the_argument(case, backend):
    op, sample = case
    with use_kernel_backend(backend):
        problem = check_mode_rejection(op, sample, default_device())
    assert problem is None, problem


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_every_op_declares_bad_values_with_a_rule_and_an_argument():
    """Each op of the table carries its §10 cases; names are unique, each cites its rule and its
    check-mode message is anchored on the argument it names."""
    missing = sorted(op.name for op in OPS if op.bad_value_samples is None)
    assert not missing, f"ops without bad-value samples: {missing}"
    for op in OPS:
        samples = op.bad_value_samples() if op.bad_value_samples else []
        names = [s.name for s in samples]
        assert len(set(names)) == len(names), f"{op.name}: duplicate bad-value names"
        sample_names = {s.name for s in op.samples(False)}
        for s in samples:
            assert s.name not in sample_names, f"{op.name}[{s.name}] shares a name with a valid sample"
            assert re.fullmatch(r"§10\.\d+", s.rule), f"{op.name}[{s.name}]: rule {s.rule!r} is not a §10 section"
            assert s.match.startswith("^") and re.match(r"\^\w", s.match), \
                f"{op.name}[{s.name}]: match {s.match!r} must start with the argument's name"
            re.compile(s.match)
