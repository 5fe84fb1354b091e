"""Every per-commit check on this machine: ``nox -s pr`` runs ``python -m ci.runner.pr``.

1. the registry audit (python -m ci.audit)
2. workflow drift + GitHub workflow schema (+ actionlint when installed)
3. every job of the per-commit ``cpu`` group, each in one pytest process (``--as-shards``: split by
   group shard as the GitHub jobs run them), side by side within ``--jobs`` cores (default: the
   machine's; a job takes its xdist worker count, else 1); each job's output printed whole when it ends

Everything runs even when an early step fails; the exit status is non-zero if
anything failed, after one summary table.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ci.audit import cli as audit_cli
from ci.github import generate as workflows
from ci.registry.catalog import CatalogError, load_catalog
from ci.registry.jobs import JobFilter, load_registry
from ci.runner.run_many import default_concurrency, run_jobs, summary_table
from ci.runner.run_suite import RESULTS_DIR, combined_summary, publish, totals_lines
from ci.table import format_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.runner.pr", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".")
    parser.add_argument("--hardware", default="cpu", help="run the per-commit jobs of this label (default cpu)")
    parser.add_argument("--as-shards", action="store_true",
                        help="one pytest process per job and group shard, as GitHub runs them (default: per job)")
    parser.add_argument("--jobs", type=int, default=default_concurrency(),
                        help="cores the job processes may take at once (default: this machine's); 1: one at a time")
    parser.add_argument("--check-arguments", action="store_true",
                        help="only check the arguments and exit (nox -s pr does this before any check runs)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    root = Path(args.root).resolve()
    try:
        labels = load_catalog(root).labels
    except (CatalogError, OSError) as exc:
        parser.error(f"--root {args.root}: the hardware catalog cannot be read ({exc})")
    if args.hardware not in labels:
        parser.error(f"--hardware {args.hardware!r}: not a label of ci/hardware.yaml; choose from {', '.join(labels)}")
    if args.check_arguments:
        return 0
    started = time.monotonic()
    checks: list[tuple[str, bool, float]] = []

    t0 = time.monotonic()
    print("=== registry audit ===", flush=True)
    audit_rc = audit_cli.main(["--root", str(root)])
    checks.append(("audit", audit_rc == 0, time.monotonic() - t0))

    t0 = time.monotonic()
    print("\n=== workflows: drift, schema, actionlint ===", flush=True)
    try:
        wf_rc = workflows.check(root)
    except Exception as exc:  # a collection error is already reported by the audit
        print(f"workflow check could not run: {exc}")
        wf_rc = 2
    checks.append(("workflows --check", wf_rc == 0, time.monotonic() - t0))

    print(f"\n=== per-commit jobs on {args.hardware} ===", flush=True)
    outcomes = []
    try:
        registry = load_registry(root)
        jobs = JobFilter(schedule="per-commit", hardware=args.hardware).select(registry)
        if not jobs:
            print(f"no per-commit job is registered for {args.hardware}: nothing would be tested")
            checks.append((f"per-commit {args.hardware} jobs exist", False, 0.0))
        outcomes = run_jobs(registry, jobs, results_dir=root / RESULTS_DIR, as_shards=args.as_shards,
                           concurrency=args.jobs)
    except Exception as exc:
        print(f"per-commit jobs could not run: {exc}")
        checks.append(("per-commit jobs", False, 0.0))

    if outcomes:
        publish(combined_summary(f"per-commit {args.hardware} group", outcomes),
                root / RESULTS_DIR / "summary-pr.md", echo=False)
    print("\n=== summary ===")
    print(format_table(["check", "result", "seconds"],
                       [(name, "PASS" if ok else "FAIL", f"{sec:.1f}") for name, ok, sec in checks], right=(2,)))
    if outcomes:
        print()
        print(summary_table(outcomes))
    failed_checks = sum(1 for _, ok, _ in checks if not ok)
    failed_shards = sum(1 for o in outcomes if not o.ok)
    ok = failed_checks == 0 and failed_shards == 0
    print(f"\npr: {'OK' if ok else 'FAILED'} -- {len(checks)} check(s) ({failed_checks} failed), "
          f"{len(outcomes)} job run(s) ({failed_shards} failed), {time.monotonic() - started:.0f}s")
    jobs_line, tests_line = totals_lines(outcomes)
    print(jobs_line)
    print(tests_line)
    c = {k: sum(o.counts.get(k, 0) for o in outcomes) for k in ("passed", "flaky", "failed", "error", "skipped")}
    # the closing line .ci/run repeats: tests first (its grep), then jobs and checks, each counted apart
    print(f"pr: {c['passed']} passed, {c['failed'] + c['error']} failed, {c['skipped']} skipped, "
          f"{c['flaky']} flaky (tests); {jobs_line}; checks: {len(checks) - failed_checks} passed, "
          f"{failed_checks} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
