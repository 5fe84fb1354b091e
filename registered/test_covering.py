"""The per-commit covering design over the op table's repeated paths, and which schedule runs what."""
from __future__ import annotations

import pytest

from ci.registration import register
from impl.testing.covering import REPEATED_PATHS, covering_cases, dtype_signature
from impl.testing.op_table import OPS, cases
from registered.schedule import (
    HYPOTHESIS_PROFILES,
    hypothesis_profile,
    per_commit_share,
    reduced,
    repeated_cases,
    variant,
)

CASES = cases(large=False)


def _names(selection):
    return {(op.name, sample.name) for op, sample in selection}


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=2)
def test_every_op_dtype_runs_on_every_path_and_every_sample_on_some_path():
    every = _names(CASES)
    union = set()
    for path in REPEATED_PATHS:
        chosen = covering_cases(CASES, path)
        union |= _names(chosen)
        for op in OPS:
            want = {dtype_signature(op, s) for o, s in CASES if o is op}
            got = {dtype_signature(op, s) for o, s in chosen if o is op}
            assert got == want, (path, op.name)
            if "triton" not in op.tags:      # torch-only ops are cheap: every sample on every path
                assert {s.name for o, s in chosen if o is op} == {s.name for o, s in CASES if o is op}
    assert union == every
    # and it does reduce where it matters: the interpreted renorm samples
    renorm = {n for n in every if n[0] == "top_k_renorm"}
    assert all(len(_names(covering_cases(CASES, p)) & renorm) < len(renorm) for p in REPEATED_PATHS)
    with pytest.raises(ValueError, match="path 'nope'"):
        covering_cases(CASES, "nope")


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_only_per_commit_cpu_jobs_run_the_subset_and_the_small_hypothesis_profile():
    per_commit = {"DSPARK_JOB": "per-commit/cpu/kernels-gates[torch]"}
    nightly = {"DSPARK_JOB": "nightly/cpu/kernels-gates[torch]"}
    gpu = {"DSPARK_JOB": "per-commit/h200-1/kernels"}
    assert reduced(per_commit) and not reduced(nightly) and not reduced(gpu) and not reduced({})
    assert variant(per_commit) == "torch" and variant(gpu) is None
    assert repeated_cases(CASES, "gates[torch]", nightly) == CASES == repeated_cases(CASES, "syncs", {})
    assert _names(repeated_cases(CASES, "gates[torch]", per_commit)) == _names(covering_cases(CASES, "gates[torch]"))
    profiles = [hypothesis_profile(e) for e in (per_commit, gpu, nightly, {})]
    assert profiles == ["per-commit-cpu", "default", "nightly", "default"]
    assert HYPOTHESIS_PROFILES["per-commit-cpu"] < HYPOTHESIS_PROFILES["default"] < HYPOTHESIS_PROFILES["nightly"]


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_path_tests_share_runs_per_commit_on_cpu_only_and_must_come_from_its_full_list():
    per_commit, nightly = {"DSPARK_JOB": "per-commit/cpu/kernels"}, {"DSPARK_JOB": "nightly/cpu/kernels"}
    assert per_commit_share((0, 2, 4096), (0, 2), per_commit) == [0, 2]
    assert per_commit_share((0, 2, 4096), (0, 2), nightly) == [0, 2, 4096]
    assert per_commit_share((0, 2, 4096), (0, 2), {"DSPARK_JOB": "per-commit/h200-1/kernels"}) == [0, 2, 4096]
    with pytest.raises(ValueError, match="not in it: \\[7\\]"):
        per_commit_share((0, 2), (2, 7), nightly)
    with pytest.raises(ValueError, match="non-empty subset"):
        per_commit_share((0, 2), (), per_commit)
