"""The suite runner and its pytest plugin on fixture repositories: every way a job must fail.

Each test runs the real runner (``python -m ci.runner.run_suite``) or plain pytest with the plugin
in a subprocess on a throw-away repository; none of the fixture tests imports torch.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

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
    assert "DSPARK_CHECK" not in os.environ and "DSPARK_SPEC_ALGO" not in os.environ   # hermetic

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

@register(suite="empty", hardware="cpu", schedule="per-commit", est_time=1)
def test_runs_beside_the_uncollectable_class():
    pass

@register(suite="failing", hardware="cpu", schedule="per-commit", est_time=1)
def test_fails():
    assert 1 + 1 == 3, "arithmetic"

@register(suite="params", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("x", [1, 2, 3])
def test_param(x):
    assert x > 0

def _machine_dependent():
    return [] if os.environ.get("DSPARK_PLATFORM") != "cuda" else ["sm90"]   # e.g. devices found at import

@register(suite="vanish", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("arch", _machine_dependent())
def test_per_arch(arch):
    assert arch

@register(suite="vanish", hardware="cpu", schedule="per-commit", est_time=1)
def test_vanish_neighbour():
    pass

@register(suite="xfail", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.xfail(run=False, reason="crashes the interpreter")
def test_never_runs():
    raise SystemExit(1)

@register(suite="xfail", hardware="cpu", schedule="per-commit", est_time=1)
def test_xfail_neighbour():
    pass
"""


def _repo(tmp_path, body: str = SUITES, name: str = "test_suites.py") -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    # the plugin runs inside the fixture's pytest process (cwd = fixture root), where ``impl`` is the
    # fixture's package: give it the real gate table, which the catalog checks import
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file(name, body)
    return repo


def _suite(junit):
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties").iter("property")} \
        if suite.find("properties") is not None else {}
    return suite, props


def _results(tmp_path, job: str, tag: str = "1-of-1"):
    out = tmp_path / "ci-results" / job.replace("/", "_").replace("[", "_").replace("]", "")
    return out / f"junit-{tag}.xml", out / f"summary-{tag}.md", out


