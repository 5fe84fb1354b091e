"""``python -m ci.runner.timing``: per-job phases and CPU seconds, one process per job, and the durations file it
writes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

TESTS = '''\
import time

import pytest


@register(suite="slow", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("n", [1, 2])
def test_slow(n):
    time.sleep(0.3)
    assert n in (1, 2)


@register(suite="quick", hardware="cpu", schedule="per-commit", est_time=1, env={"a": {"DSPARK_CHECK": "on"}})
def test_quick():
    assert 2 + 2 == 4


@register(suite="later", hardware="cpu", schedule="nightly", est_time=1)
def test_nightly_only():
    assert 1 + 1 == 2
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
def test_timing_prints_phases_per_job_and_writes_measured_durations(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file("test_timed.py", TESTS)
    proc = repo.run_module("ci.runner.timing")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {ln.split()[0]: ln.split() for ln in proc.stdout.splitlines() if ln.startswith(("per-commit/", "total"))}
    assert set(rows) == {"per-commit/cpu/slow", "per-commit/cpu/quick[a]", "total"}   # one process per job
    header = next(ln for ln in proc.stdout.splitlines() if ln.startswith("job "))
    assert header.split()[4:10] == ["start", "s", "collection", "s", "tests", "s"]
    slow = rows["per-commit/cpu/slow"]
    start, collection, tests, wall, cpu = (float(slow[i]) for i in (4, 5, 6, 8, 9))
    assert tests >= 0.6 and start > 0 and collection >= 0 and wall >= start + collection + tests - 0.01
    assert 0 < cpu
    data = json.loads((tmp_path / "ci" / "durations.json").read_text())
    measured = data["hardware"]["cpu"]
    assert set(measured) == {"registered/test_timed.py::test_slow", "registered/test_timed.py::test_quick"}
    assert measured["registered/test_timed.py::test_slow"] >= 0.6
    assert "nightly_only" not in proc.stdout
    proc = repo.run_module("ci.runner.timing", "--hardware", "h200-1")
    assert proc.returncode == 2 and "no per-commit job is registered for h200-1" in proc.stderr


HANG_THEN_MORE = '''\
import time


@register(suite="a-hang", hardware="cpu", schedule="per-commit", est_time=1)
def test_hangs():
    time.sleep(120)


@register(suite="b-after", hardware="cpu", schedule="per-commit", est_time=1)
def test_after():
    assert 1 + 1 == 2
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_sigterm_to_a_multi_job_run_stops_it_instead_of_starting_the_next_job(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file("test_hang.py", HANG_THEN_MORE)
    proc = subprocess.Popen([sys.executable, "-m", "ci.runner.run_many", "--root", str(tmp_path),
                             "--schedule", "per-commit",
                             "--hardware", "cpu", "--workers", "1", "--jobs", "1"],
                            cwd=REAL_ROOT, env=repo.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    report = tmp_path / "ci-results" / "per-commit_cpu_a-hang" / ".report-1-of-1.jsonl.partial"   # while it runs
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (report.is_file() and '"start"' in report.read_text()):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "=== job per-commit/cpu/a-hang" in out and "=== job per-commit/cpu/b-after" not in out, out
    assert "the runner was signalled: no further job starts" in err, err
