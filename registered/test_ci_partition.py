"""The shard partitioner: LPT, deterministic, every test once, balanced shard counts."""
from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registered.fixture_repo import REAL_ROOT, FixtureRepo
from ci.registry.jobs import load_registry
from ci.registry.partition import (MAX_IMBALANCE, choose_shard_count, imbalance, load_durations, lpt_partition,
                          measured_time, parse_shard, shard_loads)
from ci.registration import register

items_strategy = st.lists(
    st.tuples(st.text("abcdefgh", min_size=1, max_size=6), st.floats(0.1, 500, allow_nan=False)),
    min_size=1, max_size=40, unique_by=lambda it: it[0])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@settings(max_examples=40, deadline=None)
@given(items=items_strategy, shards=st.integers(1, 8), seed=st.integers(0, 10**6))
def test_every_test_lands_in_exactly_one_shard_deterministically(items, shards, seed):
    shards = min(shards, len(items))
    out = lpt_partition(items, shards)
    flat = [t for shard in out for t in shard]
    assert sorted(flat) == sorted(i for i, _ in items)
    assert all(out), "no shard may be empty when shards <= tests"
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    assert lpt_partition(shuffled, shards) == out  # input order does not matter


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@settings(max_examples=40, deadline=None)
@given(items=items_strategy, shards=st.integers(1, 8))
def test_lpt_is_within_the_list_scheduling_bound(items, shards):
    shards = min(shards, len(items))
    loads = shard_loads(items, shards)
    total, longest = sum(t for _, t in items), max(t for _, t in items)
    assert math.isclose(sum(loads), total)
    assert max(loads) <= total / shards + longest + 1e-9


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@settings(max_examples=50, deadline=None)
@given(items=items_strategy, budget=st.floats(10, 1000))
def test_shard_count_is_balanced_whenever_above_one(items, budget):
    n = choose_shard_count(items, budget)
    assert 1 <= n <= len(items)
    assert n <= max(1, math.ceil(sum(t for _, t in items) / budget))
    if n > 1:
        assert imbalance(shard_loads(items, n)) <= MAX_IMBALANCE


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_shard_count_examples():
    equal = [(f"t{i}", 100.0) for i in range(12)]
    assert choose_shard_count(equal, 600) == 2       # 1200 s of equal tests: two 600 s shards
    assert choose_shard_count(equal, 250) == 4       # ceil(1200/250) = 5 is unbalanced (3,3,2,2,2); 4 is exact
    one_giant = [("giant", 1000.0), ("a", 1.0), ("b", 1.0), ("c", 1.0)]
    assert choose_shard_count(one_giant, 300) == 1   # no split of these is balanced: fewer, longer shards
    assert lpt_partition([("b", 5.0), ("a", 5.0), ("c", 5.0)], 2) == [["a", "c"], ["b"]]  # ties by id


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("text", ["", "2", "0/2", "3/2", "a/b", "1/0", "1/257", "1/99999999999999999999"])
def test_parse_shard_rejects_bad_values(text):
    with pytest.raises(ValueError, match="I/N|1 <= I <= N|at most 256 shards"):
        parse_shard(text)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_the_runner_refuses_a_shard_count_it_could_never_plan_at_once():
    """``--shard 1/10**20`` made the runner plan 10**20 shards (it never ended); past 256 (a GitHub
    matrix's most jobs) it is exit 2 in one line before any planning, and 256 itself is planned."""
    import subprocess
    import sys

    def dry_run(shard: str):
        return subprocess.run([sys.executable, "-m", "ci.runner.run_suite", "--group", "per-commit/cpu", "--shard",
                               shard, "--dry-run"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=60)
    refused = dry_run("1/99999999999999999999")
    assert refused.returncode == 2 and "at most 256 shards" in refused.stderr, refused.stderr[-500:]
    assert "Traceback" not in refused.stderr
    planned = dry_run("256/256")
    assert planned.returncode == 0, planned.stderr[-500:]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_measured_durations_replace_estimates(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_t.py", """
        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=10)
        def test_a(): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=10)
        def test_b(): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=10)
        class TestC:
            def test_x(self): pass
    """)
    job = load_registry(tmp_path).job("per-commit/cpu/s")
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="registered.test_t" name="test_a" time="90.0"/>'
        '<testcase classname="registered.test_t.TestC" name="test_x[1]" time="30.0"/>'
        '<testcase classname="registered.test_t.TestC" name="test_x[2]" time="35.5"/>'
        '</testsuite></testsuites>')
    durations = load_durations(junit)
    assert measured_time("registered/test_t.py::TestC", durations) == 65.5
    assert measured_time("registered/test_t.py::test_b", durations) is None
    assert dict(job.timed_items(durations)) == {
        "registered/test_t.py::test_a": 90.0, "registered/test_t.py::test_b": 10.0,
        "registered/test_t.py::TestC": 65.5}
    # by estimate, a is alone only by id order; by measurement the 90 s test gets its own shard
    assert job.shard_tests(1, 2, durations) == ["registered/test_t.py::test_a"]
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps({"registered/test_t.py::test_b": 99.0}))
    assert job.shard_tests(1, 2, load_durations(as_json)) == ["registered/test_t.py::test_b"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_real_per_commit_jobs_are_balanced_and_complete():
    registry = load_registry(REAL_ROOT)
    per_commit = [j for j in registry.jobs.values() if j.key.schedule == "per-commit"]
    assert per_commit, "the project registers per-commit jobs"
    for job in per_commit:
        shards = [job.shard_tests(i, job.shards) for i in range(1, job.shards + 1)]
        assert sorted(t for s in shards for t in s) == sorted(t.node_id for t in job.tests), job.id
        assert all(shards), job.id
        if job.shards > 1:
            ratio = imbalance(shard_loads(job.timed_items(), job.shards))
            assert ratio <= MAX_IMBALANCE, (job.id, ratio)


# ------------------------------------------------------------------ group shards
group_strategy = st.dictionaries(
    st.sampled_from([f"per-commit/cpu/s{i}" for i in range(8)]),
    st.lists(st.tuples(st.text("abcdef", min_size=1, max_size=4), st.floats(0.1, 400, allow_nan=False)),
             min_size=1, max_size=12, unique_by=lambda it: it[0]),
    min_size=1, max_size=8)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@settings(max_examples=40, deadline=None)
@given(items=group_strategy, budget=st.floats(50, 1500))
def test_group_shards_hold_every_pair_once_balanced_and_deterministic(items, budget):
    from ci.registry.partition import choose_group_shard_count, group_loads, group_partition

    n = choose_group_shard_count(items, budget)
    shards = group_partition(items, n)
    pairs = sorted((j, t) for shard in shards for j, tests in shard.items() for t in tests)
    assert pairs == sorted((j, t) for j, tests in items.items() for t, _ in tests)
    assert all(shards), "no empty group shard"
    if n > 1:
        assert imbalance(group_loads(items, n)) <= MAX_IMBALANCE
    assert group_partition(dict(reversed(list(items.items()))), n) == shards


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_group_shards_keep_jobs_whole_when_they_fit():
    from ci.registry.partition import group_partition

    items = {"big": [("a", 300.0), ("b", 300.0)], "v1": [("x", 100.0)], "v2": [("x", 100.0)], "v3": [("y", 200.0)]}
    shards = group_partition(items, 2)
    # 1000 s over two shards: 'big' (600 s) exceeds a share (500 s) and is cut in two; the rest stay whole
    assert sorted(len(s) for s in shards) == [2, 3]
    processes = sum(len(s) for s in shards)
    assert processes == 5                     # one pytest process per (shard, job): 2 for big + 3 variants


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_real_groups_cover_every_job_test_once_without_more_processes_than_jobs():
    registry = load_registry(REAL_ROOT)
    assert "per-commit/cpu" in registry.groups
    for gid, group in registry.groups.items():
        assert group.shards >= 1 and group.jobs
        pairs = [(j.id, t) for i in range(1, group.shards + 1) for j, ts in registry.group_shard(gid, i, group.shards)
                 for t in ts]
        assert sorted(pairs) == sorted((j.id, t.node_id) for j in group.jobs for t in j.tests), gid
    cpu = registry.groups["per-commit/cpu"]
    processes = sum(len(registry.group_shard(cpu.id, i, cpu.shards)) for i in range(1, cpu.shards + 1))
    assert processes <= len(cpu.jobs) + cpu.shards   # per-commit wall time: few extra pytest start-ups


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_packing_just_out_of_balance_halves_a_job_not_every_job():
    """Whole jobs that pack just past MAX_IMBALANCE (1428 s on 3 shards, the per-commit cpu group's shape on the
    day a 25 s test tipped it: 550 s on the fullest shard, 1.155 x the mean) cost a process or two more, not a
    process per test: the longest unit is halved until the packing balances."""
    from ci.registry.partition import group_partition

    def job(name: str, n: int, seconds: float) -> list[tuple[str, float]]:
        return [(f"{name}::t{i}", seconds) for i in range(n)]

    items = {"ci": job("ci", 35, 347 / 35), "kernels": job("kernels", 57, 566 / 57),
             "components": job("components", 27, 267 / 27), "e2e-distributed": job("e2e-distributed", 6, 73 / 6),
             "e2e": job("e2e", 6, 66 / 6), "foundation": job("foundation", 4, 17 / 4),
             **{f"v{i}": job(f"v{i}", 1, 15.0) for i in range(4)}, "small": job("small", 2, 7 / 2)}
    total = sum(t for tests in items.values() for _, t in tests)
    shards = group_partition(items, 3)
    loads = [sum(dict(items[j])[n] for j, tests in s.items() for n in tests) for s in shards]
    assert max(loads) / (total / 3) <= MAX_IMBALANCE, loads
    assert sorted((j, n) for s in shards for j, tests in s.items() for n in tests) == \
        sorted((j, n) for j, tests in items.items() for n, _ in tests)
    assert sum(len(s) for s in shards) <= len(items) + 3, [len(s) for s in shards]   # pytest processes
