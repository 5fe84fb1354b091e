"""The conformance kit's metadata builders and sync contract (issue 34), on the self-written fixture engine.

``registered/fixtures/engine_tree/toyengine/attention/ring_meta.py`` builds per-token ring metadata
the way an engine's attention backend does: a verify entry counts the tokens and hands them with
the lens to a builder that expands them with ``repeat_interleave``, keeping the sync on ROCm. The
kit runs it under emulated CUDA and HIP, for MTP and DSpark, compares every field with
``reference.verify_metadata.unified_extend_fields`` and every cell with the sync policy
(docs/design.md §4.3). Each planted mistake must be caught, naming what the brief asks for:
a sync dropped on the HIP target path fails exactly the HIP + MTP cells of the eager paths; a
padded tier handed on as the exact count and an off-by-one chunk start are value failures shown
on the smallest sample.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci.registration import register
from impl.testing.conformance import metadata
from impl.testing.conformance.engines import fixture

TREE = Path(__file__).resolve().parent / "fixtures" / "engine_tree"


def _run(adapter):
    return metadata.run_builder(fixture.ADAPTER, adapter, str(TREE), "cpu", isolate=False)


def _mistake(name):
    builder, entries = fixture.META_MISTAKES[name]
    return fixture.RING_META_BUILDER.with_functions(builder, entries)


def _cells(result, verdict):
    return {(c.path, c.platform, c.algorithm) for c in result.cells if c.verdict == verdict}


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=3)
def test_correct_builder_agrees_with_the_oracle_and_the_policy():
    result = _run(fixture.RING_META_BUILDER)
    assert result.verdict == "agree" and not result.failed, (result.value_failures, _cells(result, "FAIL"))
    assert result.values_agree == 3 * 3 * 4 and not result.value_failures  # samples x paths x (platform, algorithm)
    by_cell = {(c.path, c.platform, c.algorithm): c for c in result.cells}
    assert len(by_cell) == 12
    for path in ("verify uniform", "verify ragged eager", "verify ragged graph"):
        assert by_cell[(path, "cuda", "mtp")].engine == "elided"
        assert by_cell[(path, "hip", "mtp")].engine == "kept"
    # keeping a sync the policy allows is a note, never a failure
    assert _cells(result, "note") == {("verify uniform", "hip", "dspark"), ("verify ragged eager", "hip", "dspark"),
                                      ("verify ragged graph", "hip", "mtp"), ("verify ragged graph", "hip", "dspark")}


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=3)
def test_sync_dropped_on_the_hip_target_path_fails_the_hip_mtp_cells_naming_function_path_and_row():
    result = _run(_mistake("sync-dropped-on-hip-target"))
    assert result.failed and result.verdict == "sync-policy", result.verdict
    assert _cells(result, "FAIL") == {("verify uniform", "hip", "mtp"), ("verify ragged eager", "hip", "mtp")}
    detail = next(c.detail for c in result.cells if c.failed and c.path == "verify uniform")
    assert "ToyBackend.attach_ring_meta_fast_everywhere elides the expansion's sync on verify uniform" in detail
    assert "ToyBackend.plan_verify" in detail and "policy row (hip, mtp, uniform) -> keep sync" in detail
    assert not result.value_failures  # the values are right: the sync contract alone catches it


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_padded_tier_passed_as_the_exact_count_is_a_value_failure_on_the_smallest_sample():
    result = _run(_mistake("padded-tier-as-count"))
    assert result.failed and "differ" in result.verdict
    assert {v.path for v in result.value_failures} == {"verify ragged graph"}
    smallest = [v for v in result.smallest_failures if v.path == "verify ragged graph"]
    assert smallest and all(v.sample == "bs1" for v in smallest), [(v.sample, v.problems) for v in smallest]
    text = " ".join(p for v in result.value_failures for p in v.problems)
    assert "output_size=4 but its repeats sum to 2" in text  # CUDA cells: the tier reaches repeat_interleave
    assert "token count fed to the builder 4, the lens fed with it sum to 2" in text  # HIP cells: kept sync, same lie


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=3)
def test_an_off_by_one_chunk_start_is_a_value_failure_naming_the_field():
    result = _run(_mistake("chunk-start-off-by-one"))
    assert result.failed and "differ" in result.verdict
    problems = {p.split(":")[0] for v in result.value_failures for p in v.problems}
    assert problems == {"chunk_start"}, problems
    first = min(result.value_failures, key=lambda v: v.tokens)
    assert first.sample == "bs1" and "first difference at token 0: 1 vs 0" in first.problems[0]


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("state,policy,verdict", [
    ("elided", "keep sync", "FAIL"), ("mixed", "keep sync", "FAIL"), ("kept", "pass output_size", "note"),
    ("kept", "keep sync", "agree"), ("elided", "pass output_size (padded to tier)", "agree"),
    ("not built", "keep sync", "n/a")])
def test_cell_judgement(state, policy, verdict):
    assert metadata.judge(state, policy) == verdict


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=3)
def test_cli_reports_the_builder_and_its_sync_table_in_text_and_json(tmp_path, capsys):
    from impl.testing.conformance.__main__ import main
    out_json = tmp_path / "report.json"
    code = main(["--engine", "fixture", "--root", str(TREE), "--ops", "ring_meta", "--in-process",
                 "--json", str(out_json)])
    text = capsys.readouterr().out
    assert code == 0 and "sync contract per policy cell (ring_meta" in text and "result: pass" in text, text
    assert "verify uniform       hip       mtp        uniform       kept    keep sync" in text
    (builder,) = json.loads(out_json.read_text())["metadata"]
    assert builder["builder"] == "ring_meta" and builder["verdict"] == "agree" and builder["values_agree"] == 36
    cells = {(c["path"], c["platform"], c["algorithm"]): (c["engine"], c["policy"], c["verdict"])
             for c in builder["sync_cells"]}
    assert cells[("verify ragged eager", "hip", "mtp")] == ("kept", "keep sync", "agree")
    assert cells[("verify ragged eager", "cuda", "dspark")] == ("elided", "pass output_size", "agree")
