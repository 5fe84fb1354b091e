"""Measured test durations (``ci/durations.json``): read for shard planning, refreshed from JUnit files.

    python -m ci.registry.durations --from DIR [--root .]    # DIR: JUnit XML written by the runner (any depth)

The file maps hardware label -> registered node id -> seconds (all its parameters
together). Plans use it where it knows a test and fall back to ``est_time``.
A refresh replaces what the JUnit files measured, keeps the rest, and drops node
ids that are no longer registered for that label. Imports no torch, no test code.
"""
from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from ci.registry.durations_file import (  # noqa: F401  (re-exported: the runner and plugin import them from here)
    ABOUT,
    DURATIONS_PATH,
    REGISTRATION_PROPERTY,
    Durations,
    DurationsError,
    dump,
    load,
    parse,
)
from ci.safe_files import write_atomic


def measured_from_junit(files: list[Path], registry) -> tuple[Durations, list[str]]:
    """label -> node id -> seconds from runner JUnit files (suite name = job id); plus notes."""
    from ci.registry.partition import dotted

    per_job: dict[tuple[str, str], float] = {}
    notes: list[str] = []
    for path in files:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            notes.append(f"{path}: not readable XML ({exc}); skipped")
            continue
        for suite in root.iter("testsuite"):
            job = registry.jobs.get(suite.get("name", ""))
            if job is None:
                notes.append(f"{path}: suite {suite.get('name')!r} is not a registered job id; skipped")
                continue
            nodes = [t.node_id for t in job.tests]
            for case in suite.iter("testcase"):
                props = {p.get("name"): p.get("value") for p in case.iter("property")}
                node = props.get(REGISTRATION_PROPERTY)
                if node not in nodes:
                    key = f"{case.get('classname', '')}.{case.get('name', '')}".split("[")[0]
                    node = next((n for n in nodes if key == dotted(n) or key.startswith(dotted(n) + ".")), None)
                if node is None:
                    continue
                k = (job.id, node)
                per_job[k] = per_job.get(k, 0.0) + float(case.get("time") or 0.0)
    out: Durations = {}
    for (job_id, node), seconds in per_job.items():
        label = registry.jobs[job_id].key.hardware
        tests = out.setdefault(label, {})
        tests[node] = max(tests.get(node, 0.0), seconds)   # variants of one test: the slowest
    return out, notes


def refresh(root: Path, junit_dir: Path) -> str:
    from ci.registry.jobs import load_registry

    files = sorted(p for p in junit_dir.rglob("*.xml") if p.is_file())
    if not files:
        raise DurationsError(f"--from {junit_dir}: no JUnit XML file under it")
    registry = load_registry(root)
    measured, notes = measured_from_junit(files, registry)
    if not measured:
        raise DurationsError(f"--from {junit_dir}: {len(files)} XML file(s), but none holds a registered job's tests "
                             "(the runner names each JUnit suite after its job id)")
    current = load(root)
    registered: dict[str, set[str]] = {}
    for job in registry.jobs.values():
        registered.setdefault(job.key.hardware, set()).update(t.node_id for t in job.tests)
    merged: Durations = {}
    for label in sorted(set(current) | set(measured)):
        tests = {**current.get(label, {}), **measured.get(label, {})}
        merged[label] = {n: s for n, s in tests.items() if n in registered.get(label, set())}
    write_atomic(root / DURATIONS_PATH, dump(merged))   # a failed write never leaves half a file
    counts = ", ".join(f"{label}: {len(t)} measured" for label, t in sorted(measured.items()))
    return "\n".join(notes + [f"{DURATIONS_PATH}: updated from {len(files)} JUnit file(s) ({counts})"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.registry.durations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", required=True, help="folder holding the runner's JUnit XML files")
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    args = parser.parse_args(argv)
    source = Path(args.source)
    if not source.is_dir():
        print(f"[ci] error: --from {args.source}: not a directory", file=sys.stderr)
        return 2
    try:
        print(refresh(Path(args.root).resolve(), source))
    except (DurationsError, ValueError) as exc:
        print(f"[ci] error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
