"""Jobs: (schedule, hardware, suite, env variant) -> the tests registered for it.

A job id reads ``schedule/hardware/suite`` or ``schedule/hardware/suite[variant]``,
e.g. ``per-commit/cpu/kernels`` or ``nightly/mi35x-8/dspark-e2e[kv]``.
:func:`load_registry` is the one entry point: catalog + collection + jobs + shard counts.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ci.catalog import Catalog, Hardware, load_catalog
from ci.collect import Collection, CollectionError, Registration, collect
from ci.partition import choose_shard_count, lpt_partition, measured_time

JOB_ID_RE = re.compile(
    r"^(?P<schedule>[a-z][a-z-]*)/(?P<hardware>[a-z0-9][a-z0-9.-]*)/"
    r"(?P<suite>[a-z0-9][a-z0-9_.-]*)(?:\[(?P<variant>[A-Za-z0-9][A-Za-z0-9_.-]*)\])?$"
)


@dataclass(frozen=True, order=True)
class JobKey:
    schedule: str
    hardware: str
    suite: str
    variant: str | None = None

    @property
    def id(self) -> str:
        return job_id(self.schedule, self.hardware, self.suite, self.variant)


def job_id(schedule: str, hardware: str, suite: str, variant: str | None = None) -> str:
    text = f"{schedule}/{hardware}/{suite}" + (f"[{variant}]" if variant else "")
    if not JOB_ID_RE.match(text):
        raise ValueError(f"cannot form a job id from {schedule!r}, {hardware!r}, {suite!r}, {variant!r}")
    return text


def parse_job_id(text: str) -> JobKey:
    """Inverse of :func:`job_id`; a ValueError says what a job id looks like."""
    match = JOB_ID_RE.match(text or "")
    if not match:
        raise ValueError(
            f"not a job id: {text!r}; expected schedule/hardware/suite or schedule/hardware/suite[variant], "
            "e.g. per-commit/cpu/kernels or nightly/mi35x-8/dspark-e2e[kv]"
        )
    return JobKey(match["schedule"], match["hardware"], match["suite"], match["variant"])


def workflow_key(text: str) -> str:
    """A GitHub workflow job key for a job id: ``nightly/mi35x-8/e2e[kv]`` -> ``nightly__mi35x-8__e2e__kv``."""
    key = parse_job_id(text)
    parts = [key.schedule, key.hardware, key.suite] + ([key.variant] if key.variant else [])
    return "__".join(p.replace(".", "-") for p in parts)


def sanitize(text: str) -> str:
    """A file-system friendly form of a job id (for ci-results/<...>/)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


@dataclass(frozen=True)
class JobTest:
    node_id: str
    est_time: float
    where: str


@dataclass
class Job:
    key: JobKey
    hardware: Hardware
    env: dict[str, str]                    # the variant's env (hardware default env not included)
    tests: list[JobTest] = field(default_factory=list)
    shards: int = 1

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def est_time(self) -> float:
        return sum(t.est_time for t in self.tests)

    def full_env(self) -> dict[str, str]:
        """Hardware default env overlaid with the variant env."""
        return {**self.hardware.env, **self.env}

    def timed_items(self, durations: Mapping[str, float] | None = None) -> list[tuple[str, float]]:
        items = []
        for test in self.tests:
            measured = measured_time(test.node_id, durations) if durations else None
            items.append((test.node_id, test.est_time if measured is None else measured))
        return items

    def shard_tests(self, index: int, count: int, durations: Mapping[str, float] | None = None) -> list[str]:
        """Node ids of shard ``index`` (1-based) of ``count``."""
        return lpt_partition(self.timed_items(durations), count)[index - 1]


@dataclass
class Registry:
    root: Path
    catalog: Catalog
    collection: Collection
    jobs: dict[str, Job]
    disabled: list[Registration]

    def job(self, text: str) -> Job:
        parse_job_id(text)
        if text not in self.jobs:
            close = difflib.get_close_matches(text, list(self.jobs), n=3)
            hint = f"; did you mean {close}?" if close else ""
            raise KeyError(f"no registered job {text!r}{hint} (list them: python -m ci.audit)")
        return self.jobs[text]


def _ancestor(node_id: str, others: Mapping[str, JobTest]) -> JobTest | None:
    parts = node_id.split("::")
    for i in range(len(parts) - 1, 1, -1):
        hit = others.get("::".join(parts[:i]))
        if hit:
            return hit
    return None


def build_jobs(collection: Collection, catalog: Catalog) -> tuple[dict[str, Job], list[Registration]]:
    jobs: dict[str, Job] = {}
    disabled: list[Registration] = []
    problems: list[str] = []
    for reg in collection.registrations:
        if reg.disabled is not None:
            disabled.append(reg)
            continue
        variants = list(reg.env.items()) or [(None, {})]
        for label in reg.hardware:
            for variant, env in variants:
                key = JobKey(reg.schedule, label, reg.suite, variant)
                job = jobs.get(key.id)
                if job is None:
                    job = jobs[key.id] = Job(key, catalog.get(label), dict(env))
                elif job.env != env:
                    problems.append(f"{reg.where}: job {key.id}: variant {variant!r} sets {env}, "
                                    f"but another registration of that job sets {job.env}")
                    continue
                existing = {t.node_id: t for t in job.tests}
                clash = existing.get(reg.node_id) or _ancestor(reg.node_id, existing)
                if clash:
                    problems.append(f"{reg.where}: duplicate: {reg.node_id} is already in job {key.id} "
                                    f"(registered at {clash.where})")
                    continue
                descendants = [t for t in job.tests if t.node_id.startswith(reg.node_id + "::")]
                if descendants:
                    problems.append(f"{reg.where}: duplicate: {reg.node_id} covers {descendants[0].node_id}, "
                                    f"already in job {key.id} (registered at {descendants[0].where})")
                    continue
                job.tests.append(JobTest(reg.node_id, reg.est_time, reg.where))
    keys: dict[str, str] = {}
    for text in jobs:
        wkey = workflow_key(text)
        if wkey in keys:
            problems.append(f"job ids {keys[wkey]!r} and {text!r} map to the same workflow job key {wkey!r}; rename a suite")
        keys[wkey] = text
    if problems:
        raise CollectionError(problems)
    for job in jobs.values():
        job.tests.sort(key=lambda t: t.node_id)
        job.shards = choose_shard_count(job.timed_items(), catalog.shard_budget_s)
    return dict(sorted(jobs.items(), key=lambda kv: _job_order(kv[1].key))), disabled


def _job_order(key: JobKey) -> tuple:
    return (key.schedule != "per-commit", key.schedule, key.hardware, key.suite, key.variant or "")


def load_registry(root: str | Path = ".") -> Registry:
    root = Path(root).resolve()
    catalog = load_catalog(root)
    collection = collect(root, catalog)
    jobs, disabled = build_jobs(collection, catalog)
    return Registry(root, catalog, collection, jobs, disabled)
