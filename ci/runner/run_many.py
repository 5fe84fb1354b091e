"""Run a filtered set of registry jobs, every group shard as its GitHub job would, then one table.

    python -m ci.runner.run_many --schedule per-commit --hardware cpu
    python -m ci.runner.run_many --schedule per-commit --hardware auto-kernels --suite-prefix kernels
    python -m ci.runner.run_many --schedule nightly --hardware-prefix mi35x [--job ID] [--require-mi35x] [--emulate]

Used by ``nox -s kernels`` and ``nox -s nightly_mi35x``. Jobs are picked with
:class:`ci.registry.jobs.JobFilter` (the same filter ``ci.runner.pr`` and ``ci.tools.coverage_gap`` use);
each job runs in one pytest process (``--as-shards``: one per job and group shard,
as the GitHub jobs split them). ``--jobs N`` (default: the machine's cores) runs job processes side by side
while the cores they take add up to at most N (a job gets its xdist workers only when it alone would outlast
the others packed on the N cores, else one core: :func:`shared_cores`); each job's output is buffered
and printed whole when it ends, the table keeps the selection's order (``--jobs 1``: one after another,
output live). Exit 1 when any job failed or nothing was selected, 3 when
``--require-mi35x`` refuses this machine, 2 for bad arguments or a job shard whose results another run
holds (one line; it does not wait), 130 / 143 when SIGINT / SIGTERM stopped the run (every job in flight
stopped, summaries written naming the unfinished tests: ``ci.runner.run_suite``, docs/design.md §8.6).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from ci.registry.catalog import CatalogError
from ci.registry.collect import CollectionError
from ci.registry.durations import DurationsError
from ci.runner.emulation_scope import refusal as emulation_refusal
from ci.registry.jobs import Job, JobFilter, Registry, group_id_of, load_registry
from ci.runner.machine import Machine
from ci.runner.run_lock import LockRefused
from ci.runner.run_suite import (
    RESULTS_DIR,
    Outcome,
    StopFlag,
    banner,
    combined_summary,
    emulation_for,
    hold_results,
    job_workers,
    publish,
    run_job,
    stop_on_signals,
    totals_lines,
)
from ci.safe_files import UnsafeOutput
from ci.table import format_table


def probe_machine(root: Path) -> Machine:
    """``python -m ci.runner.machine`` in a subprocess: torch is imported there, not in ci/."""
    proc = subprocess.run([sys.executable, "-m", "ci.runner.machine"], cwd=root, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"python -m ci.runner.machine failed: {proc.stderr.strip()[-400:]}")
    return Machine.from_mapping(json.loads(proc.stdout))


def plan(registry: Registry, jobs: list[Job]) -> list[tuple[str | None, list[tuple[Job, list[str]]]]]:
    """[(shard text or None, [(job, tests)])] covering every selected job's tests, group shard by group shard."""
    wanted = {j.id for j in jobs}
    steps = []
    for gid in dict.fromkeys(group_id_of(j) for j in jobs):
        group = registry.group(gid)
        for index in range(1, group.shards + 1):
            pairs = [(j, t) for j, t in registry.group_shard(gid, index, group.shards) if j.id in wanted]
            if pairs:
                steps.append((f"{index}/{group.shards}" if group.shards > 1 else None, pairs))
    return steps


def whole_jobs(jobs: list[Job]) -> list[tuple[str | None, list[tuple[Job, list[str]]]]]:
    """[(None, [(job, every test of the job)])]: one pytest process per job (a local run: the group's
    shards exist to spread a group over GitHub runners; on one machine they only add processes)."""
    return [(None, [(j, [t.node_id for t in j.tests])]) for j in jobs if j.tests]


def default_concurrency() -> int:
    return max(1, os.cpu_count() or 1)


def run_jobs(registry: Registry, jobs: list[Job], *, results_dir: Path, emulate: str | None = None,
             workers: int | None = None, as_shards: bool = False, concurrency: int = 1,
             stop: StopFlag | None = None) -> list[Outcome]:
    """Every selected job: one pytest process per job, or with ``as_shards`` per job and group shard
    (exactly what the GitHub jobs run); with ``concurrency`` > 1 side by side within that many cores.
    Each job shard's results are locked for the run (:class:`ci.runner.run_lock.LockRefused` when another run
    holds one); SIGTERM/SIGINT set ``stop`` (its own when None) and stop the run."""
    steps = plan(registry, jobs) if as_shards else whole_jobs(jobs)
    with hold_results(results_dir, [(j, sh) for sh, pairs in steps for j, _ in pairs]), \
            stop_on_signals(stop) as stop:
        return _run_steps(registry, steps, results_dir=results_dir, emulate=emulate, workers=workers,
                          concurrency=concurrency, stop=stop)


