"""Run a filtered set of registry jobs (every shard of each), then print one table.

    python -m ci.run_many --schedule per-commit --hardware cpu
    python -m ci.run_many --schedule per-commit --hardware auto-kernels --suite-prefix kernels
    python -m ci.run_many --schedule nightly --hardware-prefix mi35x [--emulate]

Used by ``nox -s pr``, ``nox -s kernels`` and ``nox -s nightly_mi35x``. Jobs run
one after another, each shard exactly as its workflow job would run it; the
exit status is non-zero when any shard failed (or nothing was selected).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ci.jobs import Job, Registry, load_registry
from ci.run_suite import RESULTS_DIR, Outcome, banner, run_job
from ci.table import format_table


@dataclass
class Selection:
    schedule: str | None = None
    hardware: str | None = None
    hardware_prefix: str | None = None
    suite_prefix: str | None = None

    def matches(self, job: Job) -> bool:
        key = job.key
        return ((self.schedule is None or key.schedule == self.schedule)
                and (self.hardware is None or key.hardware == self.hardware)
                and (self.hardware_prefix is None or key.hardware.startswith(self.hardware_prefix))
                and (self.suite_prefix is None or key.suite.startswith(self.suite_prefix)))


def run_jobs(registry: Registry, jobs: list[Job], *, results_dir: Path, emulate: str | None = None,
             host_label: str | None = None, workers: int | None = None) -> list[Outcome]:
    host_env = registry.catalog.get(host_label).env if (emulate and host_label) else None
    outcomes = []
    for job in jobs:
        for index in range(1, job.shards + 1):
            tests = job.shard_tests(index, job.shards)
            shard = f"{index}/{job.shards}"
            if not tests:
                outcomes.append(Outcome(job.id, shard, 1, 0.0, problems=["shard selects no test"]))
                continue
            outcomes.append(run_job(registry.root, job, tests, shard, results_dir=results_dir,
                                    host_env=host_env, emulate=emulate, host_label=host_label,
                                    workers=workers))
    return outcomes


def summary_table(outcomes: list[Outcome]) -> str:
    rows = []
    for o in outcomes:
        c = o.counts
        rows.append((o.job_id, o.shard, "PASS" if o.ok else "FAIL", c.get("passed", 0),
                     c.get("failed", 0) + c.get("error", 0), c.get("skipped", 0), f"{o.seconds:.1f}"))
    return format_table(["job", "shard", "result", "passed", "failed", "skipped", "seconds"], rows,
                        right=(3, 4, 5, 6))


def totals_line(prefix: str, outcomes: list[Outcome], extra_failed: int = 0) -> str:
    passed = sum(o.counts.get("passed", 0) + o.counts.get("xfailed", 0) for o in outcomes)
    failed = sum(o.counts.get("failed", 0) + o.counts.get("error", 0) for o in outcomes)
    skipped = sum(o.counts.get("skipped", 0) for o in outcomes)
    return f"{prefix}: {passed} passed, {failed + extra_failed} failed, {skipped} skipped"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.run_many", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".")
    parser.add_argument("--schedule")
    parser.add_argument("--hardware", help="catalog label, or auto / auto-kernels (detected via torch)")
    parser.add_argument("--hardware-prefix")
    parser.add_argument("--suite-prefix")
    parser.add_argument("--emulate", action="store_true",
                        help="run jobs for other hardware with DSPARK_PLATFORM=hip emulation on this machine")
    parser.add_argument("--workers", type=int, help="override the hardware's pytest-xdist worker count")
    parser.add_argument("--require-mi35x", action="store_true",
                        help="refuse (unless --emulate) when this machine is not an MI35x (ROCm + gfx950)")
    args = parser.parse_args(argv)
    registry = load_registry(args.root)
    hardware = args.hardware
    machine = None
    if hardware in ("auto", "auto-kernels") or args.require_mi35x or args.emulate:
        from ci.machine import detect
        machine = detect()
        if hardware == "auto":
            hardware = machine.label
        elif hardware == "auto-kernels":
            hardware = machine.kernels_label
        print(f"[ci] this machine: {machine}")
    emulate = None
    if args.require_mi35x and not machine.is_mi35x:
        if not args.emulate:
            print(f"[ci] REFUSED: this machine is not an MI35x (needs a ROCm torch build and a gfx950 device; "
                  f"found backend={machine.backend} arch={machine.arch} gpus={machine.gpus}). "
                  "Run on an MI35x runner, or pass -- --emulate to run these jobs with "
                  "DSPARK_PLATFORM=hip emulation here (not a substitute for real MI35x).", file=sys.stderr)
            return 3
        emulate = "hip"
        print(banner(f"EMULATION MODE: MI35x jobs on {machine.label} ({machine.backend}/{machine.arch}) "
                     "with DSPARK_PLATFORM=hip -- results do NOT prove MI35x behaviour"), flush=True)
    selection = Selection(args.schedule, hardware, args.hardware_prefix, args.suite_prefix)
    jobs = [j for j in registry.jobs.values() if selection.matches(j)]
    if not jobs:
        print(f"[ci] FAIL: no registered job matches {selection}", file=sys.stderr)
        return 1
    start = time.monotonic()
    outcomes = run_jobs(registry, jobs, results_dir=registry.root / RESULTS_DIR, emulate=emulate,
                        host_label=machine.label if (emulate and machine) else None, workers=args.workers)
    print()
    print(summary_table(outcomes))
    print(f"\n{len(jobs)} job(s), {len(outcomes)} shard run(s) in {time.monotonic() - start:.0f}s")
    print(totals_line("jobs", outcomes))
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
