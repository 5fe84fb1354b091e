"""Split a job's tests across shards: longest-processing-time first, deterministic.

Times are the registered estimates, replaced by measured durations (a JUnit XML
or a ``{node_id: seconds}`` JSON from an earlier run) where those know a test.
"""
from __future__ import annotations

from ci.input_errors import InputError, json_input
from ci.numbers import whole_number
from ci.safe_yaml import short

import heapq
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Mapping, Sequence

MAX_IMBALANCE = 1.15  # max shard time / mean shard time whenever there is more than one shard
_PARAMS = re.compile(r"\[.*\]$", re.S)


def lpt_partition(items: Sequence[tuple[str, float]], shards: int) -> list[list[str]]:
    """Assign each (test id, seconds) to one of ``shards`` shards, longest first.

    Each item goes to the shard with the least load so far (ties: fewer items,
    then lower index), so with ``shards <= len(items)`` no shard is empty. Ties
    between equally long items are broken by test id; the result is a pure
    function of the input set. Each shard's ids are returned sorted.
    """
    if shards < 1:
        raise InputError(f"shards must be >= 1, got {shards}")
    order = sorted(items, key=lambda it: (-it[1], it[0]))
    heap = [(0.0, 0, i) for i in range(shards)]
    out: list[list[str]] = [[] for _ in range(shards)]
    for test_id, seconds in order:
        load, count, index = heapq.heappop(heap)
        out[index].append(test_id)
        heapq.heappush(heap, (load + max(seconds, 0.0), count + 1, index))
    return [sorted(s) for s in out]


def shard_loads(items: Sequence[tuple[str, float]], shards: int) -> list[float]:
    times = dict(items)
    return [sum(times[t] for t in shard) for shard in lpt_partition(items, shards)]


def imbalance(loads: Sequence[float]) -> float:
    """max / mean of shard loads (1.0 for one shard or no time at all)."""
    total = sum(loads)
    if len(loads) <= 1 or total <= 0:
        return 1.0
    return max(loads) / (total / len(loads))


def choose_shard_count(items: Sequence[tuple[str, float]], budget_s: float,
                       max_imbalance: float = MAX_IMBALANCE) -> int:
    """Fewest shards that fit ``budget_s`` each, reduced until the split is balanced.

    Starts from ceil(total / budget) (never more shards than tests) and lowers the
    count while the LPT split's max/mean exceeds ``max_imbalance``: balance wins
    over the budget, so a job with a few long tests runs on fewer, longer shards.
    """
    if not items:
        return 0
    total = sum(max(t, 0.0) for _, t in items)
    n = min(len(items), max(1, math.ceil(total / budget_s)))
    while n > 1 and imbalance(shard_loads(items, n)) > max_imbalance:
        n -= 1
    return n


# -- a group's shards: (job, test) pairs, each job kept whole where balance allows -----
GroupItems = Mapping[str, Sequence[tuple[str, float]]]   # job id -> [(node id, seconds)]


def _units(items: GroupItems, shards: int, whole_jobs: bool) -> list[tuple[float, str, tuple[str, ...]]]:
    """(seconds, job id, node ids) units to pack: whole jobs when they fit one shard's share."""
    total = sum(max(t, 0.0) for tests in items.values() for _, t in tests)
    target = total / shards if shards else total
    units = []
    for job_id, tests in items.items():
        job_time = sum(max(t, 0.0) for _, t in tests)
        if whole_jobs and (shards == 1 or job_time <= target):
            units.append((job_time, job_id, tuple(sorted(n for n, _ in tests))))
            continue
        pieces = len(tests) if not whole_jobs else min(len(tests), max(1, math.ceil(job_time / max(target, 1e-9))))
        times = dict(tests)
        for piece in lpt_partition(list(tests), pieces):
            if piece:
                units.append((sum(max(times[n], 0.0) for n in piece), job_id, tuple(piece)))
    return units


def _pack(units: list[tuple[float, str, tuple[str, ...]]], shards: int
          ) -> tuple[list[dict[str, list[str]]], list[float]]:
    """Units packed longest first onto the least-loaded shard: the shards and their loads."""
    heap = [(0.0, 0, i) for i in range(shards)]
    out: list[dict[str, list[str]]] = [{} for _ in range(shards)]
    loads = [0.0] * shards
    for seconds, job_id, tests in sorted(units, key=lambda u: (-u[0], u[1], u[2])):
        load, count, index = heapq.heappop(heap)
        out[index].setdefault(job_id, []).extend(tests)
        loads[index] = load + seconds
        heapq.heappush(heap, (loads[index], count + 1, index))
    return [{j: sorted(t) for j, t in sorted(s.items())} for s in out], loads


