"""Jobs: (schedule, hardware, suite, env variant) -> the tests registered for it.

A job id reads ``schedule/hardware/suite`` or ``schedule/hardware/suite[variant]``,
e.g. ``per-commit/cpu/kernels`` or ``nightly/mi35x-8/dspark-e2e[kv]``. A group is
``schedule/hardware``: one GitHub job per (group, shard); its shards hold (job, test)
pairs, planned from ``ci/durations.json`` (falling back to ``est_time``).
:func:`load_registry` is the one entry point: catalog + collection + jobs + groups.
:class:`JobFilter` is the one way tools pick jobs. No torch, no test code here.
"""
from __future__ import annotations

from ci.input_errors import InputError

import difflib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, TypeVar

from ci.registry import durations_file
from ci.registry.catalog import Catalog, Hardware, load_catalog
from ci.registry.collect import Collection, CollectionError, Registration, collect
from ci.registry.partition import (choose_group_shard_count, choose_shard_count, group_partition, lpt_partition,
                          measured_time)

T = TypeVar("T")

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
        raise InputError(f"cannot form a job id from {schedule!r}, {hardware!r}, {suite!r}, {variant!r}")
    return text


def parse_job_id(text: str) -> JobKey:
    """Inverse of :func:`job_id`; a ValueError says what a job id looks like."""
    match = JOB_ID_RE.match(text or "")
    if not match:
        raise InputError(
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


TIMEOUT_FLOOR_S = 300.0   # per-test timeout floor (s) when a registration gives no timeout=
TIMEOUT_FACTOR = 10.0     # ... and the multiple of its (estimated or measured) time


@dataclass(frozen=True)
class JobTest:
    node_id: str
    est_time: float
    where: str
    retries: int = 0                # opt-in reruns (register(retries=N))
    timeout: float | None = None    # register(timeout=...); None: derived from est_time

    measured: float | None = None  # seconds measured on this label (ci/durations.json), all items together

    @property
    def per_test_timeout(self) -> float:
        """Seconds each pytest item of this registration may take (setup + call + teardown).

        ``register(timeout=...)`` when given, else max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR x the
        larger of est_time and the measured time). The estimate is the whole registration's
        (all methods, all parameters) and applies to each item undivided: no single item can
        legitimately exceed the whole, while a per-item share would time out registrations
        whose items are uneven. The bound is for hangs, not for slowness: CPU jobs run Triton
        through its interpreter on shared 2-core machines, where a test routinely takes several
        times its estimate.
        """
        if self.timeout is not None:
            return self.timeout
        return max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * max(self.est_time, self.measured or 0.0))


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
class Group:
    """``schedule/hardware``: one GitHub job per shard, running every job of it that the shard holds."""
    id: str
    schedule: str
    hardware: str
    shards: int
    jobs: list[Job]


def parse_group_id(text: str) -> tuple[str, str]:
    parts = (text or "").split("/")
    if len(parts) != 2 or not all(parts) or not JOB_ID_RE.match(f"{parts[0]}/{parts[1]}/x"):
        raise InputError(f"not a group id: {text!r}; expected schedule/hardware, "
                         "e.g. per-commit/cpu or nightly/mi35x-8")
    return parts[0], parts[1]


@dataclass
class Registry:
    root: Path
    catalog: Catalog
    collection: Collection
    jobs: dict[str, Job]
    disabled: list[Registration]
    durations: dict[str, dict[str, float]] = field(default_factory=dict)   # label -> node id -> seconds
    groups: dict[str, Group] = field(default_factory=dict)

    def test_time(self, job: Job, node_id: str) -> float:
        """Measured seconds for ``node_id`` on the job's hardware, else its est_time."""
        measured = self.durations.get(job.key.hardware, {}).get(node_id)
        if measured is not None:
            return measured
        return next(t.est_time for t in job.tests if t.node_id == node_id)

    def group_items(self, group_id: str) -> dict[str, list[tuple[str, float]]]:
        return {job.id: [(t.node_id, self.test_time(job, t.node_id)) for t in job.tests]
                for job in self.group(group_id).jobs}

    def group(self, text: str) -> Group:
        parse_group_id(text)
        return _look_up(self.groups, "group", text, f"; groups: {sorted(self.groups)}")

    def group_shard(self, group_id: str, index: int, count: int) -> list[tuple[Job, list[str]]]:
        """The (job, node ids) that shard ``index`` (1-based) of ``count`` of the group runs, in job order."""
        if count < 1 or not 1 <= index <= count:
            raise InputError(f"shard {index}/{count}: need 1 <= I <= N")
        shard = group_partition(self.group_items(group_id), count)[index - 1]
        return [(job, shard[job.id]) for job in self.group(group_id).jobs if shard.get(job.id)]

    def job_shard(self, job: Job, index: int, count: int) -> list[str]:
        """The tests of ``job`` that shard I/N of its group holds (may be empty)."""
        return next((tests for j, tests in self.group_shard(group_id_of(job), index, count) if j.id == job.id), [])

    def job(self, text: str) -> Job:
        parse_job_id(text)
        if text not in self.jobs:
            reasons = self.disabled_reasons(text)
            if reasons:
                raise KeyError(f"job {text!r} is registered, but all its registrations are disabled "
                               f"(reasons: {'; '.join(reasons)}): it runs nothing until one is re-enabled")
        return _look_up(self.jobs, "job", text, " (list them: python -m ci.audit)")

    def disabled_reasons(self, text: str) -> list[str]:
        """Distinct 'reason (until DATE)' of the disabled registrations that would form job ``text``."""
        reasons: dict[str, None] = {}
        for reg in self.disabled:
            ids = {JobKey(reg.schedule, label, reg.suite, variant).id
                   for label in reg.hardware for variant in (list(reg.env) or [None])}
            if text in ids:
                until = reg.disabled.get("until")
                reasons[reg.disabled.get("reason", "no reason given") + (f" (until {until})" if until else "")] = None
        return list(reasons)


