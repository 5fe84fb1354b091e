"""Run exactly one registry job (or one shard of it) through pytest.

    python -m ci.run_suite --job per-commit/cpu/kernels [--shard 1/2] [--dry-run] [--durations FILE]

Sets the hardware's default env and the variant's env, runs the selected node
ids, writes ``ci-results/<job>/junit-I-of-N.xml`` plus a Markdown summary
(appended to ``$GITHUB_STEP_SUMMARY`` when set, else printed), and fails when:
the selection is empty, pytest collects nothing, a selected test produced no
result, every test skipped, or a test skipped without a registered reason
(message starting ``[registered:<key>]``, key in ``registered/skips.py``).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ci.collect import CollectionError
from ci.catalog import CatalogError
from ci.jobs import Job, load_registry, sanitize
from ci.partition import load_durations, parse_shard
from ci.results import (CaseResult, cases_for, durations_by_node, read_junit,
                        registered_skip_keys, unregistered_skips)

RESULTS_DIR = "ci-results"
EMULATED_PLATFORMS = ("hip", "cuda")
XDIST_MIN_EST_S = 30.0  # below this estimate, starting xdist workers (each importing torch) costs more than it saves


@dataclass
class Outcome:
    job_id: str
    shard: str
    rc: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    failures: list[CaseResult] = field(default_factory=list)
    slowest: list[CaseResult] = field(default_factory=list)
    emulation: str | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0


def banner(text: str) -> str:
    line = "!" * max(60, len(text) + 8)
    return f"{line}\n!!! {text}\n{line}"


def job_environment(job: Job, *, host_env: dict[str, str] | None, emulate: str | None) -> dict[str, str]:
    """os.environ + hardware default env (or the host's, when emulating) + variant env (+ emulation)."""
    env = dict(os.environ)
    env.update(host_env if host_env is not None else job.hardware.env)
    env.update(job.env)
    if emulate:
        env["DSPARK_PLATFORM"] = emulate
    env["DSPARK_JOB"] = job.id
    env["DSPARK_HARDWARE"] = job.key.hardware
    return env


def pytest_command(tests: list[str], junit: Path, workers: int) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *tests, f"--junitxml={junit}", "-p", "no:cacheprovider", "-q", "-rfEs"]
    if workers > 1 and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(workers)]
    return cmd


def judge(outcome: Outcome, tests: list[str], cases: list[CaseResult], skip_keys: set[str]) -> None:
    """Turn pytest's exit code and the JUnit cases into the job's verdict."""
    rc = outcome.rc
    counts = {k: 0 for k in ("passed", "failed", "error", "skipped", "xfailed")}
    for case in cases:
        counts[case.outcome] += 1
    outcome.counts = counts
    if rc == 5:
        outcome.problems.append("pytest collected no test (exit 5): the job selected node ids that contain "
                                "no runnable test -- an empty suite must fail, not pass")
    elif rc in (2, 3, 4):
        outcome.problems.append(f"pytest exit {rc} (interrupted, internal or usage error: "
                                "a selected node id may not exist); see the log above")
    elif rc not in (0, 1):
        outcome.problems.append(f"pytest exit {rc}")
    for case in unregistered_skips(cases, skip_keys):
        outcome.problems.append(f"unregistered skip: {case.test_name}: {case.message!r} "
                                "(skip only via registered/skips.py: registered_skip(key) / requires_gpu())")
    if rc in (0, 1):
        for node_id in tests:
            if not cases_for(node_id, cases):
                outcome.problems.append(f"{node_id}: selected, but pytest reported no result for it")
        executed = counts["passed"] + counts["failed"] + counts["error"] + counts["xfailed"]
        if cases and executed == 0:
            outcome.problems.append(f"all {len(cases)} test(s) skipped: this job tested nothing on this machine")
    outcome.failures = [c for c in cases if c.outcome in ("failed", "error")]
    outcome.slowest = sorted(cases, key=lambda c: -c.time)[:5]
    if outcome.problems and outcome.rc == 0:
        outcome.rc = 1


def summary_markdown(outcome: Outcome) -> str:
    verdict = "PASS" if outcome.ok else "FAIL"
    c = outcome.counts
    lines = [f"### {verdict}: `{outcome.job_id}` shard {outcome.shard}", ""]
    if outcome.emulation:
        lines += [f"> **EMULATION**: {outcome.emulation}", ""]
    lines += [
        "| passed | failed | errors | skipped (registered) | xfailed | seconds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {c.get('passed', 0)} | {c.get('failed', 0)} | {c.get('error', 0)} | {c.get('skipped', 0)} "
        f"| {c.get('xfailed', 0)} | {outcome.seconds:.1f} |",
        "",
    ]
    if outcome.problems:
        lines += ["**Problems**", ""] + [f"- {p}" for p in outcome.problems] + [""]
    if outcome.failures:
        lines += ["**Failed tests**", ""] + [
            f"- `{f.test_name}`: {f.message[:200]}" for f in outcome.failures[:30]] + [""]
    if outcome.slowest:
        lines += ["<details><summary>slowest tests</summary>", ""] + [
            f"- {s.time:.2f}s `{s.test_name}`" for s in outcome.slowest] + ["", "</details>", ""]
    return "\n".join(lines)


