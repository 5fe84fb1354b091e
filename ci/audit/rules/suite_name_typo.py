"""suite-name-typo: a new suite name is not within edit distance 2 of an existing one unless declared.

``own(report)``: a one-test suite close to a bigger one of the same hardware and schedule, unless
ci/hardware.yaml ``defaults.declared_suites`` names it. ``foreign(report)``: a one-file suite close
to a bigger one, unless a workflow step names it. The distance itself is ``ci.registry.suite_names``.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from ci.audit.findings import Location, Rule
from ci.audit.keys import target_key
from ci.registry.catalog import CATALOG_PATH
from ci.registry.suite_names import TooManyNames, near_names
from ci.safe_files import UnreadableFile, read_inside
from ci.safe_yaml import load_yaml, mapping

RULE = Rule(
    "suite-name-typo",
    "a new suite name is not within edit distance 2 of an existing one unless declared",
    "suite='kernles' silently creates a new one-test job instead of joining 'kernels'",
    '@register(suite="kernles", ...) next to suite "kernels"',
    "warning [suite-name-typo] registered/test_x.py:9: suite 'kernles' is 2 edit(s) from 'kernels' ...",
    "warning",
)


def declared_suites(root: str | Path) -> list[str]:
    """``defaults.declared_suites`` in ci/hardware.yaml: suite names that are close to another on purpose."""
    try:
        data = load_yaml(read_inside(root, Path(root) / CATALOG_PATH)) or {}
    except (UnreadableFile, yaml.YAMLError):
        return []
    value = mapping(mapping(data).get("defaults")).get("declared_suites") or []
    return [str(v) for v in value] if isinstance(value, list) else []


def _near(report, sizes, declared=()) -> list[tuple[str, str, int]]:
    """near_names, or none with a note when the registry has more name pairs than the check compares."""
    try:
        return near_names(sizes, declared)
    except TooManyNames as exc:
        report.add(RULE.id, f"suite names not compared for typos: {exc} among {len(sizes)} suites",
                   severity="note")
        return []


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    jobs = report.registry.jobs
    sizes: dict[str, int] = {}
    for j in jobs.values():   # a suite's size counts its variants' tests too
        key = f"{j.key.schedule}/{j.key.hardware}/{j.key.suite}"
        sizes[key] = sizes.get(key, 0) + len(j.tests)
    first = {}
    for j in jobs.values():
        first.setdefault(f"{j.key.schedule}/{j.key.hardware}/{j.key.suite}", j)
    for suspect, meant, distance in _near(report, sizes, declared_suites(report.registry.root)):
        job = first[suspect]
        test = job.tests[0]
        report.add(RULE.id,
                   f"{test.where}: suite {job.key.suite!r} ({sizes[suspect]} test(s)) is {distance} edit(s) from "
                   f"{meant.split('/', 2)[2]!r} ({sizes[meant]} test(s)) on {job.key.schedule}/{job.key.hardware}: "
                   f"a typo makes a new one-test job (declare it in {CATALOG_PATH} defaults.declared_suites)",
                   severity="warning", why_unproven="a name this close may be intended (declare it to say so)",
                   hardware=job.key.hardware, suite=job.key.suite, schedule=job.key.schedule)


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    jobs = report.jobs
    sizes = {job_id: len(regs) for job_id, regs in jobs.items()}
    run = {r.target for r in report.scan.refs}
    for job_id, other, distance in _near(report, sizes):
        if job_id in run:   # a workflow names it: intended
            continue
        reg = jobs[job_id][0]
        report.add(RULE.id, f"{reg.where}: suite {job_id.split('/', 2)[2]!r} ({sizes[job_id]} file(s)) is "
                   f"{distance} edit(s) from {other.split('/', 2)[2]!r} ({sizes[other]} file(s)): a typo makes a new "
                   "suite", severity="warning", locations=(Location(reg.file, reg.line),),
                   why_unproven="a name this close may be intended", **target_key(job_id))
