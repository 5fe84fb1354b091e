"""``ci.runner.run_many`` / ``ci.runner.pr`` run job processes side by side within the machine's cores: bounded,
output whole
per job, the summary in selection order, a failing job fails the run, a signal stops every job in flight."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from types import SimpleNamespace

from ci.registration import register
from ci.runner.run_many import Run, next_run, run_concurrently, summary_table
from ci.runner.run_suite import Outcome
from registered.fixture_repo import REAL_ROOT, FixtureRepo


def _fake_runs(spec: list[tuple[str, int, float, bool]]) -> list[Run]:
    """(job id, cores, sleep seconds, passes) -> runs whose estimate is their sleep."""
    return [Run(i, SimpleNamespace(id=jid, ok=ok), [f"t{i}"], None, cores, sleep)
            for i, (jid, cores, sleep, ok) in enumerate(spec)]


class _SleepingRunner:
    """A stand-in for ``run_job``: sleeps, writes its lines slowly to ``out``, records the cores in use."""

    def __init__(self):
        self.lock = threading.Lock()
        self.in_use = 0
        self.peak = 0
        self.started: list[str] = []

    def __call__(self, registry, job, tests, shard, *, results_dir, emulate, workers, out, stop, cores):
        run = registry[job.id]
        with self.lock:
            self.in_use += run.cores
            self.peak = max(self.peak, self.in_use)
            self.started.append(job.id)
        for part in range(3):
            out.write(f"{job.id} line {part}\n")
            time.sleep(run.est / 3)
        with self.lock:
            self.in_use -= run.cores
        return Outcome(job.id, "1/1", 0 if job.ok else 1, run.est, counts={"passed": 1})


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_concurrency_is_bounded_output_is_whole_and_the_summary_keeps_the_selection_order():
    runs = _fake_runs([("a-two-cores", 2, 0.6, True), ("b", 1, 0.3, True), ("c-fails", 1, 0.45, False),
                       ("d", 1, 0.15, True), ("e", 1, 0.3, True)])
    runner = _SleepingRunner()
    buf = io.StringIO()
    with redirect_stdout(buf):
        outcomes = run_concurrently({r.job.id: r for r in runs}, runs, results_dir=None, emulate=None,
                                    workers=None, cores=2, runner=runner)
    assert runner.peak == 2                                     # never more cores than given, and both used
    assert [o.job_id for o in outcomes] == ["a-two-cores", "b", "c-fails", "d", "e"]
    assert [o.ok for o in outcomes] == [True, True, False, True, True]
    assert runner.started[0] == "a-two-cores"                   # longest estimate first
    lines = [ln for ln in buf.getvalue().splitlines() if " line " in ln]
    assert len(lines) == 15
    for i in range(0, 15, 3):                                   # each job's three lines together, in order
        job = lines[i].split()[0]
        assert lines[i:i + 3] == [f"{job} line {p}" for p in range(3)], lines
    table = summary_table(outcomes).splitlines()
    assert [row.split()[0] for row in table[2:]] == ["a-two-cores", "b", "c-fails", "d", "e"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_next_run_takes_the_longest_that_fits_and_nothing_when_none_fits():
    runs = _fake_runs([("x", 2, 5.0, True), ("y", 1, 1.0, True), ("z", 1, 3.0, True), ("w", 1, 3.0, True)])
    assert next_run(runs, 2).job.id == "x"
    assert next_run(runs, 1).job.id == "z"                      # ties: selection order
    assert next_run(runs[:1], 1) is None
    assert next_run([], 2) is None


JOBS = '''\
import os
import sys
import time


@register(suite="a-slow", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_slow():
    for i in range(4):
        print(f"A-OUT {i}", file=sys.stderr, flush=True)
        time.sleep(0.3)


@register(suite="b-fails", hardware="cpu", schedule="per-commit", est_time=2)
def test_b_fails():
    for i in range(4):
        print(f"B-OUT {i}", file=sys.stderr, flush=True)
        time.sleep(0.3)
    assert os.environ.get("DSPARK_CHECK") == "on", "b sees the variant env only"


@register(suite="c-env", hardware="cpu", schedule="per-commit", est_time=1, env={"on": {"DSPARK_CHECK": "on"}})
def test_c_env():
    assert os.environ["DSPARK_CHECK"] == "on"
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=15)
def test_run_many_runs_jobs_side_by_side_with_their_own_env_and_a_failure_fails_the_run(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file("test_side_by_side.py", JOBS)
    proc = repo.run_module("ci.runner.run_many", "--schedule", "per-commit", "--hardware", "cpu", "--workers", "1",
                           "--jobs", "2")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("per-commit/cpu/")]
    assert [(r[0], r[2]) for r in rows] == [("per-commit/cpu/a-slow", "PASS"), ("per-commit/cpu/b-fails", "FAIL"),
                                            ("per-commit/cpu/c-env[on]", "PASS")]
    blocks = out.split("[ci] === job ")[1:]
    assert len(blocks) == 3, out
    for block in blocks:                                        # each job's runner and pytest lines stay together
        job = block.split()[0]
        others = [j for j in ("a-slow", "b-fails", "c-env[on]") if not job.endswith(j)]
        assert f" ci: job {job} shard 1/1 " in block and "accounting" in block, block
        assert not any(f"ci: job per-commit/cpu/{o} " in block for o in others), block
    assert "B-OUT 3" in blocks[[b.split()[0] for b in blocks].index("per-commit/cpu/b-fails")]
    log = tmp_path / "ci-results" / "per-commit_cpu_b-fails" / "log-1-of-1.txt"
    assert "B-OUT 3" in log.read_text() and "A-OUT" not in log.read_text()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
def test_sigterm_stops_every_job_in_flight_and_starts_no_further_one(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.test_file("test_hangs.py", '''\
import time


@register(suite="a-hang", hardware="cpu", schedule="per-commit", est_time=3)
def test_a():
    time.sleep(120)


@register(suite="b-hang", hardware="cpu", schedule="per-commit", est_time=2)
def test_b():
    time.sleep(120)


@register(suite="c-after", hardware="cpu", schedule="per-commit", est_time=1)
def test_c():
    assert 1 + 1 == 2
''')
    proc = subprocess.Popen([sys.executable, "-m", "ci.runner.run_many", "--root", str(tmp_path),
                             "--schedule", "per-commit",
                             "--hardware", "cpu", "--workers", "1", "--jobs", "2"],
                            cwd=REAL_ROOT, env=repo.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reports = [tmp_path / "ci-results" / f"per-commit_cpu_{j}" / ".report-1-of-1.jsonl.partial"   # while they run
               for j in ("a-hang", "b-hang")]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not all(r.is_file() and '"start"' in r.read_text() for r in reports):
        time.sleep(0.2)
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert time.monotonic() - started < 60
    assert proc.returncode != 0
    assert "=== job per-commit/cpu/a-hang" in out and "=== job per-commit/cpu/b-hang" in out, out
    assert "=== job per-commit/cpu/c-after" not in out, out
    assert "the runner was signalled: no further job starts (the runner received SIGTERM)" in err, err
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("per-commit/cpu/")]
    assert [(r[0], r[2]) for r in rows] == [("per-commit/cpu/a-hang", "FAIL"), ("per-commit/cpu/b-hang", "FAIL")]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_runs_sharing_the_cores_keep_xdist_only_when_they_alone_would_be_the_tail():
    """Side by side, a run keeps its xdist workers only when its estimate exceeds the total / cores (it alone
    would outlast the rest packed on the cores); every other run takes one core and no worker start-up."""
    from ci.runner.run_many import shared_cores

    assert shared_cores([300, 40, 40, 20], [2, 2, 1, 2], 2) == [2, 1, 1, 1]   # 300 > 400 / 2: the tail
    assert shared_cores([120, 100, 90, 90], [2, 2, 2, 1], 2) == [1, 1, 1, 1]  # no run outlasts 400 / 2
    assert shared_cores([50], [2], 2) == [2]                                   # alone: it is the tail
    assert shared_cores([], [], 2) == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_each_run_gets_its_own_worker_count(tmp_path):
    seen = {}

    def runner(registry, job, tests, shard, *, results_dir, emulate, workers, out, stop, cores):
        seen[job.id] = workers
        return Outcome(job.id, "1/1", 0, 0.0)

    runs = _fake_runs([("big", 2, 0.0, True), ("small", 1, 0.0, True)])
    run_concurrently({}, runs, results_dir=tmp_path, emulate=None, workers=None, cores=2, runner=runner)
    assert seen == {"big": 2, "small": 1}
    run_concurrently({}, runs, results_dir=tmp_path, emulate=None, workers=3, cores=2, runner=runner)
    assert seen == {"big": 3, "small": 3}, "an explicit --workers wins"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_each_pytest_process_gets_its_share_of_the_cores_as_threads():
    """torch's intra-op threads spin while they wait: a job's pytest processes share its cores as threads
    (OMP_NUM_THREADS), unless the caller's environment sets it."""
    from ci.runner.run_suite import thread_budget

    env = {}
    assert thread_budget(env, 1, 1) == 1 and env["OMP_NUM_THREADS"] == "1"
    env = {}
    assert thread_budget(env, 2, 2) == 1 and env["OMP_NUM_THREADS"] == "1"
    env = {}
    assert thread_budget(env, 4, 1) == 4 and env["OMP_NUM_THREADS"] == "4"
    env = {"OMP_NUM_THREADS": "3"}
    assert thread_budget(env, 1, 1) is None and env["OMP_NUM_THREADS"] == "3"
