"""Groups as the emitter, the path gating and liveness see them: (schedule, hardware) -> shards.

A group is ``schedule/hardware`` (e.g. ``per-commit/cpu``); one GitHub job runs each
(group, shard). The plans API is ``Registry.groups`` / ``Registry.group_shard`` in
``ci/jobs.py`` (owned by the runner side). Until that lands, :func:`groups` falls back
to a local plan (marked FALLBACK below): the group's (job, test) pairs split
longest-first over ``choose_shard_count`` shards, durations ignored.
Never imports torch, ``impl`` or test code.
"""
from __future__ import annotations

from dataclasses import dataclass

from ci.catalog import Hardware
from ci.jobs import Job, Registry
from ci.partition import choose_shard_count, lpt_partition

SEP = "::"


@dataclass(frozen=True)
class GroupView:
    id: str                      # schedule/hardware
    schedule: str
    hardware: Hardware
    shards: int
    jobs: tuple[Job, ...]
    shard_seconds: tuple[float, ...]   # estimated seconds of each shard, 1..N

    @property
    def key(self) -> str:
        """GitHub workflow job key and changes-output name: ``per-commit__h200-1``."""
        return self.id.replace("/", "__").replace(".", "-")

    @property
    def label(self) -> str:
        return self.hardware.label


def _times(job: Job) -> dict[str, float]:
    return dict(job.timed_items())


def _from_registry_api(registry: Registry) -> list[GroupView]:
    out = []
    for gid, group in registry.groups.items():   # type: ignore[attr-defined]
        items = registry.group_items(gid) if hasattr(registry, "group_items") else {}  # measured, else est_time
        seconds = []
        for index in range(1, group.shards + 1):
            total = 0.0
            for job, nodes in registry.group_shard(gid, index, group.shards):  # type: ignore[attr-defined]
                times = dict(items.get(job.id, ())) or _times(job)
                total += sum(times.get(n, 0.0) for n in nodes)
            seconds.append(total)
        out.append(GroupView(gid, group.schedule, registry.catalog.get(group.hardware)
                             if isinstance(group.hardware, str) else group.hardware,
                             group.shards, tuple(group.jobs), tuple(seconds)))
    return out


def _fallback(registry: Registry) -> list[GroupView]:
    # FALLBACK (emit): replace with Registry.groups once ci/jobs.py provides it.
    by_group: dict[str, list[Job]] = {}
    for job in registry.jobs.values():
        by_group.setdefault(f"{job.key.schedule}/{job.key.hardware}", []).append(job)
    out = []
    for gid, jobs in by_group.items():
        items = [(f"{job.id}{SEP}{node}", t) for job in jobs for node, t in job.timed_items()]
        shards = max(1, choose_shard_count(items, registry.catalog.shard_budget_s))
        times = dict(items)
        seconds = tuple(sum(times[i] for i in part) for part in lpt_partition(items, shards))
        out.append(GroupView(gid, jobs[0].key.schedule, jobs[0].hardware, shards, tuple(jobs), seconds))
    return out


def groups(registry: Registry) -> list[GroupView]:
    """Every group in registry order (per-commit first), each with its shard count and loads."""
    if hasattr(registry, "groups") and hasattr(registry, "group_shard"):
        return _from_registry_api(registry)
    return _fallback(registry)


def by_schedule(registry: Registry, schedule: str) -> list[GroupView]:
    return [g for g in groups(registry) if g.schedule == schedule]