def _run_steps(registry: Registry, steps: list[tuple[str | None, list[tuple[Job, list[str]]]]], *, results_dir: Path,
               emulate: str | None, workers: int | None, concurrency: int, stop: StopFlag) -> list[Outcome]:
    if concurrency > 1:
        chosen = [(sh, j, t) for sh, pairs in steps for j, t in pairs]
        ests = [expected_seconds(j, t) for _, j, t in chosen]
        wanted = [min(concurrency, job_workers(j, t, workers)) for _, j, t in chosen]
        cores = wanted if workers is not None else shared_cores(ests, wanted, concurrency)
        runs = [Run(i, job, tests, shard, c, est)
                for i, ((shard, job, tests), c, est) in enumerate(zip(chosen, cores, ests, strict=True))]
        return run_concurrently(registry, runs, results_dir=results_dir, emulate=emulate, workers=workers,
                                cores=concurrency, stop=stop)
    outcomes = []
    for shard, pairs in steps:
        for job, tests in pairs:
            if stop.is_set():
                return outcomes
            outcomes.append(run_job(registry, job, tests, shard, results_dir=results_dir, emulate=emulate,
                                    workers=workers, stop=stop))
            if outcomes[-1].runner_signalled:
                print(f"[ci] the runner was signalled: no further job starts "
                      f"({outcomes[-1].stopped})", file=sys.stderr, flush=True)
                return outcomes
    return outcomes


def expected_seconds(job: Job, tests: list[str]) -> float:
    """The selected tests' measured seconds on the job's label (ci/durations.json), else their estimates."""
    chosen = set(tests)
    return sum(t.measured if t.measured is not None else t.est_time for t in job.tests if t.node_id in chosen)


def shared_cores(ests: list[float], wanted: list[int], cores: int) -> list[int]:
    """xdist workers per run when runs share ``cores``: a run keeps the workers it wants only when it alone
    would outlast the others packed on the cores (its estimate above the total / cores); every other run
    takes one core, so the scheduler packs whole runs side by side instead of paying each run's worker
    start-up and its idle tail."""
    share = sum(ests) / cores
    return [w if est > share else 1 for est, w in zip(ests, wanted, strict=True)]


@dataclass(frozen=True)
class Run:
    """One pytest process to start: its place in the summary, what it runs, the cores it takes, its estimate."""
    index: int
    job: Job
    tests: list[str]
    shard: str | None
    cores: int
    est: float


def next_run(pending: list[Run], free: int) -> Run | None:
    """The longest-estimated pending run that fits in ``free`` cores (ties: selection order), or None."""
    fitting = [r for r in pending if r.cores <= free]
    return max(fitting, key=lambda r: (r.est, -r.index)) if fitting else None


def run_concurrently(registry: Registry, runs: list[Run], *, results_dir: Path, emulate: str | None,
                     workers: int | None, cores: int, runner=None, stop: StopFlag | None = None) -> list[Outcome]:
    """Start runs (longest estimate first) while their cores fit in ``cores``; print each run's buffered
    output whole when it ends; SIGTERM/SIGINT (or ``stop`` set) stop every run in flight and start no further
    one. Returns the outcomes of the runs that ran, in selection order. ``runner`` replaces ``run_job`` (tests)."""
    runner = runner or run_job
    pending = list(runs)
    running: dict[Future, tuple[Run, io.StringIO]] = {}
    finished: dict[int, Outcome] = {}
    free = cores
    with stop_on_signals(stop) as stop:
        with ThreadPoolExecutor(max_workers=cores) as pool:
            while pending or running:
                while not stop.is_set() and (run := next_run(pending, free)) is not None:
                    pending.remove(run)
                    free -= run.cores
                    buf = io.StringIO()
                    running[pool.submit(runner, registry, run.job, run.tests, run.shard, results_dir=results_dir,
                                        emulate=emulate, workers=run.cores if workers is None else workers,
                                        out=buf, stop=stop, cores=run.cores)] = (run, buf)
                if not running:
                    break
                done, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    run, buf = running.pop(future)
                    free += run.cores
                    try:
                        finished[run.index] = future.result()
                    except Exception as exc:   # the runner itself broke: the job fails, the others go on
                        finished[run.index] = Outcome(run.job.id, run.shard or "1/1", 1, 0.0,
                                                      problems=[f"the runner failed: {exc!r}"])
                    sys.stdout.write(buf.getvalue())
                    sys.stdout.flush()
    if stop.is_set():
        print(f"[ci] the runner was signalled: no further job starts ({stop.reason})", file=sys.stderr, flush=True)
    return [finished[i] for i in sorted(finished)]


