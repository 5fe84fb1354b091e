"""The suite runner on fixture repositories: env, results, and every way a job must fail."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from registered.fixture_repo import FixtureRepo
from ci.registration import register

SUITES = """
import os
import pytest
from registered.skips import registered_skip

@register(suite="env", hardware="cpu", schedule="per-commit", est_time=1,
          env={"paged": {"DSPARK_KV_BACKEND": "paged"}, "unified": {"DSPARK_KV_BACKEND": "unified"}})
def test_variant_env_is_set():
    variant = os.environ["DSPARK_JOB"].split("[")[1].rstrip("]")
    assert os.environ["DSPARK_KV_BACKEND"] == variant
    assert os.environ["TRITON_INTERPRET"] == "1"                     # cpu default env
    assert os.environ["DSPARK_KERNEL_BACKEND"] == "triton-interpret"

@register(suite="env", hardware="cpu", schedule="per-commit", est_time=1, env={"paged": {"DSPARK_KV_BACKEND": "paged"}})
class TestWithRegisteredSkip:
    @pytest.mark.parametrize("n", [1, 2])
    def test_runs(self, n):
        assert n in (1, 2)

    def test_gpu_only(self):
        registered_skip("needs-gpu")

@register(suite="silent", hardware="cpu", schedule="per-commit", est_time=1)
def test_ok():
    pass

@register(suite="silent", hardware="cpu", schedule="per-commit", est_time=1)
def test_silently_skipped():
    pytest.skip("flaky, will look later")

@register(suite="unknown-key", hardware="cpu", schedule="per-commit", est_time=1)
def test_ok_too():
    pass

@register(suite="unknown-key", hardware="cpu", schedule="per-commit", est_time=1)
def test_made_up_key():
    pytest.skip("[registered:no-such-key] sounds official")

@register(suite="all-skipped", hardware="cpu", schedule="per-commit", est_time=1)
def test_only_gpu():
    registered_skip("needs-gpu")

@register(suite="empty", hardware="cpu", schedule="per-commit", est_time=1)
class TestNotCollectable:
    def __init__(self):          # pytest cannot collect a test class with __init__
        pass
    def test_never(self):
        pass

@register(suite="failing", hardware="cpu", schedule="per-commit", est_time=1)
def test_fails():
    assert 1 + 1 == 3, "arithmetic"

@register(suite="two", hardware="cpu", schedule="per-commit", est_time=1)
def test_two_a():
    pass

@register(suite="two", hardware="cpu", schedule="per-commit", est_time=1)
def test_two_b():
    pass
