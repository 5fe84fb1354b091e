"""The benchmark CLI's contract (issue 17 §6): unknown selections are an error before any work,
results are merged and never shrunk, the plot is written (or the reason printed) even for the
one-size CPU smoke sweep, and results land outside the package."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import impl
from ci.registration import register
from impl.bench import report
from impl.bench.__main__ import REPO_ROOT, main

ROOT = Path(__file__).resolve().parents[1]


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=6)
def test_unknown_selection_exits_2_naming_the_choices():
    done = subprocess.run([sys.executable, "-m", "impl.bench", "--only", "top_k,bogus"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "unknown selection bogus" in done.stderr and "choose from scatter, store_swa" in done.stderr
    assert "Traceback" not in done.stderr


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_empty_selection_is_refused_before_any_work(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--only", ","])
    assert exit_info.value.code == 2
    assert "choose from" in capsys.readouterr().err


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_before_tree_is_checked_before_any_work(capsys, tmp_path):
    """--only renorm_versions needs --before-root, and --before-root must be a checkout: both exit 2 in
    one line before anything is measured."""
    for argv, says in ((["--only", "renorm_versions"], "needs --before-root"),
                       (["--before-root", str(tmp_path)], "expected a checkout with impl/__init__.py")):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert says in capsys.readouterr().err


def _row(op: str, variant: str, us: float) -> dict:
    return {"op": op, "shape": "4x8", "rows": 4, "variant": variant, "us": us, "gbps": 1.0}


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_results_are_merged_never_shrunk(tmp_path):
    path = tmp_path / "bench.json"
    report.merge_json(path, {"run": 1}, [_row("a", "project", 1.0), _row("b", "project", 2.0)])
    rows, kept = report.merge_json(path, {"run": 2}, [_row("a", "project", 3.0)])  # a narrower run
    saved = json.loads(path.read_text())
    assert kept == 1 and saved["meta"] == {"run": 2}
    assert sorted((r["op"], r["us"]) for r in saved["results"]) == [("a", 3.0), ("b", 2.0)] == sorted(
        (r["op"], r["us"]) for r in rows)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_foreign_file_is_not_overwritten(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text("not json")
    with pytest.raises(SystemExit, match="not a bench results file"):
        report.merge_json(path, {}, [_row("a", "project", 1.0)])
    assert path.read_text() == "not json"


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=3)
def test_one_size_per_op_still_gets_a_plot_or_a_reason(tmp_path):
    rows = [_row("a", "copy", 1.0), _row("a", "project", 2.0), _row("b", "project", 2.0)]
    written, why = report.write_plot(tmp_path / "bench.png", rows, "smoke")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not written and "matplotlib" in why
    else:
        assert written and why == "" and (tmp_path / "bench.png").stat().st_size > 1000
    assert report.write_plot(tmp_path / "none.png", [], "empty") == (False, "no rows were measured")


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_default_results_folder_is_outside_the_package():
    package = Path(impl.__file__).resolve().parent
    assert REPO_ROOT == ROOT
    assert not (REPO_ROOT / "bench-results").resolve().is_relative_to(package)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=30)
def test_host_cost_rows_table_and_plot(tmp_path):
    """The host-cost probe (issue 22): per-call rows for ours and a contender, the issue's table with
    the ratio FlashInfer / ours, a plot per op and parameter form, and host rows merged beside (never
    replacing) the timing rows of the same op, shape and variant."""
    from impl.bench import host_cost

    class Contender:  # stands in for FlashInfer's sampling module
        @staticmethod
        def top_k_renorm_probs(probs, k):
            return probs.clone()

        @staticmethod
        def top_p_renorm_probs(probs, p):
            return probs.clone()

    cases = host_cost.renorm_cases("cpu", (1, 2), 64, Contender)
    assert len(cases) == 16 and {c[2] for c in cases} == {"project", "flashinfer"}
    rows = host_cost.measure(cases, calls=1, repeats=1)
    assert all(r["metric"] == "host" and r["host_us"] > 0 for r in rows)
    table = host_cost.renorm_table(rows)
    assert "top-k, tensor" in table and "top-p, scalar" in table and "batch 2" in table
    ours, theirs = (next(r["host_us"] for r in rows if r["shape"] == "1x64 fp32 k=50 tensor" and r["variant"] == v)
                    for v in ("project", "flashinfer"))
    assert f"{ours:.1f} / {theirs:.1f} ({theirs / ours:.2f}x)" in table
    path = tmp_path / "bench.json"
    timing_row = {**_row("top_k_renorm", "project", 5.0), "shape": "1x64 fp32 k=50 tensor"}
    report.merge_json(path, {}, [timing_row])
    merged, kept = report.merge_json(path, {}, rows)
    assert kept == 1 and len(merged) == len(rows) + 1
    written, why = report.write_host_plot(tmp_path / "host.png", merged, "smoke")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not written and "matplotlib" in why
    else:
        assert written and (tmp_path / "host.png").stat().st_size > 1000


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=8)
def test_e2e_table_smoke_rows_and_table():
    """The end-to-end table (issue 35 §3) in its CPU smoke mode: one row per case with tokens/s,
    per-step component times that fit in the step and the lossless verdict; the printed table."""
    from impl.bench import e2e_table
    from impl.model.tiny_config import preset
    from impl.step_timing import COMPONENTS, OTHER

    rows = e2e_table.measure("cpu", smoke=True)
    assert [(r["batch"], r["variant"]) for r in rows] == [(1, "eager oracle"), (2, "eager model")]
    for r in rows:
        assert r["op"] == r["metric"] == "e2e" and r["tokens_per_s"] > 0 and r["verdict"] == "yes"
        assert set(r["host_us"]) == {*COMPONENTS, OTHER} and r["host_us"]["model"] > 0
        assert r["host_us"]["metadata"] > 0 and r["host_us"]["draft"] > 0 and r["host_us"]["renorm"] == 0
    assert rows[0]["accept_length"] == 1 + preset("cpu-small").gamma  # the oracle's every draft kept
    text = e2e_table.format_table(rows)
    assert "host metadata" in text and "eager oracle" in text and text.count("\n1/1 ") + text.count("\n2/2 ") == 2


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=20)
def test_e2e_table_runs_a_before_tree_beside_this_one(tmp_path):
    """``python -m impl.bench.e2e_table --before-root DIR --rounds 2``: this tree imported again as the
    'before', each smoke case run twice per version in one process; the rows pair the versions per
    case with the medians of their rounds, and the table prints a version column."""
    import json
    import subprocess
    import sys

    out = tmp_path / "e2e.json"
    run = subprocess.run([sys.executable, "-m", "impl.bench.e2e_table", "--before-root", str(ROOT), "--rounds", "2",
                          "--json", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert [(r["batch"], r["version"]) for r in rows] == [(1, "before"), (1, "after"), (2, "before"), (2, "after")]
    assert all(r["rounds"] == 2 and r["verdict"] == "yes" and r["host_us"]["metadata"] > 0 for r in rows)
    assert "version" in run.stdout.splitlines()[0] and "median of 2 runs" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "impl.bench.e2e_table", "--rounds", "0"], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and "--rounds must be >= 1" in bad.stderr
    for module in ("impl.bench.e2e_table", "impl.bench.metadata_cost"):
        bad = subprocess.run([sys.executable, "-m", module, "--before-root", str(tmp_path / "missing")],
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert bad.returncode == 2 and "expected a checkout with impl/__init__.py" in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=12)
@pytest.mark.parametrize("module, argv", [
    ("impl.bench.renorm_passes", ["--batches", "1,x"]),
    ("impl.bench.renorm_passes", ["--batches", "0"]),
    ("impl.bench.renorm_kernel_profile", ["--sweep", "--batches", "64,,256"]),
    ("impl.bench.renorm_kernel_profile", ["--rows", "-3"]),
    ("impl.bench.renorm_kernel_profile", ["--sweep", "--variant", "{not json"]),
    ("impl.bench.renorm_kernel_profile", ["--sweep", "--variant", "[" * 1100 + "]" * 1100]),
    ("impl.bench.renorm_kernel_profile", ["--sweep", "--variant", '{"no_such_field": 1}']),
    ("impl.bench.renorm_kernel_profile", ["--sweep", "--variant", '{"large_batch_compact": [[300, 1], [512, 1]]}']),
    ("impl.bench.renorm_versions", ["--before-root", str(ROOT), "--batches", "1,1e9"]),
    ("impl.bench.renorm_versions", ["--before-root", str(ROOT), "--rounds", "0"]),
    ("impl.bench.renorm_inputs", ["--families", "softmax3,nope"]),
    ("impl.bench.renorm_inputs", ["--batches", "0"]),
    ("impl.bench.renorm_inputs", ["--settings", "top_p=1.5"]),
    ("impl.bench.renorm_segment_share", ["--k", "50,abc"]),
    ("impl.bench.renorm_segment_share", ["--vocab", "100", "--k", "1000"]),
    ("impl.bench.renorm_segment_share", ["--p", "0.9,1.5"]),
    ("impl.bench.renorm_segment_share", ["--p", "nan"]),
    ("impl.bench.renorm_kernel_profile", ["--sweep", "--rounds", "0"]),
    ("impl.bench.host_cost", ["--batches", "8;64"]),
    ("impl.bench.host_cost", ["--calls", "0"]),
    ("impl.bench.renorm_probe_guess", ["--families", "softmax3,nope"]),
    ("impl.bench.renorm_probe_guess", ["--probe-sample", "48"]),
    ("impl.bench.renorm_probe_guess", ["--p", "0.9,1.5"]),
    ("impl.bench.renorm_probe_guess", ["--rows", "0"]),
], ids=lambda v: v if isinstance(v, str) else " ".join(v)[:60])
def test_renorm_bench_arguments_are_checked_before_any_work(module, argv):
    """A wrong argument to a renorm benchmark is one line and exit 2 (before the GPU check, so on any
    machine), never a traceback."""
    done = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-500:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"python -m {module}: error:"), done.stderr
