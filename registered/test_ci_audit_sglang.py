"""The sglang adapter on self-written trees in sglang's shapes (registered/fixtures/sglang/, data only).

``base/`` is a complete tree: an inline per-commit job with a literal matrix, a reusable stage called
with ``with:`` inputs (suite, runner, partitions as JSON), a nightly workflow, and one nightly suite no
workflow runs (the DSpark incident). ``after/`` is an overlay (a BASE file naming the tree it starts
from). Every other shape is written by its test on top of ``base/``; each asserts the exact rule id
and severity of what it finds.
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
from ci.audit.foreign import check_target, run_foreign_audit
from ci.audit.rules import FOREIGN_RULES
from ci.registration import register
from registered.fixture_repo import REAL_ROOT

FIXTURES = REAL_ROOT / "registered" / "fixtures" / "sglang"
DSPARK = "nightly/amd/nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark"
CORE = "per-commit/cuda/base-b-test-1-gpu-small"
OVERLAY_META = frozenset({"BASE", "DELETE"})


def materialize(shape: str, dest: Path) -> Path:
    """Build the fixture tree ``shape`` at ``dest``: its BASE tree, then its overlay on top, minus DELETE."""
    overlay = FIXTURES / shape
    base = overlay / "BASE"
    if not base.is_file():   # a complete tree
        return Path(shutil.copytree(overlay, dest))
    shutil.copytree(FIXTURES / base.read_text().strip(), dest)
    shutil.copytree(overlay, dest, dirs_exist_ok=True,
                    ignore=lambda folder, names: OVERLAY_META & set(names) if Path(folder) == overlay else ())
    delete = overlay / "DELETE"
    for rel in delete.read_text().split() if delete.is_file() else []:
        (dest / rel).unlink()
    return dest


def tree(tmp_path: Path, files: dict[str, str], *, replace: dict[str, tuple[str, str]] | None = None) -> Path:
    """``base/`` at tmp_path/repo, with ``files`` written and ``replace`` (path -> (old, new)) applied."""
    root = materialize("base", tmp_path / "repo")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    for rel, (old, new) in (replace or {}).items():
        path = root / rel
        text = path.read_text()
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new))
    return root


def audit_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ci.audit", "--root", str(root), "--adapter", "sglang", *args],
                          cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)


def kinds(report) -> list[tuple[str, str, str]]:
    """(rule, severity, schedule/hardware/suite) of every finding, sorted."""
    return sorted((f.rule, f.severity, f"{f.schedule}/{f.hardware}/{f.suite}") for f in report.findings)


def finding(report, rule: str):
    [found] = [f for f in report.findings if f.rule == rule]
    return found


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_before_the_fix_the_dspark_nightly_suite_is_the_one_error_and_after_it_passes(tmp_path):
    before = audit_cli(FIXTURES / "base")
    assert before.returncode == 1, before.stdout + before.stderr
    lines = [line.strip() for line in before.stdout.splitlines() if line.strip().startswith(("error", "warning"))]
    assert lines == [f"error   [dormant-suite] DORMANT {DSPARK} (runner linux-mi35x-gpu-8): 1 registered file(s), "
                     "first at test/registered/amd/accuracy/test_dspark_mi35x.py:5; needs a workflow triggered by "
                     "a schedule; no workflow step runs it"]
    assert before.stdout.rstrip().splitlines()[-2:] == [f"audit: 1 error(s) in 1 of {len(FOREIGN_RULES)} rule(s)",
                                                        "dspark-audit: FAILED: 1 new finding(s) at or above error"]
    after = audit_cli(materialize("after", tmp_path / "after"))
    assert after.returncode == 0, after.stdout + after.stderr
    assert after.stdout.rstrip().endswith("audit: OK")
    row = next(line.split() for line in after.stdout.splitlines() if line.startswith(DSPARK + " "))
    assert row == [DSPARK, "1", "3600", "1", "nightly.yml", "schedule,", "workflow_dispatch", "linux-mi35x-gpu-8"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_json_findings_carry_rule_severity_key_and_locations():
    proc = audit_cli(FIXTURES / "base", "--format", "json")
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["adapter"] == "sglang" and data["ok"] is False
    assert [(f["rule"], f["severity"], f["schedule"], f["hardware"], f["suite"]) for f in data["findings"]] == [
        ("dormant-suite", "error", "nightly", "amd", "nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark")]
    assert data["findings"][0]["locations"] == [{"path": "test/registered/amd/accuracy/test_dspark_mi35x.py",
                                                 "line": 5}]
    jobs = {j["id"]: j for j in data["tables"]["jobs"]}
    assert jobs["per-commit/amd/stage-b-test-1-gpu-small-amd"]["partitions"] == "2"
    assert jobs[CORE]["partitions"] == "2" and jobs[CORE]["runner"] == "linux-h100-gpu-1"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_reusable_workflow_runs_the_suite_its_caller_names(tmp_path):
    """base: the suite comes from the caller's with: suite, the partitions from fromJson(inputs.partitions)."""
    assert kinds(run_foreign_audit(tree(tmp_path / "ok", {}))) == [("dormant-suite", "error", DSPARK)]
    renamed = run_foreign_audit(tree(tmp_path / "renamed", {}, replace={
        ".github/workflows/per-commit.yml": ("suite: base-b-test-1-gpu-small", "suite: base-b-test-1-gpu-smal")}))
    assert kinds(renamed) == [("dormant-suite", "error", DSPARK), ("dormant-suite", "error", CORE),
                              ("unknown-suite", "error", "per-commit/cuda/base-b-test-1-gpu-smal")]
    partial = run_foreign_audit(tree(tmp_path / "partial", {}, replace={
        ".github/workflows/per-commit.yml": ("partitions: '[0, 1]'", "partitions: '[0]'")}))
    assert kinds(partial) == [("dormant-suite", "error", DSPARK), ("dormant-suite", "error", CORE)]
    assert [f.message for f in partial.of("dormant-suite") if f.suite == "base-b-test-1-gpu-small"] == [
        f"PARTIAL {CORE}: .github/workflows/_stage.yml:run runs --auto-partition-id [0] of --auto-partition-size 2: "
        "partition(s) [1] never run"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_matrix_computed_by_a_previous_job_is_a_warning_never_dormant(tmp_path):
    report = run_foreign_audit(tree(tmp_path, {}, replace={".github/workflows/per-commit.yml": (
        "      partitions: '[0, 1]'", "      partitions: ${{ needs.plan.outputs.parts }}")}))
    assert kinds(report) == [("dormant-suite", "error", DSPARK), ("dormant-suite", "warning", CORE)]
    warning = next(f for f in report.findings if f.severity == "warning")
    assert "is computed at run time" in warning.why_unproven
    assert warning.locations[0].path == "test/registered/cuda/test_core_cuda.py"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_change_detection_gate_is_a_warning_and_a_false_gate_is_an_error(tmp_path):
    gated = run_foreign_audit(tree(tmp_path / "gated", {}, replace={".github/workflows/per-commit.yml": (
        "  cuda-core:\n", "  cuda-core:\n    if: needs.changes.outputs.core == 'true'\n")}))
    assert kinds(gated) == [("dormant-suite", "error", DSPARK), ("dormant-suite", "warning", CORE)]
    assert "needs.changes.outputs.core == 'true'" in finding_for(gated, CORE).why_unproven
    never = run_foreign_audit(tree(tmp_path / "never", {}, replace={".github/workflows/per-commit.yml": (
        "  cuda-core:\n", "  cuda-core:\n    if: false\n")}))
    assert kinds(never) == [("dormant-suite", "error", DSPARK), ("dormant-suite", "error", CORE)]


def finding_for(report, job_id: str):
    [found] = [f for f in report.findings if f"{f.schedule}/{f.hardware}/{f.suite}" == job_id]
    return found


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_repository_gate_is_unknown_without_repo_and_decided_with_it(tmp_path):
    root = tree(tmp_path, {}, replace={".github/workflows/nightly.yml": (
        "  r1-mi35x-8:\n", "  r1-mi35x-8:\n    if: github.repository == 'acme/widgets'\n")})
    r1 = "nightly/amd/nightly-amd-8-gpu-mi35x-r1"
    assert kinds(run_foreign_audit(root)) == [("dormant-suite", "error", DSPARK), ("dormant-suite", "warning", r1)]
    assert kinds(run_foreign_audit(root, repository="acme/widgets")) == [("dormant-suite", "error", DSPARK)]
    assert kinds(run_foreign_audit(root, repository="someone/fork")) == [("dormant-suite", "error", DSPARK),
                                                                         ("dormant-suite", "error", r1)]
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/widgets.git\n')
    report = run_foreign_audit(root)
    assert report.repository == "acme/widgets" and kinds(report) == [("dormant-suite", "error", DSPARK)]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_file_run_by_path_counts_as_running_its_registrations(tmp_path):
    solo = """
        from sglang.test.ci.ci_register import register_cuda_ci

        register_cuda_ci(est_time=30, suite="base-b-test-solo")
    """
    job = """
        on: [pull_request]
        jobs:
          solo:
            runs-on: linux-h100-gpu-1
            environment: gpu-runners
            steps:
              - run: python3 -u test/registered/cuda/test_solo_cuda.py
    """
    ran = run_foreign_audit(tree(tmp_path / "ran", {"test/registered/cuda/test_solo_cuda.py": solo,
                                                    ".github/workflows/solo.yml": job}))
    assert kinds(ran) == [("dormant-suite", "error", DSPARK)]
    alone = run_foreign_audit(tree(tmp_path / "alone", {"test/registered/cuda/test_solo_cuda.py": solo}))
    assert kinds(alone) == [("dormant-suite", "error", DSPARK),
                            ("dormant-suite", "error", "per-commit/cuda/base-b-test-solo")]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_another_script_named_run_suite_is_not_the_registry_runner(tmp_path):
    other = """
        on: [schedule]
        jobs:
          other:
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: python3 python/pkg/gen/test/run_suite.py --suite nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark
              - run: cd python/pkg/gen/test && python3 run_suite.py --suite 2-gpu
    """
    report = run_foreign_audit(tree(tmp_path, {".github/workflows/other.yml": other}))
    assert kinds(report) == [("dormant-suite", "error", DSPARK)]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_runner_given_through_a_reusable_workflow_input_is_checked_like_an_inline_one(tmp_path):
    eight = """
        from sglang.test.ci.ci_register import register_amd_ci

        register_amd_ci(est_time=600, suite="stage-c-test-8-gpu-amd")
    """
    caller = """
      amd-eight:
        uses: ./.github/workflows/_stage.yml
        with:
          suite: stage-c-test-8-gpu-amd
          hw: amd
          runner: linux-mi325-gpu-1
          partitions: '[0]'
          size: '1'
    """
    root = tree(tmp_path, {"test/registered/amd/test_eight_amd.py": eight})
    path = root / ".github/workflows/per-commit.yml"
    path.write_text(path.read_text() + textwrap.indent(textwrap.dedent(caller).lstrip("\n"), "  "))
    report = run_foreign_audit(root)
    assert kinds(report) == [("dormant-suite", "error", DSPARK),
                             ("runner-mismatch", "error", "per-commit/amd/stage-c-test-8-gpu-amd")]
    assert finding(report, "runner-mismatch").message.endswith("the suite needs 8 GPU(s), runner linux-mi325-gpu-1 "
                                                               "has 1")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_dispatch_only_is_a_warning_and_an_unresolved_step_is_a_warning(tmp_path):
    manual = run_foreign_audit(tree(tmp_path / "manual", {".github/workflows/manual.yml": """
        on: [workflow_dispatch]
        jobs:
          by-hand:
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: >-
                  cd test && python3 run_suite.py --hw amd
                  --suite nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark --nightly
    """}))
    assert kinds(manual) == [("dormant-suite", "warning", DSPARK)]
    assert finding(manual, "dormant-suite").why_unproven == "runs only when someone dispatches it by hand"
    unresolved = run_foreign_audit(tree(tmp_path / "unresolved", {".github/workflows/planned.yml": """
        on: [schedule]
        jobs:
          planned:
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: cd test && python3 run_suite.py --hw amd --suite ${{ needs.plan.outputs.suite }} --nightly
    """}))
    assert kinds(unresolved) == [("dormant-suite", "warning", DSPARK),
                                 ("unresolved-step", "warning",
                                  "nightly/amd/run_suite.py --suite known only at run time")]
    assert "unresolved step(s) could run it" in finding(unresolved, "dormant-suite").why_unproven


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_masked_unknown_empty_and_nightly_flag_shapes(tmp_path):
    report = run_foreign_audit(tree(tmp_path, {".github/workflows/extra.yml": """
        on:
          schedule:
            - cron: '0 3 * * *'
        jobs:
          forgot-nightly:
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: python3 test/run_suite.py --hw amd --suite nightly-amd-8-gpu-mi35x-deepseek-v4-pro-dspark
          empty:
            runs-on: linux-h100-gpu-1
            steps:
              - run: cd test && python3 run_suite.py --hw cuda --suite stage-b-test-1-gpu-small
          masked:
            runs-on: linux-mi35x-gpu-8
            continue-on-error: true
            steps:
              - run: cd test && python3 run_suite.py --hw amd --suite nightly-amd-8-gpu-mi35x-r1 --nightly
    """}))
    assert kinds(report) == [("dormant-suite", "error", DSPARK),
                             ("empty-suite", "error", "per-commit/cuda/stage-b-test-1-gpu-small"),
                             ("masked-step", "error", "nightly/amd/nightly-amd-8-gpu-mi35x-r1"),   # what it masks
                             ("unknown-suite", "error", DSPARK.replace("nightly/", "per-commit/", 1))]
    assert finding(report, "unknown-suite").message.endswith(
        f"registered as ['{DSPARK}'] (add --nightly: run_suite.py only picks nightly=True registrations with it)")
    assert finding(report, "masked-step").message == (
        "MASKED .github/workflows/extra.yml:masked:step 1: job continue-on-error: True: "
        "a failure is reported as success")


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
    report = run_foreign_audit(root)
    assert report.violations["unreadable-registration"] == suites.problems
    assert report.violations["disabled-without-reason"] == [
        "test/registered/misc/test_forms.py:5: disabled='' in suite stage-b-test-1-gpu-large: "
        "give the reason as a string"]
    assert ("dormant-suite", "error", "per-commit/cpu/base-a-test-cpu") in kinds(report)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_one_file_suite_a_typo_away_from_a_bigger_one_is_a_warning(tmp_path):
    report = run_foreign_audit(tree(tmp_path, {"test/registered/amd/test_gamma_amd.py": """
        from sglang.test.ci.ci_register import register_amd_ci

        register_amd_ci(est_time=30, suite="stage-b-test-1-gpu-smal-amd")
    """}))
    typo = finding(report, "suite-name-typo")
    assert (typo.severity, typo.suite) == ("warning", "stage-b-test-1-gpu-smal-amd")
    assert "is 1 edit(s) from 'stage-b-test-1-gpu-small-amd' (2 file(s))" in typo.message


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_adapter_reads_the_sglang_command_and_declares_no_gates():
    adapter = get_adapter("sglang")
    assert adapter.has_gates is False
    words = ("bash", "ci/exec.sh", "-w", "/src/test", "python3", "run_suite.py",
             "--hw", "amd", "--suite", "s", "--nightly", "--auto-partition-id", "1", "--auto-partition-size", "3")
    call = adapter.find_call(words)
    targets, problem = adapter.targets(dict(call.options))
    assert problem is None and [(t.kind, t.id, t.shard) for t in targets] == [("suite", "nightly/amd/s", (2, 3))]
    assert adapter.targets({"--suite": "s", "--hw": "amd", "--auto-partition-id": "3",
                            "--auto-partition-size": "3"})[1].startswith("--auto-partition-id '3'")
    assert adapter.find_call(("python3", "python/pkg/gen/test/run_suite.py", "--hw", "amd", "--suite", "s")) is None
    assert adapter.find_call(("python3", "run_suite.py", "--suite", "s")) is None
    with pytest.raises(ValueError, match=r"unknown adapter 'gitlab'.*\['dspark', 'sglang'\]"):
        get_adapter("gitlab")
    proc = audit_cli(FIXTURES / "base", "--pytest-collection")
    assert proc.returncode == 2 and "--pytest-collection: only for this project's own registry" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_wrong_root_is_a_usage_error_not_a_silent_pass(tmp_path):
    (tmp_path / "empty").mkdir()
    assert check_target(tmp_path / "empty", "sglang").startswith(f"--root {tmp_path / 'empty'}: no test/registered/")
    proc = audit_cli(tmp_path / "empty")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.count("\n") == 1 and "no test/registered/" in proc.stderr
    root = tree(tmp_path, {})
    shutil.rmtree(root / ".github")
    proc = audit_cli(root)
    assert proc.returncode == 2 and "no .github/workflows/*.yml" in proc.stderr and proc.stderr.count("\n") == 1


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_own_adapter_on_an_sglang_tree_refuses_and_names_the_adapter():
    """nox -s audit passes --adapter dspark (this project's registry); on an sglang tree that is refused
    with the adapter to use, while the default --adapter auto audits it as sglang."""
    own = subprocess.run([sys.executable, "-m", "ci.audit", "--adapter", "dspark", "--root", str(FIXTURES / "base")],
                         cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)
    assert own.returncode == 2 and own.stdout == ""
    assert "--adapter sglang" in own.stderr and own.stderr.count("\n") == 1
    auto = subprocess.run([sys.executable, "-m", "ci.audit", "--root", str(FIXTURES / "base")],
                          cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)
    assert auto.returncode == 1 and auto.stdout.startswith("dspark-audit: sglang adapter, "), auto.stderr