"""


def _repo(tmp_path) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_suites.py", SUITES)
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_variant_job_passes_with_env_results_and_step_summary(tmp_path):
    repo = _repo(tmp_path)
    summary = tmp_path / "step-summary.md"
    for variant, expected_cases, workers in (("paged", 4, "2"), ("unified", 1, "1")):  # with and without xdist
        job = f"per-commit/cpu/env[{variant}]"
        proc = repo.run_module("ci.run_suite", "--job", job, "--workers", workers, GITHUB_STEP_SUMMARY=str(summary))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out_dir = tmp_path / "ci-results" / f"per-commit_cpu_env_{variant}"
        cases = list(ET.parse(out_dir / "junit-1-of-1.xml").getroot().iter("testcase"))
        assert len(cases) == expected_cases
        assert (out_dir / "summary-1-of-1.md").read_text().startswith(f"### PASS: `{job}` shard 1/1")
        assert (out_dir / "durations-1-of-1.json").is_file()
    text = summary.read_text()
    assert "### PASS: `per-commit/cpu/env[paged]`" in text and "### PASS: `per-commit/cpu/env[unified]`" in text
    assert "| 3 | 0 | 0 | 1 | 0 |" in text  # paged: 3 passed, 1 registered skip


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_unregistered_skips_fail_the_job(tmp_path):
    repo = _repo(tmp_path)
    for job, needle in (("per-commit/cpu/silent", "flaky, will look later"),
                        ("per-commit/cpu/unknown-key", "[registered:no-such-key]")):
        proc = repo.run_module("ci.run_suite", "--job", job, "--workers", "1")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "unregistered skip" in proc.stderr and needle in proc.stderr
        assert "### FAIL" in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_job_whose_tests_all_skip_fails(tmp_path):
    proc = _repo(tmp_path).run_module("ci.run_suite", "--job", "per-commit/cpu/all-skipped", "--workers", "1")
    assert proc.returncode == 1
    assert "tested nothing" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_pytest_collecting_nothing_is_a_clear_failure(tmp_path):
    proc = _repo(tmp_path).run_module("ci.run_suite", "--job", "per-commit/cpu/empty", "--workers", "1")
    assert proc.returncode == 5
    assert "collected no test (exit 5)" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_failing_test_fails_the_job_and_is_listed(tmp_path):
    proc = _repo(tmp_path).run_module("ci.run_suite", "--job", "per-commit/cpu/failing", "--workers", "1")
    assert proc.returncode == 1
    assert "**Failed tests**" in proc.stdout and "test_fails" in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_empty_shard_and_unknown_job_fail_before_pytest_runs(tmp_path):
    repo = _repo(tmp_path)
    proc = repo.run_module("ci.run_suite", "--job", "per-commit/cpu/silent", "--shard", "3/3")
    assert proc.returncode == 1 and "selects no test" in proc.stderr
    proc = repo.run_module("ci.run_suite", "--job", "per-commit/cpu/silen")
    assert proc.returncode == 2 and "no registered job 'per-commit/cpu/silen'" in proc.stderr
    proc = repo.run_module("ci.run_suite", "--job", "per-commit/cpu/silent", "--shard", "3/x")
    assert proc.returncode == 2 and "I/N" in proc.stderr
    assert not (tmp_path / "ci-results").exists()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_dry_run_lists_each_shard(tmp_path):
    repo = _repo(tmp_path)
    listed = []
    for shard in ("1/2", "2/2"):
        proc = repo.run_module("ci.run_suite", "--job", "per-commit/cpu/two", "--shard", shard, "--dry-run")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].startswith(f"# per-commit/cpu/two shard {shard}: 1 node id(s)")
        listed += lines[1:]
    assert sorted(listed) == ["registered/test_suites.py::test_two_a", "registered/test_suites.py::test_two_b"]
    assert not (tmp_path / "ci-results").exists()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_one_shard_runs_only_its_tests(tmp_path):
    repo = _repo(tmp_path)
    proc = repo.run_module("ci.run_suite", "--job", "per-commit/cpu/two", "--shard", "2/2", "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = ET.parse(tmp_path / "ci-results" / "per-commit_cpu_two" / "junit-2-of-2.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases] == ["test_two_b"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_run_many_runs_every_shard_and_fails_at_the_end(tmp_path):
    repo = _repo(tmp_path)
    proc = repo.run_module("ci.run_many", "--schedule", "per-commit", "--hardware", "cpu", "--suite-prefix", "two",
                           "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "jobs: 2 passed, 0 failed, 0 skipped" in proc.stdout
    proc = repo.run_module("ci.run_many", "--schedule", "per-commit", "--suite-prefix", "fail", "--workers", "1")
    assert proc.returncode == 1 and "FAIL" in proc.stdout
    proc = repo.run_module("ci.run_many", "--schedule", "nightly")
    assert proc.returncode == 1 and "no registered job matches" in proc.stderr


NIGHTLY_MI35X = """
import os

@register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900)
def test_sees_hip_policies():
    assert os.environ["DSPARK_PLATFORM"] == "hip"
    assert os.environ["TRITON_INTERPRET"] == "1"   # the host's (cpu) default env, not the MI35x one
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_mi35x_nightly_refuses_off_mi35x_unless_emulating_visibly(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_amd.py", NIGHTLY_MI35X)
    args = ("--schedule", "nightly", "--hardware-prefix", "mi35x", "--require-mi35x", "--workers", "1")
    proc = repo.run_module("ci.run_many", *args)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "REFUSED: this machine is not an MI35x" in proc.stderr and "--emulate" in proc.stderr
    proc = repo.run_module("ci.run_many", *args, "--emulate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "!!! EMULATION MODE: MI35x jobs on cpu" in proc.stdout
    assert "> **EMULATION**: nightly/mi35x-8/dspark-e2e runs with DSPARK_PLATFORM=hip emulated" in proc.stdout
    assert "jobs: 1 passed, 0 failed" in proc.stdout
