"""Where a suite run's time goes, per job, and the durations file the sharder reads.

    python -m ci.runner.timing [--schedule per-commit] [--hardware cpu] [--suite-prefix P] [--as-shards] [--no-write]

Runs the selected jobs (default: every per-commit ``cpu`` job, one pytest process each,
as ``nox -s pr`` does), prints per job the wall seconds of process start (interpreter,
pytest, plugins), collection (test modules, torch, xdist workers), tests and exit, and the
CPU seconds of its process tree; then refreshes ``ci/durations.json`` from the run's JUnit
files (``--no-write``: print only). ``nox -s timing`` runs it. Exit 1 when a job failed
(the durations are written all the same: a failed test's time is still its time).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from ci.registry.catalog import CatalogError
from ci.registry.collect import CollectionError
from ci.registry.durations import DurationsError, refresh
from ci.registry.jobs import JobFilter, load_registry
from ci.runner.run_many import run_jobs
from ci.runner.run_suite import PHASES, RESULTS_DIR, Outcome, totals_lines
from ci.table import format_table

TIMING_DIR = "timing"


def profile_table(outcomes: list[Outcome]) -> str:
    """One row per job run: phases (wall s), wall and CPU seconds; a total row."""
    rows = []
    for o in outcomes:
        rows.append((o.job_id, o.shard, "PASS" if o.ok else "FAIL", sum(o.counts.values()),
                     *(f"{o.phases[p]:.1f}" if p in o.phases else "-" for p in PHASES),
                     f"{o.seconds:.1f}", f"{o.cpu_seconds:.1f}"))
    total = [sum(o.phases.get(p, 0.0) for o in outcomes) for p in PHASES]
    rows.append(("total", "", f"{len(outcomes)} runs", sum(sum(o.counts.values()) for o in outcomes),
                 *(f"{t:.1f}" for t in total), f"{sum(o.seconds for o in outcomes):.1f}",
                 f"{sum(o.cpu_seconds for o in outcomes):.1f}"))
    return format_table(["job", "shard", "result", "tests", *(f"{p} s" for p in PHASES), "wall s", "cpu s"],
                        rows, right=tuple(range(3, 10)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.runner.timing", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".")
    parser.add_argument("--schedule", default="per-commit", choices=("per-commit", "nightly"))
    parser.add_argument("--hardware", default="cpu", help="catalog label whose jobs run (default cpu)")
    parser.add_argument("--suite-prefix", help="only suites starting with this (kernels: what nox -s kernels runs)")
    parser.add_argument("--as-shards", action="store_true", help="one process per job and group shard")
    parser.add_argument("--no-write", action="store_true", help="do not refresh ci/durations.json")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    try:
        registry = load_registry(root)
        wanted = JobFilter(schedule=args.schedule, hardware=args.hardware, suite_prefix=args.suite_prefix)
        jobs = wanted.select(registry)
    except (CollectionError, CatalogError, DurationsError, KeyError, ValueError) as exc:
        print(f"[ci] error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    if not jobs:
        print(f"[ci] error: no {args.schedule} job is registered for {args.hardware}", file=sys.stderr)
        return 2
    results = root / RESULTS_DIR / TIMING_DIR
    shutil.rmtree(results, ignore_errors=True)
    started = time.monotonic()
    outcomes = run_jobs(registry, jobs, results_dir=results, as_shards=args.as_shards)
    print(f"\n=== timing: {args.schedule} {args.hardware}, {len(outcomes)} pytest run(s), "
          f"{time.monotonic() - started:.0f}s ===")
    print(profile_table(outcomes))
    for line in totals_lines(outcomes):
        print(line)
    if not args.no_write:
        try:
            print(refresh(root, results))
        except (DurationsError, ValueError) as exc:
            print(f"[ci] error: durations not written: {exc}", file=sys.stderr)
            return 1
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