# ------------------------------------------------------------------ env, results, JUnit
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_variant_jobs_pass_with_hermetic_env_junit_names_and_summary(tmp_path):
    repo = _repo(tmp_path)
    summary = tmp_path / "step-summary.md"
    for variant, expected_cases, workers in (("paged", 4, "2"), ("unified", 1, "1")):  # with and without xdist
        job = f"per-commit/cpu/env[{variant}]"
        proc = repo.run_module("ci.runner.run_suite", "--job", job, "--workers", workers,
                               GITHUB_STEP_SUMMARY=str(summary),
                               DSPARK_CHECK="yes", DSPARK_SPEC_ALGO="mtp", TRITON_INTERPRET="0")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = proc.stdout + proc.stderr
        # 17 §1: stray gate variables are removed, each printed; every gate's effective value is shown
        assert "[ci] hermetic env: removed DSPARK_CHECK='yes'" in out
        assert "[ci] hermetic env: removed DSPARK_SPEC_ALGO='mtp'" in out
        assert f"kv_backend      DSPARK_KV_BACKEND={variant}" in out
        assert "check_mode      DSPARK_CHECK unset -> default (off)" in out
        junit, md, out_dir = _results(tmp_path, job)
        suite, props = _suite(junit)
        assert suite.get("name") == job                                     # 13 §7: job id + variant
        assert len(list(suite.iter("testcase"))) == expected_cases
        assert props["ci.job"] == job and props["emulated"] == "no" and props["ci.verdict"] == "PASS"
        assert props["attestation"] == "not applicable (cpu label)" and "machine.torch" in props
        assert md.read_text().startswith(f"### PASS: `{job}` shard 1/1")
        assert json.loads((out_dir / "durations-1-of-1.json").read_text())
    text = summary.read_text()
    assert "### PASS: `per-commit/cpu/env[paged]`" in text and "### PASS: `per-commit/cpu/env[unified]`" in text
    assert "| 3 | 0 | 0 | 0 | 1 | 0 | 0 |" in text  # paged: 3 passed, 0 flaky, 0 failed, 0 errors, 1 registered skip
    assert "**jobs: 1 passed, 0 failed**" in text


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_unregistered_skips_and_xfail_that_never_runs_fail_the_job(tmp_path):
    repo = _repo(tmp_path)
    for job, needle in (("per-commit/cpu/silent", "flaky, will look later"),
                        ("per-commit/cpu/unknown-key", "[registered:no-such-key]"),
                        ("per-commit/cpu/xfail", "xfail(run=False) never runs its body")):
        proc = repo.run_module("ci.runner.run_suite", "--job", job, "--workers", "1")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert needle in proc.stderr, proc.stderr
        assert "### FAIL" in proc.stdout and "jobs: 0 passed, 1 failed" in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_job_in_which_no_body_ran_fails(tmp_path):
    proc = _repo(tmp_path).run_module("ci.runner.run_suite", "--job", "per-commit/cpu/all-skipped", "--workers", "1")
    assert proc.returncode == 1
    assert "no registered test body ran" in proc.stderr and "this job tested nothing" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_registration_that_collects_nothing_fails_even_beside_passing_tests(tmp_path):
    proc = _repo(tmp_path).run_module("ci.runner.run_suite", "--job", "per-commit/cpu/empty", "--workers", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("registered/test_suites.py::TestNotCollectable (registered at registered/test_suites.py:"
            in proc.stderr and "pytest collected no test for this registration" in proc.stderr)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_parameters_that_vanish_on_this_machine_fail_the_job(tmp_path):
    proc = _repo(tmp_path).run_module("ci.runner.run_suite", "--job", "per-commit/cpu/vanish", "--workers", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "its parameter list is empty on this machine" in proc.stderr
    assert "vanished parameters are not a pass" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_any_deselection_of_a_jobs_test_fails_it(tmp_path):
    repo = _repo(tmp_path)
    job = "per-commit/cpu/params"
    proc = repo.run_module("ci.runner.run_suite", "--job", job, "--workers", "1", "--", "-k", "not test_param[2]")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("registered/test_suites.py::test_param[2]: a test of this job was deselected" in proc.stderr)
    proc = repo.run_module("ci.runner.run_suite", "--job", job, "--workers", "1", "--",
                           "--deselect", "registered/test_suites.py::test_param[3]")
    assert proc.returncode == 1 and "test_param[3]: a test of this job was deselected" in proc.stderr
    proc = repo.run_module("ci.runner.run_suite", "--job", job, "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_failing_test_fails_the_job_and_is_listed(tmp_path):
    proc = _repo(tmp_path).run_module("ci.runner.run_suite", "--job", "per-commit/cpu/failing", "--workers", "1")
    assert proc.returncode == 1
    assert "**Failed tests**" in proc.stdout and "test_fails" in proc.stdout and "arithmetic" in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_unknown_job_group_and_bad_shard_fail_before_pytest_runs(tmp_path):
    repo = _repo(tmp_path)
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/silen")
    assert proc.returncode == 2 and "no registered job 'per-commit/cpu/silen'" in proc.stderr
    proc = repo.run_module("ci.runner.run_suite", "--group", "per-commit/cpux")
    assert proc.returncode == 2 and "no registered group 'per-commit/cpux'" in proc.stderr
    proc = repo.run_module("ci.runner.run_suite", "--group", "per-commit/cpu", "--shard", "3/x")
    assert proc.returncode == 2 and "I/N" in proc.stderr
    # more shards than tests
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/silent", "--shard", "40/40")
    assert proc.returncode == 1 and "selects no test" in proc.stderr
    assert not (tmp_path / "ci-results").exists()


# ------------------------------------------------------------------ plain pytest with the plugin
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_plain_pytest_selects_a_job_and_suites_by_marker(tmp_path):
    repo = _repo(tmp_path)
    repo.write("registered/conftest.py", 'pytest_plugins = ["ci.runner.pytest_plugin"]\n')
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\naddopts = "-ra --strict-markers"\n')

    def pytest(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                              cwd=tmp_path, env=repo.env(), capture_output=True, text=True, timeout=300, check=False)

    proc = pytest("registered", "--ci-job", "per-commit/cpu/params", "--collect-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [ln for ln in proc.stdout.splitlines() if "::" in ln] == [
        f"registered/test_suites.py::test_param[{i}]" for i in (1, 2, 3)]
    proc = pytest("registered", "-m", "params or failing", "--collect-only")   # a marker per suite
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(ln for ln in proc.stdout.splitlines() if "::" in ln) == [
        "registered/test_suites.py::test_fails"] + [f"registered/test_suites.py::test_param[{i}]" for i in (1, 2, 3)]
    proc = pytest("registered", "--ci-job", "per-commit/cpu/nope")
    assert proc.returncode == 4 and "no registered job 'per-commit/cpu/nope'" in proc.stderr


# ------------------------------------------------------------------ hangs, kills, flaky
HANGS = """
import signal
import time

@register(suite="hang", hardware="cpu", schedule="per-commit", est_time=1, timeout=2)
def test_hangs():
    time.sleep(60)

@register(suite="hang", hardware="cpu", schedule="per-commit", est_time=1)
def test_after_the_hang():
    pass

@register(suite="stuck", hardware="cpu", schedule="per-commit", est_time=1, timeout=2)
def test_first():
    pass

@register(suite="stuck", hardware="cpu", schedule="per-commit", est_time=1, timeout=2)
def test_unkillable():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGINT})   # pytest-timeout cannot fire
    time.sleep(60)
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
def test_a_hung_test_is_a_named_failure_with_junit_and_summary(tmp_path):
    repo = _repo(tmp_path, HANGS, "test_hangs.py")
    start = time.monotonic()
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/hang", "--workers", "1")
    assert time.monotonic() - start < 50
    assert proc.returncode == 1, proc.stdout + proc.stderr
    junit, md, _ = _results(tmp_path, "per-commit/cpu/hang")
    suite, _ = _suite(junit)
    failures = {c.get("name"): c.find("failure") for c in suite.iter("testcase")}
    assert failures["test_hangs"] is not None and "Timeout (>2.0s)" in failures["test_hangs"].get("message")
    assert failures["test_after_the_hang"] is None          # the process lived on
    assert "test_hangs" in md.read_text() and "Timeout" in md.read_text()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=14)
def test_a_killed_pytest_still_leaves_junit_and_a_summary_that_say_what_happened(tmp_path):
    repo = _repo(tmp_path, HANGS, "test_hangs.py")
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/stuck", "--workers", "1",
                           "--job-timeout", "15", "--kill-grace", "1")
    assert proc.returncode != 0
    assert "the job exceeded its 15s time limit before the job finished" in proc.stderr, proc.stderr
    assert "running when it stopped: registered/test_hangs.py::test_unkillable" in proc.stderr
    junit, md, _ = _results(tmp_path, "per-commit/cpu/stuck")
    suite, props = _suite(junit)
    assert props["ci.written-by"].startswith("ci.runner.run_suite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["test_first"].find("failure") is None
    assert "did not finish" in cases["test_unkillable"].find("failure").get("message")
    assert "### FAIL" in md.read_text() and "time limit" in md.read_text()


FLAKY = """
from pathlib import Path

def _attempt(name):
    marker = Path(__file__).with_name(name)
    n = int(marker.read_text()) if marker.exists() else 0
    marker.write_text(str(n + 1))
    return n

@register(suite="retry", hardware="cpu", schedule="per-commit", est_time=1, retries=2)
def test_passes_second_time():
    assert _attempt(".flaky-a") >= 1, "first attempt fails"

@register(suite="retry", hardware="cpu", schedule="per-commit", est_time=1)
def test_steady():
    pass

@register(suite="retry-fail", hardware="cpu", schedule="per-commit", est_time=1, retries=1)
def test_always_fails():
    assert False, "broken for real"

@register(suite="no-retry", hardware="cpu", schedule="per-commit", est_time=1)
def test_fails_once_not_opted_in():
    assert _attempt(".flaky-b") >= 1, "first attempt fails"
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_flaky_is_its_own_column_and_one_junit_case_and_only_opted_in_tests_rerun(tmp_path):
    repo = _repo(tmp_path, FLAKY, "test_flaky.py")
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/retry", "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    junit, md, _ = _results(tmp_path, "per-commit/cpu/retry")
    suite, props = _suite(junit)
    cases = [c for c in suite.iter("testcase") if c.get("name") == "test_passes_second_time"]
    assert len(cases) == 1, "a rerun test is one JUnit case, never two passes"
    case_props = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    assert case_props["flaky"].startswith("passed only on attempt 2")
    assert props["ci.flaky"] == "registered/test_flaky.py::test_passes_second_time"
    assert "| 1 | 1 | 0 | 0 | 0 | 0 | 0 |" in md.read_text()         # 1 passed, 1 flaky
    assert "**Flaky**" in md.read_text()
    for job, needle in (("per-commit/cpu/retry-fail", "broken for real"),
                        ("per-commit/cpu/no-retry", "first attempt fails")):
        proc = repo.run_module("ci.runner.run_suite", "--job", job, "--workers", "1")
        assert proc.returncode == 1 and needle in proc.stdout, proc.stdout + proc.stderr


# ------------------------------------------------------------------ attestation
HARDWARE = """
import os

@register(suite="gpu", hardware="h200-1", schedule="per-commit", est_time=1)
def test_on_h200():
    assert os.environ["DSPARK_HARDWARE"] == "h200-1"

@register(suite="gpu", hardware="mi35x-1", schedule="per-commit", est_time=1)
def test_on_mi35x():
    assert os.environ["DSPARK_PLATFORM"] == "hip"
    assert "TRITON_INTERPRET" not in os.environ     # the (fake) H200 host's env: compiled Triton
"""

FAKE_H200 = '''
from ci.runner.machine import Machine

def pytest_ci_machine(config):
    return Machine("h200-1", "h200-1", "cuda", "sm90", 1, torch="2.11.0+cu128", torch_build="cuda",
                   device_name="NVIDIA H200", triton="3.6.0", cuda="12.8")
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_a_gpu_job_refuses_a_machine_that_is_not_its_label(tmp_path):
    repo = _repo(tmp_path, HARDWARE, "test_hw.py")
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/h200-1/gpu", "--workers", "1")  # this CPU box
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("attestation failed for h200-1 (job per-commit/h200-1/gpu): expected a CUDA build of torch with a "
            "visible NVIDIA (CUDA) GPU, found torch " in proc.stderr), proc.stderr
    junit, md, _ = _results(tmp_path, "per-commit/h200-1/gpu")
    suite, props = _suite(junit)
    assert props["attestation"] == "FAILED" and "expected a CUDA build" in props["attestation.failure"]
    assert not list(suite.iter("testcase")), "nothing runs on a machine that failed attestation"
    assert "attestation FAILED" in md.read_text()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_mi35x_job_refuses_an_h200_unless_emulating_visibly(tmp_path):
    repo = _repo(tmp_path, HARDWARE, "test_hw.py")
    repo.write("registered/conftest.py", FAKE_H200)
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/mi35x-1/gpu", "--workers", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ("attestation failed for mi35x-1 (job per-commit/mi35x-1/gpu): expected a HIP build of torch with a "
            "visible AMD (ROCm/HIP) GPU, found torch 2.11.0+cu128 (cuda build), 1 visible cuda device(s)"
            in proc.stderr), proc.stderr
    assert "machine record from the pytest_ci_machine hook (a conftest)" in proc.stdout   # never silent

    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/mi35x-1/gpu", "--workers", "1", "--emulate")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "!!! EMULATION: per-commit/mi35x-1/gpu runs with DSPARK_PLATFORM=hip on this machine" in proc.stdout
    junit, md, _ = _results(tmp_path, "per-commit/mi35x-1/gpu")
    _, props = _suite(junit)
    assert props["attestation"] == "EMULATED" and "DSPARK_PLATFORM=hip emulated on 1 x NVIDIA H200" in props["emulated"]
    assert props["machine.device_name"] == "NVIDIA H200" and props["machine.cuda"] == "12.8"
    assert "> **EMULATION**: per-commit/mi35x-1/gpu runs with DSPARK_PLATFORM=hip emulated" in md.read_text()

    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/h200-1/gpu", "--workers", "1")   # right label
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[ci] attestation OK: job per-commit/h200-1/gpu on label h200-1" in proc.stdout


# ------------------------------------------------------------------ groups, shards, totals
GROUPED = """
@register(suite="big", hardware="cpu", schedule="per-commit", est_time=500)
def test_big_a(): pass

@register(suite="big", hardware="cpu", schedule="per-commit", est_time=500)
def test_big_b(): pass

@register(suite="small", hardware="cpu", schedule="per-commit", est_time=100,
          env={"x": {"DSPARK_CHECK": "on"}, "y": {"DSPARK_CHECK": "off"}})
def test_small(): pass

@register(suite="broken", hardware="cpu", schedule="per-commit", est_time=100)
def test_broken():
    assert False

@register(suite="e2e", hardware="mi35x-8", schedule="nightly", est_time=100)
def test_nightly_one(): pass

@register(suite="verify", hardware="mi35x-8", schedule="nightly", est_time=100)
def test_nightly_two(): pass
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=14)
def test_group_shard_runs_each_job_in_its_own_process_and_counts_jobs_and_tests_apart(tmp_path):
    from ci.registry.jobs import load_registry

    repo = _repo(tmp_path, GROUPED, "test_grouped.py")
    registry = load_registry(tmp_path)
    group = registry.groups["per-commit/cpu"]
    assert group.shards == 2                                        # 1300 s over a 600 s budget
    shards = [registry.group_shard("per-commit/cpu", i, 2) for i in (1, 2)]
    pairs = sorted((j.id, t) for shard in shards for j, tests in shard for t in tests)
    assert pairs == sorted((j.id, t.node_id) for j in group.jobs for t in j.tests)   # each pair exactly once
    shard = next(s for s in shards if any(j.id == "per-commit/cpu/broken" for j, _ in s))
    index = shards.index(shard) + 1
    proc = repo.run_module("ci.runner.run_suite", "--group", "per-commit/cpu", "--shard", f"{index}/2",
                           "--workers", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    ran = [ln.split()[3] for ln in proc.stdout.splitlines() if ln.startswith("[ci] === job ")]
    assert ran == [j.id for j, _ in shard]                          # one pytest process per job, in order
    passed_tests = sum(len(t) for j, t in shard if j.id != "per-commit/cpu/broken")
    assert f"jobs: {len(shard) - 1} passed, 1 failed" in proc.stdout
    assert f"tests: {passed_tests} passed, 0 flaky, 1 failed" in proc.stdout

    for i, shard in enumerate(shards, 1):      # --job J --shard I/N: the tests of J that group shard I/N holds
        proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/big", "--shard", f"{i}/2", "--dry-run")
        assert proc.returncode == 0, proc.stderr
        listed = [ln for ln in proc.stdout.splitlines() if ln.startswith("registered/")]
        assert listed == next(t for j, t in shard if j.id == "per-commit/cpu/big")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_run_many_selects_one_nightly_job_and_reports_jobs_not_tests(tmp_path):
    repo = _repo(tmp_path, GROUPED, "test_grouped.py")
    args = ("--schedule", "nightly", "--hardware-prefix", "mi35x", "--workers", "1")
    proc = repo.run_module("ci.runner.run_many", *args, "--require-mi35x")
    assert proc.returncode == 3 and "REFUSED: this machine is not an MI35x" in proc.stderr
    proc = repo.run_module("ci.runner.run_many", *args, "--require-mi35x", "--emulate",
                           "--job", "nightly/mi35x-8/verify")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "!!! EMULATION MODE: MI35x jobs on cpu" in proc.stdout
    assert "=== job nightly/mi35x-8/verify" in proc.stdout and "=== job nightly/mi35x-8/e2e" not in proc.stdout
    assert "jobs: 1 passed, 0 failed" in proc.stdout and "tests: 1 passed" in proc.stdout
    summary = (tmp_path / "ci-results" / "summary-run-many.md").read_text()
    assert "> **EMULATION**: nightly/mi35x-8/verify runs with DSPARK_PLATFORM=hip emulated" in summary
    proc = repo.run_module("ci.runner.run_many", *args, "--job", "nightly/mi35x-8/verif")
    assert proc.returncode == 2 and "did you mean" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_durations_refresh_from_junit_feeds_the_plan(tmp_path):
    from ci.registry.durations import DURATIONS_PATH
    from ci.registry.jobs import load_registry

    repo = _repo(tmp_path, GROUPED, "test_grouped.py")
    proc = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/small[x]", "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ci.registry.durations", "--root", str(tmp_path), "--from",
                           str(tmp_path / "ci-results")], cwd=REAL_ROOT, env=repo.env(), capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    table = json.loads((tmp_path / DURATIONS_PATH).read_text())["hardware"]
    assert list(table["cpu"]) == ["registered/test_grouped.py::test_small"]
    registry = load_registry(tmp_path)
    job = registry.job("per-commit/cpu/small[y]")
    assert registry.test_time(job, "registered/test_grouped.py::test_small") < 100   # measured beats est_time
    proc = subprocess.run([sys.executable, "-m", "ci.registry.durations", "--root", str(tmp_path), "--from",
                           str(tmp_path / "nowhere")], cwd=REAL_ROOT, env=repo.env(), capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and "not a directory" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_cpu_jobs_hide_accelerators_and_gpu_jobs_do_not():
    # A cpu-label job run on a GPU host must see what a CPU runner sees: no GPU (else tensors land
    # on cuda:0 and the sync detector counts device copies the CPU contract does not have).
    from ci.registry.jobs import load_registry
    from ci.runner.run_suite import job_environment

    registry = load_registry(REAL_ROOT)
    host = {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}
    cpu = job_environment(registry.job("per-commit/cpu/foundation"), root=REAL_ROOT, base=host, quiet=True)
    assert cpu["CUDA_VISIBLE_DEVICES"] == "" and cpu["HIP_VISIBLE_DEVICES"] == "", cpu
    gpu = job_environment(registry.job("per-commit/h200-1/foundation"), root=REAL_ROOT, base=host, quiet=True)
    assert gpu["CUDA_VISIBLE_DEVICES"] == "0" and gpu["HIP_VISIBLE_DEVICES"] == "0", gpu


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_hypothesis_plugin_is_off_only_for_jobs_whose_files_never_use_it(tmp_path):
    """Hypothesis' pytest plugin imports hypothesis in every process's terminal summary (~2 s of CPU): a job
    turns it off unless one of its test files, or a conftest.py above them, mentions hypothesis."""
    from ci.registry.jobs import load_registry
    from ci.runner.run_suite import HYPOTHESIS_PLUGIN, pytest_command, uses_hypothesis

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_plain.py").write_text("def test_a():\n    pass\n")
    (tmp_path / "t" / "test_prop.py").write_text("from hypothesis import given\n")
    assert not uses_hypothesis(tmp_path, ["t/test_plain.py"])
    assert uses_hypothesis(tmp_path, ["t/test_plain.py", "t/test_prop.py"])
    (tmp_path / "t" / "conftest.py").write_text("import hypothesis\n")
    assert uses_hypothesis(tmp_path, ["t/test_plain.py"]), "a conftest above the file counts"
    registry = load_registry(REAL_ROOT)
    off = ["-p", f"no:{HYPOTHESIS_PLUGIN}"]
    for job_id, wants_plugin in (("per-commit/cpu/foundation", False), ("per-commit/cpu/kernels-properties", True)):
        job = registry.jobs[job_id]
        cmd = pytest_command(job, [t.node_id for t in job.tests], None, tmp_path / "j.xml", tmp_path / "r.jsonl", 1,
                             None, REAL_ROOT)
        joined = " ".join(cmd)
        assert (" ".join(off) in joined) != wants_plugin, f"{job_id}: {joined}"