def _halve(unit: tuple[float, str, tuple[str, ...]], times: Mapping[tuple[str, str], float]
           ) -> list[tuple[float, str, tuple[str, ...]]]:
    """One unit of several tests as two LPT halves (two pytest processes of its job)."""
    _, job_id, tests = unit
    halves = lpt_partition([(n, times[(job_id, n)]) for n in tests], 2)
    return [(sum(max(times[(job_id, n)], 0.0) for n in half), job_id, tuple(half)) for half in halves]


def group_partition(items: GroupItems, shards: int,
                    max_imbalance: float = MAX_IMBALANCE) -> list[dict[str, list[str]]]:
    """Split a group's (job, test) pairs into ``shards`` shards: ``[{job id: [node ids]}]``.

    Each job is one unit (one pytest process) unless it is longer than a shard's
    share, then it is cut into just enough LPT pieces; the units are packed longest
    first. While that packing is out of balance (max/mean above ``max_imbalance``)
    or leaves a shard empty, the longest unit of more than one test is halved (one
    more process) and the units packed again, so a test a few seconds longer costs
    a process or two, not one per test. Only when no unit can be halved does every
    (job, test) pair become its own unit. Deterministic in its input set.
    """
    if shards < 1:
        raise InputError(f"shards must be >= 1, got {shards}")
    times = {(j, n): t for j, tests in items.items() for n, t in tests}
    units = _units(items, shards, True)
    while True:
        best, loads = _pack(units, shards)
        if imbalance(loads) <= max_imbalance and all(best):   # never an empty shard from whole jobs
            return best
        splittable = [u for u in units if len(u[2]) > 1]
        if not splittable:
            break
        longest = min(splittable, key=lambda u: (-u[0], u[1], u[2]))
        units = [u for u in units if u is not longest] + _halve(longest, times)
    best, _ = _pack(_units(items, shards, False), shards)
    return best


def group_loads(items: GroupItems, shards: int) -> list[float]:
    times = {(j, n): t for j, tests in items.items() for n, t in tests}
    return [sum(max(times[(j, n)], 0.0) for j, tests in shard.items() for n in tests)
            for shard in group_partition(items, shards)]


def choose_group_shard_count(items: GroupItems, budget_s: float, max_imbalance: float = MAX_IMBALANCE) -> int:
    """Fewest group shards that fit ``budget_s`` each, lowered until the split is balanced."""
    pairs = sum(len(tests) for tests in items.values())
    if not pairs:
        return 0
    total = sum(max(t, 0.0) for tests in items.values() for _, t in tests)
    n = min(pairs, max(1, math.ceil(total / budget_s)))
    while n > 1 and imbalance(group_loads(items, n)) > max_imbalance:
        n -= 1
    return n


MAX_SHARDS = 256   # shards of one group or job: a GitHub matrix's most jobs


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1-based) -> (I, N); a clear ValueError otherwise."""
    match = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text or "")
    if not match:
        raise InputError(f"--shard must look like I/N (e.g. 2/3), got {short(text)}")
    index, count = whole_number(match.group(1)), whole_number(match.group(2))
    if count is None or count > MAX_SHARDS:   # the partitioner works per shard: 10**20 would never end
        raise InputError(f"--shard {short(text)}: at most {MAX_SHARDS} shards (a GitHub matrix holds 256 jobs)")
    if index is None or count < 1 or not 1 <= index <= count:
        raise InputError(f"--shard {short(text)}: need 1 <= I <= N")
    return index, count


# -- measured durations ------------------------------------------------------------
def dotted(node_id: str) -> str:
    """``registered/test_x.py::TestC::test_m[1]`` -> ``registered.test_x.TestC.test_m``."""
    path, *names = node_id.split("::")
    if path.endswith(".py"):
        path = path[:-3]
    names = [_PARAMS.sub("", n) for n in names]
    return ".".join([path.replace("/", "."), *names])


def load_durations(path: str | Path) -> dict[str, float]:
    """Measured seconds keyed by dotted test name (see :func:`dotted`), summed over parameters.

    Accepts a JUnit XML written by pytest or a JSON object ``{node_id: seconds}``.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    out: dict[str, float] = {}
    if text.lstrip().startswith("<"):
        for case in ET.fromstring(text).iter("testcase"):
            key = f"{case.get('classname', '')}.{_PARAMS.sub('', case.get('name', ''))}".lstrip(".")
            out[key] = out.get(key, 0.0) + float(case.get("time") or 0.0)
        return out
    data = json_input(text, str(path))
    if not isinstance(data, dict) or not all(isinstance(v, (int, float)) for v in data.values()):
        raise InputError(f"{path}: durations JSON must be an object {{node_id: seconds}}")
    for node_id, seconds in data.items():
        key = dotted(node_id)
        out[key] = out.get(key, 0.0) + float(seconds)
    return out


def measured_time(node_id: str, durations: Mapping[str, float]) -> float | None:
    """Sum of measured times of everything under ``node_id``; None when none was measured."""
    base = dotted(node_id)
    hits = [t for k, t in durations.items() if k == base or k.startswith(base + ".")]
    return sum(hits) if hits else None