def _look_up(table: Mapping[str, T], what: str, text: str, tail: str) -> T:
    """``table[text]``, else a KeyError naming the closest ids, then ``tail``."""
    if text not in table:
        close = difflib.get_close_matches(text, list(table), n=3)
        hint = f"; did you mean {close}?" if close else ""
        raise KeyError(f"no registered {what} {text!r}{hint}{tail}")
    return table[text]


def group_id_of(job: Job) -> str:
    return f"{job.key.schedule}/{job.key.hardware}"


@dataclass(frozen=True)
class JobFilter:
    """The one way ``ci.runner.pr``, ``ci.runner.run_many`` and ``ci.tools.coverage_gap`` pick jobs (None: any)."""
    schedule: str | None = None
    hardware: str | None = None
    hardware_prefix: str | None = None
    suite_prefix: str | None = None
    job: str | None = None

    def matches(self, job: Job) -> bool:
        key = job.key
        return ((self.job is None or job.id == self.job)
                and (self.schedule is None or key.schedule == self.schedule)
                and (self.hardware is None or key.hardware == self.hardware)
                and (self.hardware_prefix is None or key.hardware.startswith(self.hardware_prefix))
                and (self.suite_prefix is None or key.suite.startswith(self.suite_prefix)))

    def describe(self) -> str:
        parts = [f"{name.replace('_', '-')}={value}" for name, value in vars(self).items() if value is not None]
        return ", ".join(parts) or "any job"

    def select(self, registry: "Registry") -> list[Job]:
        """Matching jobs in registry order; a KeyError (with suggestions) for an unknown --job."""
        if self.job is not None:
            registry.job(self.job)
        return [j for j in registry.jobs.values() if self.matches(j)]


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
                job.tests.append(JobTest(reg.node_id, reg.est_time, reg.where, reg.retries, reg.timeout))
    keys: dict[str, str] = {}
    for text in jobs:
        wkey = workflow_key(text)
        if wkey in keys:
            problems.append(f"job ids {keys[wkey]!r} and {text!r} map to the same workflow job key {wkey!r}; "
                            "rename a suite")
        keys[wkey] = text
    if problems:
        raise CollectionError(problems)
    for job in jobs.values():
        job.tests.sort(key=lambda t: t.node_id)
        job.shards = choose_shard_count(job.timed_items(), catalog.shard_budget_s)
    return dict(sorted(jobs.items(), key=lambda kv: _job_order(kv[1].key))), disabled


def _job_order(key: JobKey) -> tuple:
    return (key.schedule != "per-commit", key.schedule, key.hardware, key.suite, key.variant or "")


def build_groups(registry: Registry) -> dict[str, Group]:
    groups: dict[str, Group] = {}
    for job in registry.jobs.values():
        gid = group_id_of(job)
        if gid not in groups:
            groups[gid] = Group(gid, job.key.schedule, job.key.hardware, 0, [])
        groups[gid].jobs.append(job)
    registry.groups = groups
    for group in groups.values():
        group.shards = choose_group_shard_count(registry.group_items(group.id), registry.catalog.shard_budget_s)
    return groups


def load_registry(root: str | Path = ".") -> Registry:
    root = Path(root).resolve()
    catalog = load_catalog(root)
    collection = collect(root, catalog)
    jobs, disabled = build_jobs(collection, catalog)
    registry = Registry(root, catalog, collection, jobs, disabled, durations_file.load(root))
    for job in jobs.values():
        measured = registry.durations.get(job.key.hardware, {})
        job.tests = [replace(t, measured=measured.get(t.node_id)) for t in job.tests]
    registry.groups = build_groups(registry)
    return registry
