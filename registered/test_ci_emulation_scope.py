"""``--emulate`` changes the platform rules, not the hardware (issue 24 §6).

A job every test of which skips here for a registered hardware reason is refused up front with
one line naming it and the reason, instead of ending "this job tested nothing"; jobs with a test
that can run here still run under emulation.
"""
from __future__ import annotations

import subprocess
import sys

from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

NIGHTLY = ("--schedule", "nightly", "--hardware-prefix", "mi35x", "--require-mi35x", "--emulate")
SUITES = """
from registered.skips import requires_gpu

@register(suite="policy", hardware="mi35x-8", schedule="nightly", est_time=5)
def test_hip_policy_rules():
    pass

@register(suite="graphs", hardware="mi35x-8", schedule="nightly", est_time=5)
@requires_gpu()
def test_graph_replay():
    pass

@register(suite="graphs", hardware="mi35x-8", schedule="nightly", est_time=5)
class TestGraphs:
    @requires_gpu()
    def test_capture(self):
        pass
"""


def _stderr_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.strip()]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_nightly_mi35x_dspark_verify_under_emulation_on_cpu_is_refused_up_front():
    """The command ``nox -s nightly_mi35x -- --emulate --job nightly/mi35x-8/dspark-verify`` runs (noxfile.py):
    the job's only test replays CUDA graphs, so on a machine without a GPU it cannot test anything."""
    proc = subprocess.run([sys.executable, "-m", "ci.runner.run_many", *NIGHTLY,
                           "--job", "nightly/mi35x-8/dspark-verify"],
                          cwd=REAL_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = _stderr_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("[ci] REFUSED: nightly/mi35x-8/dspark-verify needs hardware this machine lacks: "
                               "all 1 of its test(s) skip here (needs-gpu: "), lines[0]
    assert "--emulate changes the platform rules, not the hardware" in lines[0]
    assert "=== job" not in proc.stdout and "tested nothing" not in proc.stderr   # pytest never started


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
def test_emulation_runs_the_jobs_that_can_run_and_names_the_ones_left_out(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file("test_nightly.py", SUITES)
    proc = repo.run_module("ci.runner.run_many", *NIGHTLY, "--job", "nightly/mi35x-8/graphs", "--workers", "1")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert _stderr_lines(proc) == [next(ln for ln in proc.stderr.splitlines() if ln.startswith("[ci] REFUSED"))]
    assert "nightly/mi35x-8/graphs needs hardware this machine lacks: all 2 of its test(s) skip here" in proc.stderr

    proc = repo.run_module("ci.runner.run_many", *NIGHTLY, "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[ci] not run under emulation: nightly/mi35x-8/graphs needs hardware" in proc.stderr
    assert "=== job nightly/mi35x-8/policy" in proc.stdout and "=== job nightly/mi35x-8/graphs" not in proc.stdout
    assert "jobs: 1 passed, 0 failed" in proc.stdout
