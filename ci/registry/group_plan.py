"""Groups as the emitter, the path gating and liveness see them: (schedule, hardware) -> shards.

A group is ``schedule/hardware`` (e.g. ``per-commit/cpu``); one GitHub job runs each
(group, shard). The plans API is ``Registry.groups`` / ``Registry.group_shard`` in
``ci/registry/jobs.py`` (owned by the runner side); this module only adds the per-shard loads and names.
Never imports torch, ``impl`` or test code.
"""
from __future__ import annotations

from dataclasses import dataclass

from ci.registry.catalog import Hardware
from ci.registry.jobs import Job, Registry

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
    for gid, group in registry.groups.items():
        items = registry.group_items(gid)  # measured seconds, else est_time
        seconds = []
        for index in range(1, group.shards + 1):
            total = 0.0
            for job, nodes in registry.group_shard(gid, index, group.shards):
                times = dict(items.get(job.id, ())) or _times(job)
                total += sum(times.get(n, 0.0) for n in nodes)
            seconds.append(total)
        out.append(GroupView(gid, group.schedule, registry.catalog.get(group.hardware)
                             if isinstance(group.hardware, str) else group.hardware,
                             group.shards, tuple(group.jobs), tuple(seconds)))
    return out


def groups(registry: Registry) -> list[GroupView]:
    """Every group in registry order (per-commit first), each with its shard count and loads."""
    return _from_registry_api(registry)


def by_schedule(registry: Registry, schedule: str) -> list[GroupView]:
    return [g for g in groups(registry) if g.schedule == schedule]