def summary_table(outcomes: list[Outcome]) -> str:
    rows = []
    for o in outcomes:
        c = o.counts
        rows.append((o.job_id, o.shard, "PASS" if o.ok else "FAIL", c.get("passed", 0), c.get("flaky", 0),
                     c.get("failed", 0) + c.get("error", 0), c.get("skipped", 0), f"{o.seconds:.1f}",
                     f"{o.cpu_seconds:.1f}"))
    return format_table(["job", "shard", "result", "passed", "flaky", "failed", "skipped", "seconds", "cpu s"], rows,
                        right=(3, 4, 5, 6, 7, 8))


def filter_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schedule", help="per-commit or nightly")
    parser.add_argument("--hardware", help="catalog label, or auto / auto-kernels (this machine's label)")
    parser.add_argument("--hardware-prefix", help="labels starting with this, e.g. mi35x")
    parser.add_argument("--suite-prefix", help="suites starting with this, e.g. kernels")
    parser.add_argument("--job", help="exactly this job id (e.g. nightly/mi35x-8/dspark-e2e)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.runner.run_many", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".")
    filter_arguments(parser)
    parser.add_argument("--emulate", action="store_true",
                        help="run the GPU jobs here with their platform emulated (announced everywhere)")
    parser.add_argument("--workers", type=int, help="override the hardware's pytest-xdist worker count")
    parser.add_argument("--as-shards", action="store_true",
                        help="one pytest process per job AND group shard, as the GitHub jobs run them "
                             "(default: one process per job)")
    parser.add_argument("--jobs", type=int, default=default_concurrency(),
                        help="cores the job processes may take at once (default: this machine's, "
                             f"{default_concurrency()}); 1 runs them one after another")
    parser.add_argument("--require-mi35x", action="store_true",
                        help="refuse (unless --emulate) when this machine is not an MI35x (ROCm + gfx950)")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    root = Path(args.root).resolve()
    try:
        registry = load_registry(root)
    except (CollectionError, CatalogError, DurationsError, ValueError) as exc:
        print(f"[ci] error: {exc}", file=sys.stderr)
        return 2
    hardware = args.hardware
    machine = None
    if hardware in ("auto", "auto-kernels") or args.require_mi35x:
        machine = probe_machine(root)
        hardware = {"auto": machine.label, "auto-kernels": machine.kernels_label}.get(hardware, hardware)
        print(f"[ci] this machine: {machine.describe()} -> label {machine.label}")
    if args.require_mi35x and not machine.is_mi35x:
        if not args.emulate:
            print(f"[ci] REFUSED: this machine is not an MI35x (needs a ROCm torch build and a gfx950 device; "
                  f"found {machine.describe()}). Run on an MI35x runner, or pass -- --emulate to run these "
                  "jobs with DSPARK_PLATFORM=hip emulation here (not a substitute for real MI35x).", file=sys.stderr)
            return 3
        print(banner(f"EMULATION MODE: MI35x jobs on {machine.label} ({machine.describe()}) "
                     "with DSPARK_PLATFORM=hip -- results do NOT prove MI35x behaviour"), flush=True)
    selection = JobFilter(args.schedule, hardware, args.hardware_prefix, args.suite_prefix, args.job)
    try:
        jobs = selection.select(registry)
        emulate = emulation_for(jobs, "auto") if args.emulate else None
    except (KeyError, ValueError) as exc:
        print(f"[ci] error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    if not jobs:
        print(f"[ci] FAIL: no registered job matches {selection.describe()}", file=sys.stderr)
        return 1
    if emulate:   # a job whose every test needs absent hardware would "test nothing": refuse it up front
        here = machine or probe_machine(root)
        jobs, left_out = emulation_refusal(registry, jobs, gpus=here.gpus, backend=here.backend, where=here.describe())
        if left_out:
            print(f"[ci] {'REFUSED' if not jobs else 'not run under emulation'}: {left_out}", file=sys.stderr)
        if not jobs:
            return 3
    start = time.monotonic()
    with stop_on_signals() as stop:
        try:
            outcomes = run_jobs(registry, jobs, results_dir=root / RESULTS_DIR, emulate=emulate,
                                workers=args.workers, as_shards=args.as_shards, concurrency=args.jobs, stop=stop)
        except (LockRefused, UnsafeOutput) as exc:
            print(f"[ci] error: {exc}", file=sys.stderr)
            return 2
        publish(combined_summary(f"{selection.describe()} ({time.monotonic() - start:.0f}s)", outcomes),
                root / RESULTS_DIR / "summary-run-many.md", echo=False)
    print()
    print(summary_table(outcomes))
    print(f"\n{len(jobs)} job(s) selected, {len(outcomes)} pytest run(s) in {time.monotonic() - start:.0f}s")
    for line in totals_lines(outcomes):
        print(line)
    if stop.is_set():
        return stop.exit_code
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
