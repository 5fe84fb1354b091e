"""Changed ``impl/`` lines that no per-commit cpu job executes (docs/design.md §8 coverage gap).

    python -m ci.tools.coverage_gap --base origin/main [--report-only]

Diffs the working tree against ``--base`` (``git diff -U0``, plus untracked files
under impl/), runs every per-commit ``cpu`` job's tests under coverage.py
(``coverage run --source impl -m pytest -p no:xdist``, with each job's env), and
lists, per file, the changed executable lines no job ran -- "this change is only
tested nightly (or not at all)". Exit 1 when any, unless ``--report-only``.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ci.registry.jobs import JobFilter, load_registry
from ci.runner.run_suite import job_environment

IMPL_DIR = "impl"
HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def _git_ok(root: Path, *args: str) -> str | None:
    """stdout of a git command, or None when it fails (no traceback for a bad argument)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_diff(diff_text: str) -> dict[str, set[int]]:
    """``git diff -U0`` output -> {path: added/changed line numbers in the new file}."""
    changed: dict[str, set[int]] = {}
    current: str | None = None
    for line in diff_text.splitlines():
        if line.startswith("+++ "):
            target = line[4:].strip()
            current = None if target == "/dev/null" else target[2:] if target.startswith("b/") else target
        elif line.startswith("@@") and current is not None:
            match = HUNK_RE.match(line)
            if match:
                start, count = int(match.group(1)), int(match.group(2) or 1)
                changed.setdefault(current, set()).update(range(start, start + count))
    return {path: lines for path, lines in changed.items() if lines}


def changed_lines(root: Path, base: str) -> dict[str, set[int]]:
    changed = parse_diff(_git(root, "diff", "-U0", "--no-color", "--no-ext-diff", base, "--", IMPL_DIR))
    for rel in _git(root, "ls-files", "--others", "--exclude-standard", "--", IMPL_DIR).split():
        path = root / rel
        if path.is_file():
            changed[rel] = set(range(1, len(path.read_text(encoding="utf-8").splitlines()) + 1))
    return {p: lines for p, lines in changed.items() if p.endswith(".py")}


def ranges(lines: set[int] | list[int]) -> str:
    out, run = [], []
    for n in sorted(lines):
        if run and n == run[-1] + 1:
            run.append(n)
        else:
            if run:
                out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            run = [n]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ", ".join(out)


def measure(root: Path, data_file: Path, jobs) -> list[str]:
    """Run ``jobs`` under coverage; returns the ids of jobs whose tests failed."""
    failed = []
    for job in jobs:
        tests = [t.node_id for t in job.tests]
        cmd = [sys.executable, "-m", "coverage", "run", "--parallel-mode", f"--data-file={data_file}",
               f"--source={IMPL_DIR}", "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", *tests]
        print(f"[coverage-gap] {job.id}: {len(tests)} node id(s)", flush=True)
        rc = subprocess.call(cmd, cwd=root, env=job_environment(job, root=root))
        if rc != 0:
            failed.append(job.id)
    subprocess.run([sys.executable, "-m", "coverage", "combine", f"--data-file={data_file}"],
                   cwd=root, capture_output=True, text=True, check=False)
    return failed


def uncovered(root: Path, data_file: Path, changed: dict[str, set[int]]) -> dict[str, list[int]]:
    import coverage

    cov = coverage.Coverage(data_file=str(data_file))
    cov.load()
    data = cov.get_data()
    out: dict[str, list[int]] = {}
    for rel, lines in sorted(changed.items()):
        path = str((root / rel).resolve())
        try:
            _, statements, _, _, _ = cov.analysis2(path)
        except Exception:  # not Python coverage can parse: report every changed line
            statements = sorted(lines)
        executed = set(data.lines(path) or ())
        missing = sorted((lines & set(statements)) - executed)
        if missing:
            out[rel] = missing
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.tools.coverage_gap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to diff against (e.g. origin/main)")
    parser.add_argument("--report-only", action="store_true", help="list gaps but exit 0")
    parser.add_argument("--root", default=".")
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--suite-prefix", help="only jobs whose suite starts with this")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    # every argument is checked before any work (git diff, pytest under coverage)
    if _git_ok(root, "rev-parse", "--git-dir") is None:
        print(f"coverage gap: error: --root {args.root}: not a git working tree", file=sys.stderr)
        return 2
    if _git_ok(root, "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}") is None:
        print(f"coverage gap: error: --base {args.base!r}: not a git revision here "
              "(try origin/main, main, HEAD~1 or a commit hash)", file=sys.stderr)
        return 2
    try:
        registry = load_registry(root)
        jobs = JobFilter(schedule="per-commit", hardware=args.hardware, suite_prefix=args.suite_prefix).select(registry)
    except (ValueError, KeyError) as exc:
        print(f"coverage gap: error: {exc}", file=sys.stderr)
        return 2
    if args.hardware not in registry.catalog.hardware:
        print(f"coverage gap: error: --hardware {args.hardware!r}: not a label in ci/hardware.yaml "
              f"({', '.join(registry.catalog.labels)})", file=sys.stderr)
        return 2
    if not jobs:
        print(f"coverage gap: error: no per-commit job matches --hardware {args.hardware}"
              + (f" --suite-prefix {args.suite_prefix}" if args.suite_prefix else ""), file=sys.stderr)
        return 2
    changed = changed_lines(root, args.base)
    if not changed:
        print(f"coverage gap: no changed Python lines under {IMPL_DIR}/ since {args.base}")
        return 0
    total = sum(len(v) for v in changed.values())
    print(f"coverage gap: {total} changed line(s) in {len(changed)} file(s) under {IMPL_DIR}/ since {args.base}")
    with tempfile.TemporaryDirectory() as tmp:
        data_file = Path(tmp) / ".coverage"
        failed = measure(root, data_file, jobs)
        gaps = uncovered(root, data_file, changed)
    if failed:
        print(f"note: tests failed in {failed}; coverage below is what ran anyway")
    if not gaps:
        print(f"coverage gap: none -- every changed executable line runs in a per-commit {args.hardware} job")
        return 0
    print(f"coverage gap: changed lines that no per-commit {args.hardware} job executes:")
    for rel, lines in gaps.items():
        print(f"  {rel}: {ranges(lines)}")
    print("(tested only nightly, on GPU-only jobs, or not at all: add a per-commit test or variant)")
    return 0 if args.report_only else 1


if __name__ == "__main__":
    sys.exit(main())