def publish_summary(text: str, results: Path) -> None:
    (results.parent).mkdir(parents=True, exist_ok=True)
    results.write_text(text, encoding="utf-8")
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    else:
        print(text)


def run_job(root: Path, job: Job, tests: list[str], shard: str, *, results_dir: Path,
            host_env: dict[str, str] | None = None, emulate: str | None = None,
            host_label: str | None = None, workers: int | None = None,
            pytest_args: list[str] | None = None) -> Outcome:
    out_dir = results_dir / sanitize(job.id)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = shard.replace("/", "-of-")
    junit = out_dir / f"junit-{tag}.xml"
    if junit.exists():
        junit.unlink()
    env = job_environment(job, host_env=host_env, emulate=emulate)
    emulation = None
    if emulate:
        emulation = (f"{job.id} runs with DSPARK_PLATFORM={emulate} emulated on "
                     f"{host_label or 'this machine'}, not on real {job.key.hardware} hardware")
        print(banner("EMULATION: " + emulation), flush=True)
    shown = {k: env[k] for k in sorted({*job.full_env(), *(host_env or {}), "DSPARK_PLATFORM"}) if k in env}
    print(f"[ci] job {job.id} shard {shard}: {len(tests)} node id(s); env {shown}", flush=True)
    if workers is None:
        est = sum(t.est_time for t in job.tests if t.node_id in set(tests))
        workers = job.hardware.workers if est >= XDIST_MIN_EST_S else 1
    cmd = pytest_command(tests, junit, workers)
    cmd += list(pytest_args or [])
    shown_cmd = cmd if len(tests) <= 6 else cmd[:3] + tests[:3] + [f"... ({len(tests)} node ids)"] + cmd[3 + len(tests):]
    print("[ci] " + " ".join(shown_cmd), flush=True)
    start = time.monotonic()
    rc = subprocess.call(cmd, cwd=root, env=env)
    outcome = Outcome(job.id, shard, rc, time.monotonic() - start, emulation=emulation)
    cases = read_junit(junit) if junit.is_file() else []
    judge(outcome, tests, cases, registered_skip_keys(root))
    (out_dir / f"durations-{tag}.json").write_text(
        json.dumps(durations_by_node(tests, cases), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    publish_summary(summary_markdown(outcome), out_dir / f"summary-{tag}.md")
    for problem in outcome.problems:
        print(f"[ci] FAIL {job.id} shard {shard}: {problem}", file=sys.stderr, flush=True)
    return outcome


def select(job: Job, shard_text: str | None, durations_file: str | None) -> tuple[list[str], str]:
    durations = load_durations(durations_file) if durations_file else None
    if shard_text:
        index, count = parse_shard(shard_text)
        return job.shard_tests(index, count, durations), f"{index}/{count}"
    return [t.node_id for t in job.tests], "1/1"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.run_suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", required=True, help="job id, e.g. per-commit/cpu/kernels")
    parser.add_argument("--shard", help="I/N: run shard I of N (LPT split by estimated/measured time)")
    parser.add_argument("--dry-run", action="store_true", help="list the selected node ids; fail if none")
    parser.add_argument("--durations", help="JUnit XML or JSON of measured durations to split by")
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    parser.add_argument("--results", help=f"results directory (default: ROOT/{RESULTS_DIR})")
    parser.add_argument("--emulate", choices=EMULATED_PLATFORMS, help="run with DSPARK_PLATFORM emulated")
    parser.add_argument("--host-hardware", help="catalog label of this machine (its default env is used when emulating)")
    parser.add_argument("--workers", type=int, help="override the hardware's pytest-xdist worker count")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    try:
        registry = load_registry(root)
        job = registry.job(args.job)
        tests, shard = select(job, args.shard, args.durations)
        host_env = registry.catalog.get(args.host_hardware).env if args.host_hardware else None
    except (CollectionError, CatalogError, KeyError, ValueError, OSError) as exc:
        print(f"[ci] error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    if not tests:
        print(f"[ci] FAIL: job {args.job} shard {shard} selects no test "
              f"(the job has {len(job.tests)} registered test(s)); an empty shard must not pass", file=sys.stderr)
        return 1
    if args.dry_run:
        print(f"# {job.id} shard {shard}: {len(tests)} node id(s), est "
              f"{sum(t.est_time for t in job.tests if t.node_id in tests):.0f}s")
        print("\n".join(tests))
        return 0
    results = Path(args.results).resolve() if args.results else root / RESULTS_DIR
    outcome = run_job(root, job, tests, shard, results_dir=results, host_env=host_env,
                      emulate=args.emulate, host_label=args.host_hardware, workers=args.workers,
                      pytest_args=args.pytest_args)
    return outcome.rc


if __name__ == "__main__":
    sys.exit(main())
