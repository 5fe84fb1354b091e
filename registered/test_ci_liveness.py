"""Liveness against a fake GitHub API (registered/fake_github.py) serving the cases under
registered/fixtures/liveness/ over real HTTP; never the network. Exit codes: 0 alive, 1 dead, 2 unreadable."""
from __future__ import annotations

import datetime as dt
import importlib.util
import subprocess
import sys
import urllib.parse

import pytest
import yaml

from ci.tools import liveness
from ci.github.api import ApiError, Clocks, GitHubApi, Limits
from ci.registry.jobs import load_registry
from ci.registration import register
from ci.github.generate import WORKFLOW_DIR, generate
from registered.fake_github import FakeGitHub, created_matches, load_case
from registered.fixture_repo import REAL_ROOT, FixtureRepo

REPO = "dspark/dspark-suite"
NOW = dt.datetime(2026, 12, 1, 6, 41, tzinfo=dt.timezone.utc)
NOW_ARG = "2026-12-01T06:41:00Z"
UTC = dt.timezone.utc


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """The fake API is on 127.0.0.1: a proxy from the environment must not sit in between."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory):
    repo = FixtureRepo(tmp_path_factory.mktemp("liveness"))
    repo.test_file("test_l.py", """
        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
        def test_cpu(): pass

        @register(suite="kernels", hardware="h200-1", schedule="per-commit", est_time=5)
        def test_gpu(): pass

        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=500)
        def test_e2e(): pass

        @register(suite="dspark-verify", hardware="mi35x-8", schedule="nightly", est_time=500)
        def test_verify(): pass

        @register(suite="kernels-nightly", hardware="h200-1", schedule="nightly", est_time=5)
        def test_gpu_nightly(): pass
    """)
    return repo.root


@pytest.fixture(scope="module")
def registry(fixture_root):
    return load_registry(fixture_root)


class Clock:
    """The injected clock and sleeper: sleeping advances the clock, nothing waits."""

    def __init__(self, start: dt.datetime = NOW):
        self.now, self.sleeps = start.timestamp(), []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _api(gh: FakeGitHub, clock: Clock | None = None, **kw) -> GitHubApi:
    clock = clock or Clock()
    return GitHubApi("test-token", gh.base, Limits(**kw), Clocks(sleep=clock.sleep, wall=clock))


def _main(root, gh: FakeGitHub, *extra: str, clock: Clock | None = None, **kw) -> int:
    return liveness.main(["--root", str(root), "--repo", REPO, "--now", NOW_ARG, *extra],
                         fetch=_api(gh, clock, **kw))


def _lines(out: str) -> dict[str, str]:
    """'ok'/'DEAD' line per check name."""
    found = {}
    for line in out.splitlines():
        if line.startswith(("ok  ", "DEAD")):
            for name in ("per-commit/cpu shard 1/1", "per-commit/h200-1 shard 1/1", "nightly/mi35x-8 shard 1/2",
                         "nightly/mi35x-8 shard 2/2", "nightly/h200-1 shard 1/1"):
                if f"  {name}  " in line:
                    found[name] = line
    return found


def _jobs_requested(gh: FakeGitHub) -> list[str]:
    return [urllib.parse.urlsplit(p).path.split("/")[-2] for p in gh.requests if p.split("?")[0].endswith("/jobs")]


def _job(case: dict, run_id: int, name: str) -> dict:
    return next(j for j in case["jobs"][str(run_id)] if j["name"] == name)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_alive_history_exits_0_and_reads_push_runs_on_main_only(registry, fixture_root, capsys):
    assert [e.name for e in liveness.expectations(registry)] == [
        "per-commit/cpu shard 1/1", "per-commit/h200-1 shard 1/1",
        "nightly/h200-1 shard 1/1", "nightly/mi35x-8 shard 1/2", "nightly/mi35x-8 shard 2/2"]
    with FakeGitHub(load_case("alive")) as gh:
        assert _main(fixture_root, gh) == 0
    out = capsys.readouterr().out
    lines = _lines(out)
    assert len(lines) == 5 and all(line.startswith("ok") for line in lines.values()), out
    # the per-commit h200 shard failed with a runner: it ran (its PR run on a branch succeeded, but is not main)
    assert "last run on a push to main 2026-11-28T14:" in lines["per-commit/h200-1 shard 1/1"]
    runs = [urllib.parse.parse_qs(urllib.parse.urlsplit(p).query) for p in gh.requests
            if p.split("?")[0].endswith("/runs")]
    assert all(q["branch"] == ["main"] and q["per_page"] == ["100"] for q in runs)
    per_commit = next(q for q in runs if "event" in q)
    assert per_commit["event"] == ["push"]
    assert "80102" not in _jobs_requested(gh), "the pull_request run on a branch was filtered out by the API"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_job_no_runner_picked_up_is_dead_with_its_labels(fixture_root, capsys):
    """Item 1: a job that waited for a runner until GitHub failed it is not a run."""
    case = load_case("no_runner")
    job = _job(case, 80103, "per-commit/h200-1 shard 1/1")
    assert job["conclusion"] == "failure" and job["runner_id"] is None and job["steps"] == []
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 1
    lines = _lines(capsys.readouterr().out)
    dead = lines["per-commit/h200-1 shard 1/1"]
    assert dead.startswith("DEAD") and "no runner picked it up (labels: linux-h200-gpu-1)" in dead, dead
    assert "per-commit/h200-1/kernels" in dead
    assert lines["per-commit/cpu shard 1/1"].startswith("ok")
    # runner evidence: an id, a name, or a step that started
    assert liveness.has_runner({"runner_id": None, "runner_name": None, "steps": [{"status": "completed"}]})
    assert not liveness.has_runner({"runner_id": 0, "runner_name": "", "steps": [{"status": "queued"}]})


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_job_queued_past_the_limit_is_dead_before_github_expires_it(fixture_root, capsys):
    """Item 1: queued 9.7 h with null runner fields; older evidence does not hide it."""
    case = load_case("queued")
    queued = _job(case, 80104, "per-commit/h200-1 shard 1/1")
    assert queued["status"] == "queued" and queued["conclusion"] is None and queued["completed_at"] is None
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 1
    lines = _lines(capsys.readouterr().out)
    assert lines["per-commit/h200-1 shard 1/1"].startswith("DEAD")
    assert "queued 9.7 h ago, no runner picked it up (labels: linux-h200-gpu-1); longer than 6 h" in \
        lines["per-commit/h200-1 shard 1/1"]
    assert lines["per-commit/cpu shard 1/1"].startswith("ok"), "an in-progress job leaves older evidence standing"
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh, "--max-queued-hours", "12") == 0
    # a job of the same name that ran after the stuck one was queued: a runner exists, nothing to report
    later = dict(_job(case, 80099, "per-commit/h200-1 shard 1/1"), id=9950, run_id=80104,
                 created_at="2026-12-01T00:00:00Z", completed_at="2026-12-01T00:30:00Z")
    case["jobs"]["80104"].append(later)
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 0


def _unreadable_cases():
    def not_json(gh):
        gh.script("/actions/workflows/", mode="not_json")

    def reset(gh):
        for _ in range(2):
            gh.script("/actions/workflows/per-commit.yml/runs", mode="reset")

    def slow(gh):
        for _ in range(2):
            gh.script("/actions/workflows/per-commit.yml/runs", mode="slow", delay=0.6)

    def server_error(gh):
        for _ in range(2):
            gh.script("/actions/runs/80101/jobs", status=502, body={"message": "Server Error"})

    def not_found(gh):
        gh.script("/actions/workflows/per-commit.yml/runs", status=404, body={"message": "Not Found"})

    def forbidden(gh):
        gh.script("/actions/workflows/", status=403, body={"message": "Resource not accessible by integration"})

    def bad_shape(gh):
        gh.script("/actions/workflows/", status=200, body={"workflow_runs": "none"})

    return [(not_json, "the response is not JSON"), (reset, "2 attempts"), (slow, "timed out"),
            (server_error, "HTTP 502"), (not_found, "needs `actions: read`"), (forbidden, "needs `actions: read`"),
            (bad_shape, "'workflow_runs' is a string 'none', expected a list")]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("break_it, words", _unreadable_cases(), ids=lambda v: getattr(v, "__name__", ""))
def test_an_unreadable_history_exits_2_not_1(fixture_root, capsys, break_it, words):
    """Item 2: timeouts, resets, non-JSON bodies and HTTP errors are 'cannot read', exit 2, one clear line."""
    with FakeGitHub(load_case("alive")) as gh:
        break_it(gh)
        assert _main(fixture_root, gh, attempts=2, request_seconds=0.3) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"liveness: cannot read the run history of {REPO}: ") and words in err, err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_rate_limits_are_waited_out_with_the_injected_sleeper(fixture_root, capsys):
    """Item 2: 429 retry-after, 403 with x-ratelimit-remaining 0 until x-ratelimit-reset, a bare secondary 403."""
    clock = Clock()
    with FakeGitHub(load_case("rate_limited")) as gh:
        assert _main(fixture_root, gh, clock=clock) == 0
        assert not gh.scripted, "every scripted limit was served"
    assert clock.sleeps == [30.0, 16.0, 60.0]      # reset is 45 s after NOW; 30 s already slept; +1 s margin
    assert "5 of 5 check(s) alive" in capsys.readouterr().out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_rate_limit_longer_than_the_wait_fails_at_once_saying_when(fixture_root, capsys):
    clock = Clock()
    reset = str(int(NOW.timestamp()) + 3600)
    with FakeGitHub(load_case("alive")) as gh:
        gh.script("/runs", status=403, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset},
                  body={"message": "API rate limit exceeded"})
        assert _main(fixture_root, gh, clock=clock) == 2
    assert clock.sleeps == []
    assert "until 2026-12-01T07:41:01Z, longer than the 300 s this check waits" in capsys.readouterr().err


def _rename(case: dict, old: str, new: str) -> None:
    for jobs in case["jobs"].values():
        for job in jobs:
            if job["name"] == old:
                job["name"] = new


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_reshard_matches_shards_by_group_and_index(fixture_root, capsys):
    """Item 3: the group ran as 3 shards, the registry now makes 2: not DEAD until a run with the new names."""
    case = load_case("old_shard_count")
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 0
    lines = _lines(capsys.readouterr().out)
    assert "as shard 2/3 before the reshard to 2 shards" in lines["nightly/mi35x-8 shard 2/2"]

    # fewer old shards than new: index 2 has no old twin, the whole old partition (1/1) vouches for it
    one = load_case("old_shard_count")
    for i in (2, 3):
        for jobs in one["jobs"].values():
            jobs[:] = [j for j in jobs if j["name"] != f"nightly/mi35x-8 shard {i}/3"]
    _rename(one, "nightly/mi35x-8 shard 1/3", "nightly/mi35x-8 shard 1/1")
    with FakeGitHub(one) as gh:
        assert _main(fixture_root, gh) == 0
    assert "the group ran as 1 shards before the reshard to 2" in _lines(capsys.readouterr().out)[
        "nightly/mi35x-8 shard 2/2"]

    # once a run with the new names completed, they stand on their own: 2/2 never got a runner
    newer = load_case("old_shard_count")
    run = dict(newer["workflow_runs"][-1], id=90699, created_at="2026-11-30T20:00:00Z")
    newer["workflow_runs"].append(run)
    first = dict(_job(newer, 90602, "nightly/mi35x-8 shard 1/3"), id=9901, run_id=90699,
                 name="nightly/mi35x-8 shard 1/2", completed_at="2026-11-30T21:00:00Z")
    second = dict(first, id=9902, name="nightly/mi35x-8 shard 2/2", conclusion="failure", runner_id=None,
                  runner_name=None, steps=[])
    newer["jobs"]["90699"] = [first, second]
    with FakeGitHub(newer) as gh:
        assert _main(fixture_root, gh) == 1
    lines = _lines(capsys.readouterr().out)
    assert lines["nightly/mi35x-8 shard 1/2"].startswith("ok") and lines["nightly/mi35x-8 shard 2/2"].startswith("DEAD")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_window_is_full_utc_timestamps(fixture_root, capsys):
    """Item 4: three days are three days to the minute, not 'since that date'."""
    case = load_case("alive")
    done = liveness.parse_time(_job(case, 90102, "nightly/h200-1 shard 1/1")["completed_at"])
    assert liveness.parse_time("2026-11-30T04:39:11+02:00") == dt.datetime(2026, 11, 30, 2, 39, 11, tzinfo=UTC)
    for minutes, expect in ((-1, "ok"), (1, "DEAD")):
        now = done + dt.timedelta(days=3, minutes=minutes)
        with FakeGitHub(case) as gh:
            liveness.main(["--root", str(fixture_root), "--repo", REPO, "--now", liveness.iso(now)], fetch=_api(gh))
        created = [urllib.parse.parse_qs(urllib.parse.urlsplit(p).query)["created"][0] for p in gh.requests
                   if "/nightly.yml/runs" in p or "/1001/runs" in p]
        assert created[0] == ">=" + liveness.iso(now - dt.timedelta(days=3) - liveness.RUN_SLACK)
        assert _lines(capsys.readouterr().out)["nightly/h200-1 shard 1/1"].startswith(expect), minutes


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_per_commit_job_cancelled_after_it_started_is_a_failed_run(fixture_root, capsys):
    """Item 5: a shard that hangs to timeout-minutes is cancelled; that is a run that failed, not absence."""
    case = load_case("alive")
    _job(case, 80101, "per-commit/h200-1 shard 1/1")["conclusion"] = "cancelled"
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 0
    assert "counted as a failed run" in _lines(capsys.readouterr().out)["per-commit/h200-1 shard 1/1"]
    job = _job(case, 80101, "per-commit/h200-1 shard 1/1")
    job.update(runner_id=None, runner_name=None, steps=[])          # cancelled while queued: never ran
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 1
    assert "no runner picked it up" in _lines(capsys.readouterr().out)["per-commit/h200-1 shard 1/1"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_self_check_keeps_liveness_itself_alive(capsys):
    """Item 6: nightly.yml and liveness.yml active, and liveness.yml completed a run in the last days."""
    with FakeGitHub(load_case("alive")) as gh:
        assert liveness.main(["--self-check", "--repo", REPO, "--now", NOW_ARG], fetch=_api(gh)) == 0
    assert _jobs_requested(gh) == [], "the self-check reads no jobs"
    runs = next(p for p in gh.requests if "/liveness.yml/runs" in p)
    assert "status=completed" in runs
    out = capsys.readouterr().out
    assert "ok    liveness.yml ran" in out and "(failure)" in out    # a run that found dead jobs still ran
    with FakeGitHub(load_case("self_disabled")) as gh:
        assert liveness.main(["--self-check", "--repo", REPO, "--now", NOW_ARG], fetch=_api(gh)) == 1
    out = capsys.readouterr().out
    assert "DEAD  liveness.yml schedule" in out and "disabled_inactivity" in out
    assert "DEAD  liveness.yml ran" in out
    assert "no completed run of liveness.yml on main since 2026-11-28T06:41:00Z" in out
    with FakeGitHub(load_case("alive")) as gh:         # a week later the same history is stale
        assert liveness.main(["--self-check", "--repo", REPO, "--now", "2026-12-08T06:41:00Z"], fetch=_api(gh)) == 1


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_per_commit_lint_job_runs_the_self_check():
    """Item 6: generated by ci/github/generate.py, with the permission it needs; nox accepts the flag."""
    doc = yaml.safe_load(generate(load_registry(REAL_ROOT))[f"{WORKFLOW_DIR}/per-commit.yml"])
    lint = doc["jobs"]["lint"]
    assert lint["permissions"] == {"contents": "read", "actions": "read"}
    step = next(s for s in lint["steps"] if "--self-check" in s.get("run", ""))
    assert step["run"] == "python3 -m nox -s liveness -- --self-check"
    assert step["env"] == {"GITHUB_TOKEN": "${{ github.token }}"} and "fork" in step["if"]
    committed = (REAL_ROOT / WORKFLOW_DIR / "per-commit.yml").read_text()
    assert "python3 -m nox -s liveness -- --self-check" in committed
    assert '"--self-check": False' in (REAL_ROOT / "noxfile.py").read_text()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_walk_stops_once_every_shard_is_found(fixture_root):
    """Item 7: runs newest first; jobs of older runs are never fetched once every name has its evidence."""
    case = load_case("alive")
    template = next(r for r in case["workflow_runs"] if r["id"] == 80101)
    for k in range(1, 6):              # five older push runs on main
        old = dict(template, id=80000 + k, created_at=f"2026-11-2{k}T10:00:00Z")
        case["workflow_runs"].append(old)
        case["jobs"][str(old["id"])] = [dict(j, run_id=old["id"]) for j in case["jobs"]["80101"]]
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 0
    assert _jobs_requested(gh) == ["80101", "90102"], gh.requests


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_fake_api_honours_the_query_it_is_sent():
    """Item 8: filters, paging with absolute /repositories/ links, filter=latest/all, unknown parameters refused."""
    path = f"/repos/{REPO}/actions/workflows/per-commit.yml/runs"
    with FakeGitHub(load_case("alive")) as gh:
        api = _api(gh)
        ids = [r["id"] for r in liveness.iter_pages(api, f"{path}?per_page=1", "workflow_runs")]
        assert ids == [80102, 80101]                               # newest first, one a page
        data, nxt = api(f"{path}?per_page=1")
        assert nxt.startswith(gh.base + "/repositories/731001/actions/workflows/1002/runs?") and "page=2" in nxt
        assert [r["id"] for r in api(f"{path}?event=push")[0]["workflow_runs"]] == [80101]
        assert api(f"{path}?branch=feature")[0]["total_count"] == 1
        assert api(f"{path}?status=completed")[0]["total_count"] == 2
        assert api(f"{path}?status=in_progress")[0]["total_count"] == 0
        assert api(f"{path}?created=%3E%3D2026-11-28T14:02:12Z")[0]["total_count"] == 1
        assert api(f"{path}?created=%3E%3D2026-11-28")[0]["total_count"] == 2
        with pytest.raises(ApiError, match="HTTP 422"):
            api(f"{path}?exclude=1")
    assert created_matches("2026-11-28T14:00:00Z", "2026-11-28")
    assert not created_matches("2026-11-29T00:00:00Z", "<2026-11-29")
    with FakeGitHub(load_case("rerun")) as gh:
        api = _api(gh)
        jobs = f"/repos/{REPO}/actions/runs/90201/jobs"
        latest = api(jobs)[0]["jobs"]
        every = api(f"{jobs}?filter=all")[0]["jobs"]
        assert len(every) == 5 and len(latest) == 3 and {j["run_attempt"] for j in every} == {1, 2}
    with FakeGitHub(load_case("alive")) as gh, pytest.raises(ApiError, match="refusing to send the token"):
        _api(gh)("https://elsewhere.example/repos/x/y/actions/runs")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_fixtures_are_what_their_builder_writes():
    """Item 8: every case file is the builder's output (edit the builder, then run it), one file per case."""
    path = REAL_ROOT / "registered" / "fixtures" / "liveness" / "build_fixtures.py"
    spec = importlib.util.spec_from_file_location("liveness_fixture_builder", path)
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    built = builder.cases()
    assert {p.stem for p in path.parent.glob("*.json")} == set(built)
    for name, data in built.items():
        assert load_case(name) == data, f"{name}.json is stale: python {path.relative_to(REAL_ROOT)}"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("name, code, checks", [
    ("rerun", 0, {"nightly/mi35x-8 shard 2/2": "ok", "nightly/h200-1 shard 1/1": "ok"}),
    ("many_jobs", 0, {"per-commit/cpu shard 1/1": "ok", "per-commit/h200-1 shard 1/1": "ok"}),
    ("empty", 1, {"per-commit/cpu shard 1/1": "DEAD", "nightly/h200-1 shard 1/1": "DEAD"}),
    ("startup_failure", 1, {"nightly/mi35x-8 shard 1/2": "DEAD|startup_failure with no jobs"}),
    ("conclusions", 1, {"per-commit/h200-1 shard 1/1": "DEAD|action_required",
                        "nightly/mi35x-8 shard 2/2": "DEAD|neutral", "per-commit/cpu shard 1/1": "ok"}),
    ("dispatch_skip", 0, {"nightly/mi35x-8 shard 1/2": "ok", "nightly/h200-1 shard 1/1": "ok"}),
])
def test_each_fixture_case(fixture_root, capsys, name, code, checks):
    """Item 8: one fixture per case, each in the API's shape, each with its exit code."""
    case = load_case(name)
    if name != "empty":
        names = {j["workflow_name"] for js in case["jobs"].values() for j in js}
        assert names <= {"per-commit", "nightly", "liveness"} and names
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == code
    lines = _lines(capsys.readouterr().out)
    for shard, expect in checks.items():
        verdict, _, words = expect.partition("|")
        assert lines[shard].startswith(verdict) and words in lines[shard], lines[shard]
    if name == "many_jobs":
        assert any(p.startswith("/repositories/731001/actions/runs/80201/jobs?") and "page=2" in p for p in gh.requests)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_dispatch_that_skipped_the_group_is_named(fixture_root, capsys):
    case = load_case("dispatch_skip")
    case["workflow_runs"] = [r for r in case["workflow_runs"] if r["id"] != 90101]    # only the dispatch is left
    with FakeGitHub(case) as gh:
        assert _main(fixture_root, gh) == 1
    dead = _lines(capsys.readouterr().out)["nightly/mi35x-8 shard 1/2"]
    assert dead.startswith("DEAD") and "skipped the group (a dispatch for another group)" in dead


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_github_api_url_and_repository_come_from_the_environment(fixture_root, capsys):
    """Item 9: GITHUB_API_URL (an Enterprise Server root with a path) and GITHUB_REPOSITORY, as Actions sets them."""
    with FakeGitHub(load_case("alive"), prefix="/api/v3") as gh:
        env = {"GITHUB_TOKEN": "t", "GITHUB_API_URL": gh.base + "/", "GITHUB_REPOSITORY": REPO}
        assert liveness.main(["--root", str(fixture_root), "--now", NOW_ARG], env=env) == 0
        assert gh.requests and all(p.startswith(("/api/v3/repos/", "/api/v3/repositories/")) for p in gh.requests)
        proc = subprocess.run([sys.executable, "-m", "ci.tools.liveness", "--root", str(fixture_root),
                               "--now", NOW_ARG],
                              cwd=REAL_ROOT, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0 and "5 of 5 check(s) alive" in proc.stdout, proc.stderr
    capsys.readouterr()
    for bad in ("ghe.example.com/api/v3", "ftp://ghe.example.com"):
        assert liveness.main(["--root", str(fixture_root)], env={**env, "GITHUB_API_URL": bad}) == 2
        assert "GITHUB_API_URL must be the REST API root" in capsys.readouterr().err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_missing_token_or_repo_is_a_clear_exit_2(fixture_root):
    env = {"PATH": "/usr/bin:/bin", "GITHUB_REPOSITORY": REPO}
    proc = subprocess.run([sys.executable, "-m", "ci.tools.liveness", "--root", str(fixture_root)], cwd=REAL_ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "GITHUB_TOKEN is not set" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ci.tools.liveness", "--root", str(fixture_root)], cwd=REAL_ROOT,
                          env={"PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "x"}, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--repo must be OWNER/NAME" in proc.stderr
    assert liveness.next_link('<https://x?page=1>; rel="prev"') is None and liveness.next_link(None) is None


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_exit_codes_and_environment_are_documented():
    doc = liveness.__doc__
    assert "Exit codes: 0 every job alive; 1 some job DEAD; 2 the history cannot be read" in doc
    assert all(v in doc for v in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_API_URL", "--self-check"))
    ci_doc = (REAL_ROOT / "docs" / "ci.md").read_text()
    section = ci_doc[ci_doc.index("**Liveness.**"):ci_doc.index("## Commands")]
    words = ("exits 0 when every job is alive", "1 when", "2 when", "GITHUB_API_URL", "GITHUB_REPOSITORY",
             "--self-check", "no runner")
    assert all(w in section for w in words), [w for w in words if w not in section]
