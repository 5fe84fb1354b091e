"""The sglang adapter: the audit on sglang-shaped trees (registered/fixtures/sglang/*, data only).

before/ and after/ are complete trees (the README runs the audit on them directly). Every other shape
is an overlay on one of them: a BASE file naming the tree it starts from, the files it replaces or
adds, and optionally a DELETE file listing base paths it drops (one a line); ``materialize`` builds it.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ci.adapters import get_adapter
from ci.adapters.sglang import collect_suites
from ci.audit_foreign import run_foreign_audit
from ci.registration import register
from registered.fixture_repo import REAL_ROOT

FIXTURES = REAL_ROOT / "registered" / "fixtures" / "sglang"
DSPARK = "nightly/amd/nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark"


OVERLAY_META = frozenset({"BASE", "DELETE"})


def materialize(shape: str, dest: Path) -> Path:
    """Build the fixture tree ``shape`` at ``dest``: its BASE tree, then its overlay on top, minus DELETE."""
    overlay = FIXTURES / shape
    base = overlay / "BASE"
    if not base.is_file():   # a complete tree (before/, after/)
        return Path(shutil.copytree(overlay, dest))
    shutil.copytree(FIXTURES / base.read_text().strip(), dest)
    shutil.copytree(overlay, dest, dirs_exist_ok=True,
                    ignore=lambda folder, names: OVERLAY_META & set(names) if Path(folder) == overlay else ())
    delete = overlay / "DELETE"
    for rel in delete.read_text().split() if delete.is_file() else []:
        (dest / rel).unlink()
    return dest


def audit_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci.audit", "--root", str(root), "--adapter", "sglang", *args],
                          cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)


def failed(report) -> dict[str, list[str]]:
    return {code: found for code, found in report.violations.items() if found}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_before_the_fix_the_dspark_nightly_suite_is_dormant_and_after_it_passes():
    before = audit_cli(FIXTURES / "before")
    assert before.returncode == 1, before.stdout + before.stderr
    dormant = [line.strip() for line in before.stdout.splitlines() if "DORMANT" in line]
    assert dormant == [f"- DORMANT {DSPARK} (runner linux-mi35x-gpu-8): 1 registered file(s), first at "
                       "test/registered/amd/accuracy/mi35x/test_deepseek_v4_pro_dspark_eval_mi35x.py:10; "
                       "needs a workflow triggered by a schedule; no workflow step runs it"]
    assert "audit: 1 of 7 rule(s) failed" in before.stdout
    after = audit_cli(FIXTURES / "after")
    assert after.returncode == 0, after.stdout + after.stderr
    assert after.stdout.rstrip().endswith("audit: OK")
    row = next(line.split() for line in after.stdout.splitlines() if line.startswith(DSPARK + " "))
    assert row == [DSPARK, "1", "3600", "1", "nightly-test-amd.yml", "schedule", "linux-mi35x-gpu-8"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_json_output_lists_jobs_and_findings():
    proc = audit_cli(FIXTURES / "before", "--format", "json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["adapter"] == "sglang" and data["ok"] is False
    assert [f["rule"] for f in data["findings"]] == ["a"]
    assert data["findings"][0]["message"].startswith(f"DORMANT {DSPARK}")
    jobs = {j["id"]: j for j in data["jobs"]}
    assert jobs["per-commit/amd/stage-b-test-1-gpu-small-amd"]["partitions"] == "2"
    assert jobs[DSPARK]["workflows"] == "-"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_other_shapes_from_sglang_history(tmp_path):
    def audit(shape: str) -> dict[str, list[str]]:
        return failed(run_foreign_audit(materialize(shape, tmp_path / shape)))

    manual = audit("dispatch-only")
    assert list(manual) == ["a"] and "only referenced by .github/workflows/manual-mi35x.yml:manual-mi35x-8 on " \
        "['workflow_dispatch']" in manual["a"][0]
    partial = audit("missing-partition")
    assert partial == {"a": ["PARTIAL per-commit/amd/stage-b-test-1-gpu-small-amd: .github/workflows/pr-test-amd.yml:"
                             "stage-b-test-1-gpu-small-amd runs --auto-partition-id [0, 1] of --auto-partition-size 3: "
                             "partition(s) [2] never run"]}
    typo = audit("unknown-suite")
    assert sorted(typo) == ["a", "b"]
    assert typo["b"][0].endswith(f"--nightly, which nothing registers; did you mean {DSPARK}?")
    masked = audit("masked")
    assert sorted(masked) == ["a", "e"]
    assert masked["e"] == [".github/workflows/nightly-test-amd.yml:nightly-8-gpu-mi35x-deepseek-v4-pro-dspark:"
                           "Accuracy test (8-GPU): job continue-on-error: True: a failure is reported as success"
                           .join(["MASKED ", ""])]
    assert "(masked)" in masked["a"][0]


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = materialize("after", tmp_path / "repo")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_registration_forms_and_unreadable_registrations(tmp_path):
    root = tree(tmp_path, {
        "test/registered/misc/test_forms.py": """
            from sglang.test.ci.ci_register import register_amd_ci, register_cuda_ci, register_cpu_ci
            import sglang.test.ci.ci_register as reg
            SUITE = "stage-b-test-1-gpu-small-amd"
            register_cpu_ci(5, "base-a-test-cpu")
            reg.register_cuda_ci(est_time=60, stage="stage-b", runner_config="1-gpu-large", disabled="")
            register_amd_ci(est_time=60, suite=SUITE)
            if True:
                register_amd_ci(est_time=60, suite="stage-b-test-1-gpu-small-amd")
            raise SystemExit("the audit imported a test file")
        """,
    })
    suites = collect_suites(root)
    mine = [r for r in suites.registrations if r.file.endswith("test_forms.py")]
    assert [(r.backend, r.suite, r.est_time, r.disabled) for r in mine] == [
        ("cpu", "base-a-test-cpu", 5.0, None), ("cuda", "stage-b-test-1-gpu-large", 60.0, "")]
    assert suites.problems == [
        "test/registered/misc/test_forms.py:6: register_amd_ci(suite=SUITE): not a literal; "
        "run_suite.py reads the syntax tree and cannot see it",
        "test/registered/misc/test_forms.py:8: register_amd_ci(...) is not a module-level statement: "
        "run_suite.py never sees it, so the file is in no suite"]
    found = failed(run_foreign_audit(root))
    assert found["f"] == suites.problems
    assert found["c"] == ["test/registered/misc/test_forms.py:5: disabled='' in suite stage-b-test-1-gpu-large: "
                          "give the reason as a string"]
    assert any(f.startswith("DORMANT per-commit/cpu/base-a-test-cpu") for f in found["a"])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_nightly_suite_run_without_nightly_flag_and_empty_suite(tmp_path):
    root = tree(tmp_path, {
        ".github/workflows/extra.yml": """
            on:
              schedule:
                - cron: '0 3 * * *'
            jobs:
              forgot-nightly:
                runs-on: linux-mi35x-gpu-8
                steps:
                  - run: python3 test/run_suite.py --hw amd --suite nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark
              empty:
                runs-on: linux-h200-gpu-1
                steps:
                  - run: cd test && python3 run_suite.py --hw cuda --suite stage-b-test-1-gpu-small
        """,
    })
    found = failed(run_foreign_audit(root))
    assert sorted(found) == ["b", "d"]
    assert found["b"] == [
        ".github/workflows/extra.yml:forgot-nightly:step 1: runs --hw amd --suite "
        f"nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark, which nothing registers; registered as ['{DSPARK}'] "
        "(add --nightly: run_suite.py only picks nightly=True registrations with it)".join(["UNKNOWN ", ""])]
    assert found["d"] == ["EMPTY per-commit/cuda/stage-b-test-1-gpu-small: .github/workflows/extra.yml:empty:step 1 "
                          "runs it, but all 1 registration(s) are disabled: the runner finds nothing "
                          "and the step passes"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_adapter_declares_no_gates_and_reads_the_sglang_command():
    adapter = get_adapter("sglang")
    assert adapter.has_gates is False
    words = ("bash", "scripts/ci/amd/amd_ci_exec.sh", "-w", "/sglang-checkout/test", "python3", "run_suite.py",
             "--hw", "amd", "--suite", "s", "--nightly", "--auto-partition-id", "1", "--auto-partition-size", "3")
    call = adapter.find_call(words)
    targets, problem = adapter.targets({k: v for k, v in call.options.items()})
    assert problem is None and [(t.kind, t.id, t.shard) for t in targets] == [("suite", "nightly/amd/s", (2, 3))]
    assert adapter.targets({"--suite": "s", "--hw": "amd", "--auto-partition-id": "3",
                            "--auto-partition-size": "3"})[1].startswith("--auto-partition-id '3'")
    with pytest.raises(ValueError, match=r"unknown adapter 'gitlab'.*\['dspark', 'sglang'\]"):
        get_adapter("gitlab")
    proc = audit_cli(FIXTURES / "after", "--pytest-collection")
    assert proc.returncode == 2 and "--pytest-collection: only for this project's own registry" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_suite_on_a_runner_its_name_rules_out(tmp_path):
    root = tree(tmp_path, {})
    path = root / ".github/workflows/nightly-test-amd.yml"
    path.write_text(path.read_text().replace("runs-on: linux-mi35x-gpu-8", "runs-on: linux-mi325-gpu-1", 1))
    found = failed(run_foreign_audit(root))
    assert found == {"g": [
        "HARDWARE .github/workflows/nightly-test-amd.yml:nightly-8-gpu-mi35x-deepseek-r1-mxfp4:Accuracy test (8-GPU): "
        "runs nightly/amd/nightly-amd-8-gpu-mi35x-deepseek-r1-mxfp4, but the suite needs 8 GPU(s), "
        "runner linux-mi325-gpu-1 has 1"]}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_partition_id_from_a_matrix_key_that_does_not_exist(tmp_path):
    """sglang history: --auto-partition-id ${{ matrix.part }} in a job whose matrix has no `part`."""
    root = tree(tmp_path, {})
    path = root / ".github/workflows/pr-test-amd.yml"
    path.write_text(path.read_text().replace("part: [0, 1]", "runner: [linux-mi325-gpu-1]"))
    found = failed(run_foreign_audit(root))
    assert found["b"] == [".github/workflows/pr-test-amd.yml:stage-b-test-1-gpu-small-amd:Run test: "
                          "--auto-partition-id '' --auto-partition-size '2': expected 0 <= id < size"]
    assert found["a"][0].startswith("DORMANT per-commit/amd/stage-b-test-1-gpu-small-amd")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_default_adapter_on_an_sglang_tree_refuses_and_names_the_adapter():
    proc = subprocess.run([sys.executable, "-m", "ci.audit", "--root", str(FIXTURES / "before")],
                          cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "ci/hardware.yaml: missing under" in proc.stderr and "--adapter sglang" in proc.stderr
