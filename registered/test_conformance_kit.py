"""The conformance kit (impl/testing/conformance) catches each planted bug of the fixture engine.

``registered/fixtures/engine_tree`` is a self-written engine tree (package ``__init__`` files
that refuse to import, a native server extension that is not installed, keyword-only kernels
with their own names). Its correct kernels must agree with the oracle on every sample of the op
table; each planted bug (a dropped skip of negative locations, an off-by-one window trim, a ring
modulo by the wrong stride, an off-by-one commit gate) must make its op "differ", naming the
sample and a shrunk call. The CLI and the pytest entry are run as an engine's CI would.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from ci.registration import register
from impl.platform import default_device
from impl.testing.conformance import runner
from impl.testing.conformance.engines import fixture
from impl.testing.conformance.loader import NotFound, load_function
from impl.testing.op_table import OPS_BY_NAME, Sample

REPO = Path(__file__).resolve().parent.parent
TREE = REPO / "registered" / "fixtures" / "engine_tree"

# planted bug -> samples of the op table it must fail (each a class of real bug)
MUST_FAIL = {
    "copy_rows_to_cache_no_skip": {"random-bf16", "all-locs-minus-1"},  # writes row -1: before `unified`
    "store_window_rows_trim_off_by_one": {"prefill-trim", "trim-int32", "wrap-trim-ring128"},
    "store_window_rows_wrong_stride": {"wrap-prefix127-ring128", "wrap-prefix255-ring133"},
    "verify_commit_layout_gate_off_by_one": {"random", "commit-0-and-over-stride"},
}


def _run(adapter, op, kinds=("sample",)):
    return runner.run_op(adapter, adapter.op(op), str(TREE), default_device(), kinds=kinds, isolate=False)


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
def test_fixture_engine_correct_kernels_agree_and_a_moved_function_is_not_provided():
    results = {r.op: r for r in runner.run_engine(fixture.ADAPTER, str(TREE), default_device(), kinds=("sample",),
                                                     isolate=False)}
    for op in ("scatter_into_unified", "store_swa_into_unified", "build_commit_inject_layout"):
        r = results[op]
        assert r.verdict == "agree", (op, [(c.name, c.detail) for c in r.core_failures])
        assert sum(c.status == "agree" for c in r.cases) == len(OPS_BY_NAME[op].samples(False))
        assert r.stubs == ["toyengine.serving"], r.stubs  # the one heavy import, and only it
        assert "toyengine/__init__.py" not in r.files  # loaded by path: the package __init__ never ran
    missing = results["unified_inject_loc"]
    assert missing.verdict == "not provided" and "not found at this commit" in missing.detail
    assert not any(name.startswith("toyengine") for name in sys.modules)


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=40)
@pytest.mark.parametrize("bug", sorted(fixture.BUG_FUNCTIONS))
def test_each_planted_bug_is_caught_naming_op_and_sample(bug):
    op = fixture.BUG_FUNCTIONS[bug]
    result = _run(fixture.ADAPTER.with_function(op, bug), op)
    assert result.verdict == "differ" and result.failed
    failing = {c.name for c in result.core_failures}
    assert MUST_FAIL[bug] <= failing, (bug, failing)
    for case in result.core_failures:
        assert case.status == "differ" and case.detail, case
        kept = case.shrunk.partition("rows ")[2].partition(" of ")
        assert case.shrunk.startswith("rows ["), case.shrunk  # shrunk below the sample's row count
        assert len(json.loads(kept[0])) < int(kept[2].partition(":")[0]), case.shrunk
    if bug == "copy_rows_to_cache_no_skip":  # the write before the buffer is seen, not memory corrupted
        assert any("wrote outside unified: 1 row(s) before its start" in c.detail for c in result.core_failures)


def _with_bad_values(op_name, samples):
    """The op table entry with ``bad_value_samples`` (the field design §10 adds), however the table spells it."""
    op = OPS_BY_NAME[op_name]
    fields = {f.name: getattr(op, f.name) for f in dataclasses.fields(op)}
    return types.SimpleNamespace(**{**fields, "bad_value_samples": lambda: samples})


@dataclasses.dataclass(frozen=True)
class _BadValue(Sample):
    rule: str = "§10.3"


def _negative_loc(device):
    g = torch.Generator().manual_seed(3)
    return dict(kv=torch.randn(5, 16, generator=g).bfloat16().to(device),
                loc=torch.tensor([2, -7, 0, -2, 4]).to(device),
                unified=torch.randn(8, 16, generator=g).bfloat16().to(device))


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=8)
def test_bad_value_samples_are_read_from_the_op_table_and_count_only_where_claimed(monkeypatch):
    entry = _with_bad_values("scatter_into_unified", [_BadValue("loc-below-minus-1", _negative_loc)])
    monkeypatch.setitem(runner.OPS_BY_NAME, "scatter_into_unified", entry)
    good = _run(fixture.ADAPTER, "scatter_into_unified", kinds=("bad-value",))
    assert [(c.kind, c.name, c.status, c.in_contract) for c in good.cases] == [
        ("bad-value", "loc-below-minus-1", "agree", True)]
    buggy = fixture.ADAPTER.with_function("scatter_into_unified", "copy_rows_to_cache_no_skip")
    claimed = _run(buggy, "scatter_into_unified", kinds=("bad-value",))
    assert claimed.verdict == "differ" and "wrote outside unified" in claimed.cases[0].detail
    unclaimed = dataclasses.replace(buggy, ops=tuple(dataclasses.replace(a, claims=("core",)) for a in buggy.ops))
    apart = _run(unclaimed, "scatter_into_unified", kinds=("bad-value",))
    assert apart.verdict == "agree" and [c.name for c in apart.out_of_contract] == ["loc-below-minus-1"]
    assert "§10.3 not claimed" in apart.out_of_contract[0].detail


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=2)
def test_loader_stubs_only_what_it_must_and_reports_moved_modules(tmp_path):
    pkg = tmp_path / "eng"
    (pkg / "k").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('server stack')\n")
    (pkg / "k" / "ops.py").write_text("import json\nimport not_installed_native_ext\nfrom eng.srv import Batch\n"
                                      "from eng.k.util import twice\n\ndef f(*, x):\n    return twice(x)\n")
    (pkg / "k" / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    (pkg / "k" / "moved.py").write_text("from eng.k.gone import g\n")
    stubs = ("eng.srv", "json", "not_installed_native_ext")
    fn, log = load_function(tmp_path, "eng.k.ops", "f", stubs)
    assert fn(x=21) == 42
    assert log.stubs == ["not_installed_native_ext", "eng.srv"]  # json is installed: the real one is used
    assert log.files == ["eng/k/ops.py", "eng/k/util.py"]
    with pytest.raises(NotFound, match="no h"):
        load_function(tmp_path, "eng.k.ops", "h", stubs)
    with pytest.raises(NotFound, match="imports eng.k.gone, which is not in this tree"):
        load_function(tmp_path, "eng.k.moved", "g", stubs)
    with pytest.raises(NotFound, match="is not in this tree"):
        load_function(tmp_path, "eng.k.absent", "f", stubs)


def _python(*args, timeout=600):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=40)
def test_cli_exit_status_json_and_bad_arguments():
    buggy = _python("-m", "impl.testing.conformance", "--engine", "fixture-buggy", "--root", str(TREE),
                    "--ops", "build_commit_inject_layout", "--format", "json")
    assert buggy.returncode == 1, buggy.stderr
    report = json.loads(buggy.stdout)
    (op,) = report["ops"]
    assert op["op"] == "build_commit_inject_layout" and op["verdict"] == "differ"
    assert any(c["name"] == "commit-0-and-over-stride" and c["in_contract"] and c["status"] == "differ"
               for c in op["cases"])
    good = _python("-m", "impl.testing.conformance", "--engine", "fixture", "--root", str(TREE),
                   "--ops", "build_commit_inject_layout,unified_inject_loc", "--no-isolate")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "not found at this commit" in good.stdout and "result: pass" in good.stdout
    for args, needle in ((("--engine", "nope", "--root", str(TREE)), "--engine must be one of"),
                         (("--engine", "sglang", "--root", str(TREE)), "--root must hold the sglang package"),
                         (("--engine", "fixture", "--root", str(TREE), "--ops", "top_k_renorm"),
                          "--ops: top_k_renorm")):
        bad = _python("-m", "impl.testing.conformance", *args)
        assert bad.returncode == 2 and bad.stdout == "", bad
        assert bad.stderr.count("\n") == 1 and needle in bad.stderr, bad.stderr


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=45)
def test_pytest_entry_runs_only_the_kit_tests_in_an_engine_ci():
    common = ("-m", "pytest", "-p", "impl.testing.conformance.pytest_plugin", "-p", "no:cacheprovider", "-q",
              "--rootdir", str(TREE), "--engine-root", str(TREE))
    good = _python(*common, "--engine", "fixture", "--engine-no-isolate")
    assert good.returncode == 0, good.stdout[-3000:]
    # 4 passed: the three ops and the metadata builder ring_meta (values and the sync table per cell)
    assert "4 passed, 1 skipped" in good.stdout and "not found at this commit" in good.stdout, good.stdout[-2000:]
    bad = _python(*common, "--engine", "fixture-buggy", "--engine-ops", "scatter_into_unified")
    assert bad.returncode == 1 and "1 failed" in bad.stdout
    assert "scatter_into_unified [sample all-locs-minus-1] differ" in bad.stdout


CRASHY = '''
import os
import torch

with open(os.path.join(os.path.dirname(__file__), "pids.txt"), "a") as _f:  # which process ran the module
    _f.write(f"{os.getpid()}\\n")


def put_rows(*, kv, loc, unified):
    if kv.shape[1] == 40:      # the odd-width sample: the process dies, as on a segfault
        os._exit(7)
    if kv.dtype == torch.uint8:  # as a kernel that faults the GPU reports it
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    for i, target in enumerate(loc.tolist()):
        if 0 <= target < unified.shape[0]:
            unified[target] = kv[i]
'''


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=45)
def test_isolated_runs_survive_a_crash_and_a_device_fault(tmp_path):
    (tmp_path / "crashy").mkdir()
    (tmp_path / "crashy" / "k.py").write_text(CRASHY)
    from impl.testing.conformance.adapter import Arg, EngineAdapter, OpAdapter
    engine = EngineAdapter("crashy", "crashy", (OpAdapter("scatter_into_unified", "crashy.k", "put_rows",
                                                          (Arg("kv"), Arg("loc"), Arg("unified"))),))
    result = runner.run_op(engine, engine.ops[0], str(tmp_path), "cpu", kinds=("sample",), isolate=True)
    by_name = {c.name: c for c in result.cases}
    assert list(by_name) == [s.name for s in OPS_BY_NAME["scatter_into_unified"].samples(False)]
    assert by_name["odd-width-D40"].status == "raises"
    assert by_name["odd-width-D40"].detail == "crashed the process (exit code 7)"
    assert by_name["uint8"].detail.startswith("faulted the device (later cases ran in a fresh process)")
    others = [c for c in result.cases if c.name not in ("odd-width-D40", "uint8")]
    assert others and all(c.status == "agree" for c in others), [(c.name, c.detail) for c in others]
    assert result.verdict == "raises differently"
    pids = {int(p) for p in (tmp_path / "crashy" / "pids.txt").read_text().split()}
    assert len(pids) >= 3 and os.getpid() not in pids, pids  # loaded in the children only, never in the kit
