"""The GitHub client against hostile answers, over real loopback HTTP (docs/http-client.md).

Each case is a crafted answer from registered/fake_github.py on 127.0.0.1 (a second server on
another port plays "another origin"): a cross-origin redirect, a ``Link: next`` to itself or
without end, a slow drip, an oversized body, fields of the wrong type, a string run id, 429/503
then success, a 4xx, plain http to a host that is not loopback. Every case ends in one line on
stderr and a documented exit code (ci/tools/liveness.py); the last test runs them all through the CLI
as subprocesses and bounds their time and memory. Never the network.
"""
from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

from ci.tools import liveness
from ci.github.api import ApiError, Clocks, DeadlineExceeded, GitHubApi, Limits, field, path_id
from ci.github.http_client import OriginClient, is_loopback, origin_of
from ci.registration import register
from registered.skips import registered_skip
from registered.connect_proxy import ConnectProxy
from registered.fake_github import FakeGitHub, load_case
from registered.fixture_repo import REAL_ROOT, FixtureRepo

REPO = "dspark/dspark-suite"
NOW_ARG = "2026-12-01T06:41:00Z"
RUNS = "/actions/workflows/per-commit.yml/runs"
JOBS = "/actions/runs/80101/jobs"
TOKEN = "Bearer test-token"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """One per-commit cpu job: the walk reads the per-commit runs and the jobs of run 80101."""
    repo = FixtureRepo(tmp_path_factory.mktemp("http"))
    repo.test_file("test_h.py", """
        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
        def test_cpu(): pass
    """)
    return repo.root


class Clock:
    """Injected wall clock, monotonic clock and sleeper: sleeping advances both, nothing waits."""

    def __init__(self):
        self.now, self.sleeps = dt.datetime(2026, 12, 1, 6, 41, tzinfo=dt.timezone.utc).timestamp(), []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _api(gh: FakeGitHub, clock: Clock | None = None, fake_monotonic: bool = False, **limits) -> GitHubApi:
    """The client with small limits and a fake sleeper (``fake_monotonic``: the run's deadline
    counts the fake sleeps too)."""
    clock = clock or Clock()
    limits.setdefault("max_pages", 5)
    clocks = Clocks(sleep=clock.sleep, wall=clock, **({"monotonic": clock} if fake_monotonic else {}))
    return GitHubApi("test-token", gh.base, Limits(**limits), clocks)


def _main(root, gh: FakeGitHub, *extra: str, clock: Clock | None = None, **kw) -> int:
    return liveness.main(["--root", str(root), "--repo", REPO, "--now", NOW_ARG, *extra], fetch=_api(gh, clock, **kw))


def _one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _hits(gh: FakeGitHub, part: str) -> int:
    return sum(part in p for p in gh.requests)


class RawServer:
    """A loopback server that answers every request with the same bytes, written as given (a
    header http.server would not send, a body shorter than its Content-Length), then closes."""

    def __init__(self, answer: bytes):
        self.answer, self.requests = answer, []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread, self._stop = threading.Thread(target=self._serve, daemon=True), threading.Event()

    def _serve(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(None)
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    data = conn.recv(65536)
                    if not data:
                        break
                    head += data
                self.requests.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                try:
                    conn.sendall(self.answer)
                except OSError:
                    pass

    def __enter__(self) -> "RawServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


def _raw_main(root, server: RawServer, **limits) -> int:
    api = GitHubApi("test-token", server.base, Limits(**limits), Clocks(sleep=Clock().sleep, wall=Clock()))
    return liveness.main(["--root", str(root), "--repo", REPO, "--now", NOW_ARG], fetch=api)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_redirect_to_another_origin_is_refused_and_never_gets_the_token(root, capsys):
    with FakeGitHub(load_case("alive")) as gh, FakeGitHub(load_case("alive")) as other:
        gh.script(RUNS, status=302, headers={"Location": other.base + f"/repos/{REPO}{RUNS}"})
        assert _main(root, gh) == 2
        err = _one_line(capsys.readouterr().err)
        assert f"refusing to send the token to {other.origin}" in err and "redirect (HTTP 302)" in err, err
        for status in (301, 303, 307, 308):             # any redirect; another host name, another scheme
            for where in (f"http://localhost:{other.origin.rsplit(':', 1)[1]}/x", "https://127.0.0.1/x",
                          other.origin + "/y"):
                gh.script("/anything", status=status, headers={"Location": where})
                with pytest.raises(ApiError, match="refusing to send the token"):
                    _api(gh)("/anything")
        assert other.requests == [] and other.tokens == []
        # a redirect inside the origin (a renamed repository) is followed, with the token
        gh.script(RUNS, status=301, headers={"Location": f"/repositories/731001{RUNS}?per_page=1"})
        data, _ = _api(gh)(f"/repos/{REPO}{RUNS}")
        assert [r["id"] for r in data["workflow_runs"]] == [80102]
        assert gh.requests[-1].startswith("/repositories/731001/") and gh.tokens[-1] == TOKEN
        gh.script("/loop", status=302, headers={"Location": "/loop"})
        with pytest.raises(ApiError, match="loops back"):
            _api(gh)("/loop")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_next_link_to_itself_or_without_end_stops_after_a_bounded_number_of_pages(root, capsys):
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(RUNS, mode="self_link", repeat=True, body={"total_count": 1, "workflow_runs": []})
        assert _main(root, gh) == 2
        assert "points to a page already read" in _one_line(capsys.readouterr().err)
        assert _hits(gh, RUNS) == 1
    with FakeGitHub(load_case("alive")) as gh:                  # the same on a run's jobs pages
        gh.script(JOBS, mode="self_link", repeat=True, body={"total_count": 1, "jobs": []})
        assert _main(root, gh) == 2
        assert "points to a page already read" in _one_line(capsys.readouterr().err)
        assert _hits(gh, JOBS) == 1
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(RUNS, mode="endless", repeat=True, body={"total_count": 1, "workflow_runs": []})
        assert _main(root, gh, max_pages=7) == 2
        assert "more than 7 pages" in _one_line(capsys.readouterr().err)
        assert _hits(gh, RUNS) == 7
        with pytest.raises(ApiError, match="refusing to send the token to https://api.github.com:443"):
            list(_api(gh).pages("https://api.github.com/repos/x/y/actions/runs", "workflow_runs"))
    for bad in ("/r\u00fcns?page=2", "/runs?page=2 3", "/runs\x7f"):        # same origin, but not sendable
        with FakeGitHub(load_case("alive")) as gh:
            gh.script(RUNS, status=200, body={"total_count": 1, "workflow_runs": []},
                      headers={"Link": f'<{gh.origin}{bad}>; rel="next"'})
            assert _main(root, gh) == 2
            assert "cannot be sent" in _one_line(capsys.readouterr().err), bad


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_slow_drip_is_cut_off_by_the_request_deadline(root, capsys, where):
    """One byte every 0.25 s: a 1 s socket timeout never fires; the wall-clock deadline does."""
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(RUNS, mode="drip", delay=0.25, where=where)
        start = time.monotonic()
        assert _main(root, gh, request_seconds=1.0) == 2
        took = time.monotonic() - start
    assert "timed out: no complete answer within 1 s" in _one_line(capsys.readouterr().err)
    assert took < 3.0, took
    assert _hits(gh, RUNS) == 1, "a request past its deadline is not retried"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_an_oversized_body_stops_at_the_cap(root, capsys):
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(RUNS, mode="big", size=5_000_000)
        assert _main(root, gh, max_body=100_000) == 2
        assert "over the 100000-byte cap" in _one_line(capsys.readouterr().err)
        gh.script(RUNS, mode="big", size=5_000_000, content_length=True)
        assert _main(root, gh, max_body=100_000) == 2
        assert "the answer is 5000000 bytes, over the 100000-byte cap" in _one_line(capsys.readouterr().err)
        client = OriginClient(gh.base, max_body=1000)
        gh.script("/exact", status=200, body="x" * 998)           # 1000 bytes with its quotes: at the cap
        assert len(client.get(gh.base + "/exact", {}, 5.0).body) == 1000


def _wrong_shapes():
    def job(key, value):
        return lambda case: case["jobs"]["80101"][0].__setitem__(key, value)

    def run(key, value):
        return lambda case: next(r for r in case["workflow_runs"] if r["id"] == 80101).__setitem__(key, value)

    def drop(key):
        return lambda case: next(r for r in case["workflow_runs"] if r["id"] == 80101).pop(key)

    return [
        ("job name a list", job("name", ["per-commit/cpu shard 1/1"]), "'name' is a list"),
        ("job status a number", job("status", 3), "'status' is an integer 3, expected a string"),
        ("job steps an object", job("steps", {"status": "completed"}), "'steps' is an object"),
        ("job step status a list", job("steps", [{"status": []}]), "step 0: 'status' is a list"),
        ("job labels of numbers", job("labels", [7]), "label 0 is int"),
        ("job runner_id a bool", job("runner_id", True), "'runner_id' is a boolean True"),
        ("job completed_at not a time", job("completed_at", "soon"), "not an ISO 8601 timestamp: 'soon'"),
        ("run id a string", run("id", "80101/../../../x"), "'id' is a string '80101/../../../x'"),
        ("run id a bool", run("id", True), "'id' is a boolean True, expected an integer"),
        ("run id a float", run("id", 80101.0), "'id' is a number 80101.0"),
        ("run id missing", drop("id"), "no 'id' field (expected an integer)"),
        ("run conclusion an object", run("conclusion", {"a": 1}), "'conclusion' is an object"),
    ]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("name, break_it, words", _wrong_shapes(), ids=[c[0] for c in _wrong_shapes()])
def test_a_field_of_the_wrong_type_is_unreadable_exit_2(root, capsys, name, break_it, words):
    case = load_case("alive")
    break_it(case)
    with FakeGitHub(case) as gh:
        assert _main(root, gh) == 2
    err = _one_line(capsys.readouterr().err)
    assert err.startswith(f"liveness: cannot read the run history of {REPO}: ") and words in err, err
    if name.startswith("run id"):
        assert not any("/jobs" in p for p in gh.requests), "no id that is not an int goes into a path"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_typed_accessors_refuse_every_other_shape():
    assert field({"a": 1}, "a", int, where="w") == 1 and field({}, "a", int, where="w", required=False) is None
    for obj, message in (([], "w: expected an object, got a list"), ({"a": True}, "'a' is a boolean True"),
                         ({"a": "1"}, "'a' is a string '1', expected an integer"), ({}, "no 'a' field")):
        with pytest.raises(ApiError, match=message):
            field(obj, "a", int, where="w")
    assert path_id(0, "id") == 0
    for bad in (True, "7", -1, 7.0, None):
        with pytest.raises(ApiError, match="expected a non-negative integer id"):
            path_id(bad, "id")
    with pytest.raises(ApiError, match="a run id of o/n: expected a non-negative integer id, got a string '1/x'"):
        liveness.jobs_url("o/n", "1/x")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_429_and_5xx_are_retried_with_backoff_bounded_by_the_run_deadline(root, capsys):
    clock = Clock()
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(JOBS, status=503, body={"message": "Service Unavailable"})
        gh.script(JOBS, status=429, headers={"retry-after": "7"}, body={"message": "slow down"})
        assert _main(root, gh, clock=clock) == 0
        assert _hits(gh, JOBS) == 3 and clock.sleeps == [1.0, 7.0]
    capsys.readouterr()
    clock = Clock()          # a retry-after that would pass what is left of the run fails at once
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(JOBS, status=429, headers={"retry-after": "100"}, body={})
        assert _main(root, gh, clock=clock, run_seconds=60, fake_monotonic=True) == 2
    assert "a retry in 100 s would pass the run's 60-second deadline" in _one_line(capsys.readouterr().err)
    assert clock.sleeps == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_4xx_is_not_retried_and_its_message_stays_on_one_line(root, capsys):
    for status, words in ((404, "needs `actions: read`"), (422, "HTTP 422: bad ::warning::x")):
        with FakeGitHub(load_case("alive")) as gh:
            gh.script(RUNS, status=status, body={"message": "bad \n ::warning::x"})
            assert _main(root, gh) == 2
        err = _one_line(capsys.readouterr().err)
        assert _hits(gh, RUNS) == 1 and "\n::" not in err, err
        assert words in err, err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_plain_http_to_a_host_that_is_not_loopback_is_refused_before_connecting(root, capsys, monkeypatch):
    calls = []

    def no_network(*args, **kw):
        calls.append(args)
        raise OSError("the test forbids the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    env = {"GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": REPO}
    for url in ("http://ghe.example.com/api/v3", "http://127.0.0.1.example.com", "http://10.0.0.1",
                "http://[::2]:8080", "https://user:hunter2@ghe.example.com/api/v3"):
        assert liveness.main(["--root", str(root), "--now", NOW_ARG], env={**env, "GITHUB_API_URL": url}) == 2
        err = _one_line(capsys.readouterr().err)
        assert "GITHUB_API_URL must be the REST API root" in err and ("https is required" in err or "user:" in err)
        assert "hunter2" not in err and "user:h" not in err, err   # a refusal never prints the credential
    assert calls == []
    bad_token = {**env, "GITHUB_TOKEN": "ghs_x\nInjected: 1"}       # would add a header of its own
    assert liveness.main(["--root", str(root), "--now", NOW_ARG], env=bad_token) == 2
    err = _one_line(capsys.readouterr().err)
    assert "GITHUB_TOKEN has characters a token never has" in err and "ghs_x" not in err
    assert all(is_loopback(h) for h in ("localhost", "LOCALHOST", "127.0.0.1", "127.9.9.9", "::1"))
    assert not any(is_loopback(h) for h in ("localhost.example.com", "10.0.0.1", "::2", "0.0.0.0"))
    assert str(origin_of("http://[::1]:8080/api")) == "http://[::1]:8080"
    assert origin_of("https://API.github.com/x") == origin_of("https://api.github.com:443/y")


# ---------------------------------------------------------------- the CLI, end to end

def _cli_cases(other: FakeGitHub):
    """(name, args, case edit, scripts, exit code, words): each run as ``python -m ci.tools.liveness``."""
    def name_list(case):
        case["jobs"]["80101"][0]["name"] = ["x"]

    def string_id(case):
        next(r for r in case["workflow_runs"] if r["id"] == 80101)["id"] = "80101/../x"

    page = {"total_count": 1, "workflow_runs": []}
    return [
        ("cross-origin 302", [], None, [(RUNS, {"status": 302, "headers": {"Location": other.base + "/x"}})],
         2, "refusing to send the token"),
        ("self-pointing next", [], None, [(RUNS, {"mode": "self_link", "repeat": True, "body": page})],
         2, "page already read"),
        ("endless next", [], None, [(RUNS, {"mode": "endless", "repeat": True, "body": page})],
         2, "more than 100 pages"),
        ("slow drip, --deadline 2", ["--deadline", "2"], None, [(RUNS, {"mode": "drip", "delay": 0.5})],
         2, "timed out"),
        ("500 MB body", [], None, [(RUNS, {"mode": "big", "size": 500 << 20})], 2, "byte cap"),
        ("job name a list", [], name_list, [], 2, "'name' is a list"),
        ("string run id", [], string_id, [], 2, "'id' is a string"),
        ("503 then 429 then ok", [], None, [(JOBS, {"status": 503}), (JOBS, {"status": 429, "headers": {
            "retry-after": "0"}})], 0, ""),
        ("404", [], None, [(RUNS, {"status": 404, "body": {"message": "Not Found"}})], 2, "needs `actions: read`"),
        ("http to a remote host", ["@http://ghe.example.com/api/v3"], None, [], 2, "https is required"),
        ("--now 0001-01-01", ["--now", "0001-01-01T00:00:00Z"], None, [], 2, "--now/--today: expected a timestamp"),
        ("--max-queued-hours nan", ["--max-queued-hours", "nan"], None, [], 2, "--max-queued-hours: expected"),
    ]


# The child's own peak memory: a process spawned from pytest inherits pytest's high-water mark
# (vfork + exec), so a small wrapper spawns it and reports RUSAGE_CHILDREN as its last line.
MEASURE = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
           "use = resource.getrusage(resource.RUSAGE_CHILDREN); "
           "print(use.ru_maxrss, use.ru_utime + use.ru_stime, file=sys.stderr); sys.exit(code)")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_every_hostile_case_ends_in_one_line_and_a_documented_code_within_bounds(root):
    """Each case as a subprocess: exit code, one stderr line, < 30 s, < 300 MB, token only at the origin.
    Per-case numbers: ``pytest registered/test_ci_http_client.py -k every_hostile -rP``."""
    servers, procs, rows = [], [], []
    with FakeGitHub(load_case("alive")) as other:
        try:
            for name, args, edit, scripts, code, words in _cli_cases(other):
                case = load_case("alive")
                if edit:
                    edit(case)
                gh = FakeGitHub(case).__enter__()
                servers.append(gh)
                for path, response in scripts:
                    gh.script(path, **response)
                api = gh.base
                if args[:1] and args[0].startswith("@"):
                    api, args = args[0][1:], args[1:]
                env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REAL_ROOT),
                       "GITHUB_TOKEN": "test-token", "GITHUB_API_URL": api}
                cmd = [sys.executable, "-c", MEASURE, sys.executable, "-m", "ci.tools.liveness", "--root", str(root),
                       "--repo", REPO, "--now", NOW_ARG, *args]
                proc = subprocess.Popen(cmd, cwd=REAL_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
                procs.append((name, code, words, proc, time.monotonic()))
            for name, code, words, proc, start in procs:
                try:
                    _, err = proc.communicate(timeout=max(0.1, start + 30 - time.monotonic()))
                except subprocess.TimeoutExpired:
                    pytest.fail(f"{name}: still running after 30 s")
                took = time.monotonic() - start
                err, _, usage = err.rstrip("\n").rpartition("\n")
                err, rss_mb, cpu = err + "\n" if err else "", int(usage.split()[0]) / 1024, float(usage.split()[1])
                rows.append(f"{name:<24} exit {proc.returncode}  wall {took:5.2f} s  cpu {cpu:4.2f} s  "
                            f"peak {rss_mb:5.1f} MB  {err.strip()[:100]}")
                assert proc.returncode == code, (name, err)
                if code:
                    assert words in _one_line(err), (name, err)
                assert took < 30 and rss_mb < 300, (name, took, rss_mb)
            print("\n".join(rows))
            assert other.requests == [] and other.tokens == []
            assert all(t == TOKEN for gh in servers for t in gh.tokens)
        finally:
            for _, _, _, proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
            for gh in servers:
                gh.__exit__(None, None, None)


USAGE = [
    (["--now", "0001-01-01T00:00:00Z"], "--now/--today: expected a timestamp from 2000-01-01T00:00:00Z on"),
    (["--now", "9999-12-31T23:00:00-05:00"], "--now/--today: expected an ISO 8601 UTC timestamp"),
    (["--max-queued-hours", "nan"], "--max-queued-hours: expected a number of hours > 0 and <= 8760, got 'nan'"),
    (["--max-queued-hours", "inf"], "--max-queued-hours: expected a number of hours"),
    (["--max-queued-hours=-1"], "--max-queued-hours: expected a number of hours"),
    (["--max-queued-hours", "0"], "--max-queued-hours: expected a number of hours"),
    (["--days", "0"], "--days: expected a whole number of days from 1 to 3650"),
    (["--days", "99999999999"], "--days: expected a whole number of days"),
    (["--deadline", "nan"], "--deadline: expected seconds > 0"),
    (["--repo", "../.."], "--repo must be OWNER/NAME"),
    (["--bogus"], "unrecognized arguments: --bogus"),
]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("argv, words", USAGE, ids=[" ".join(argv) for argv, _ in USAGE])
def test_usage_errors_are_one_line_and_exit_2(root, capsys, argv, words):
    env = {"GITHUB_REPOSITORY": REPO}
    assert liveness.main(["--root", str(root), *argv], env=env) == 2
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("python -m ci.tools.liveness: error: ") and words in err, err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_an_internal_error_is_exit_3_with_one_line_and_the_traceback_only_under_debug(root, capsys, monkeypatch):
    def broken(*args, **kw):
        raise ZeroDivisionError("a bug in the check")

    monkeypatch.setattr(liveness, "check_liveness", broken)
    with FakeGitHub(load_case("alive")) as gh:
        assert _main(root, gh) == 3
        err = _one_line(capsys.readouterr().err)
        assert err == "liveness: internal error: ZeroDivisionError: a bug in the check " \
                      "(run with --debug for the traceback)\n", err
        assert _main(root, gh, "--debug") == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in broken" in err
    assert err.endswith("liveness: internal error: ZeroDivisionError: a bug in the check\n")
    assert "  3  internal error" in liveness._parser().format_help()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_text_from_an_answer_cannot_start_a_line_of_the_log(root, capsys):
    """A label with a newline would print a line of its own, which the runner reads as a workflow command."""
    case = load_case("alive")
    job = next(j for j in case["jobs"]["80101"] if j["name"] == "per-commit/cpu shard 1/1")
    job.update(conclusion="failure", runner_id=None, runner_name=None, steps=[],
               labels=["ubuntu-latest\n::add-mask::x\r::warning::y\u2028z"])
    with FakeGitHub(case) as gh:
        assert _main(root, gh) == 1
    out = capsys.readouterr().out
    assert not any(line.startswith("::") for line in out.splitlines()) and len(out.splitlines()) == 2, out
    assert "(labels: ubuntu-latest\\n::add-mask::x\\r::warning::y\\u2028z)" in out, out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_self_check_reads_typed_fields_too(capsys):
    for edit, words in ((lambda c: c["workflows"][1].__setitem__("state", ["active"]), "'state' is a list"),
                        (lambda c: c["workflow_runs"].__setitem__(-1, dict(c["workflow_runs"][-1], updated_at=7)),
                         "'updated_at' is an integer 7")):
        case = load_case("alive")
        edit(case)
        with FakeGitHub(case) as gh:
            assert liveness.main(["--self-check", "--repo", REPO, "--now", NOW_ARG], fetch=_api(gh)) == 2
        assert words in _one_line(capsys.readouterr().err)


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (openssl, on every hosted runner), for an https API on loopback."""
    if not shutil.which("openssl"):
        registered_skip("needs-openssl")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def _https(gh: FakeGitHub, tls_cert) -> str:
    """Serve ``gh`` over TLS with the test certificate; its https base URL."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, tls_cert))
    gh._server.socket = context.wrap_socket(gh._server.socket, server_side=True)   # noqa: SLF001 - test wiring
    return gh.base.replace("http://", "https://", 1)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_named_proxy_is_a_connect_tunnel_that_learns_the_origin_and_nothing_else(root, capsys, monkeypatch,
                                                                                  tls_cert):
    """--proxy: the run goes over https (a loopback API with a test certificate the client is told
    to trust) through a real CONNECT proxy on loopback; the proxy's only view is ``CONNECT
    host:port`` (no token, no path, no header of the request), the API gets the token; a proxy
    that refuses the tunnel is exit 2 in one line, at once (a configuration, not retried); one that
    never answers is cut by the request deadline; HTTPS_PROXY alone is never used."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_cert[0]))
    env = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": REPO}
    argv = ["--root", str(root), "--now", NOW_ARG]
    with FakeGitHub(load_case("alive")) as gh, ConnectProxy() as proxy:
        api = _https(gh, tls_cert)
        port = gh.origin.rsplit(":", 1)[1]
        assert liveness.main([*argv, "--proxy", proxy.url], env={**env, "GITHUB_API_URL": api}) == 0, \
            capsys.readouterr()
        assert proxy.heads and all(head.splitlines()[0] == f"CONNECT 127.0.0.1:{port} HTTP/1.0"
                                   for head in proxy.heads), proxy.heads
        assert not any("test-token" in head or "/repos/" in head for head in proxy.heads), proxy.heads
        assert gh.tokens and set(gh.tokens) == {TOKEN} and len(gh.requests) == len(proxy.heads)
        capsys.readouterr()
        tunnels = len(proxy.heads)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        assert liveness.main(argv, env={**env, "GITHUB_API_URL": api}) == 0
        assert len(proxy.heads) == tunnels, "a proxy variable was used without --proxy"
    capsys.readouterr()
    with FakeGitHub(load_case("alive")) as gh, ConnectProxy("refuse") as proxy:
        api = _https(gh, tls_cert)
        assert liveness.main([*argv, "--proxy", proxy.url], env={**env, "GITHUB_API_URL": api}) == 2
        err = _one_line(capsys.readouterr().err)
        assert "refused the tunnel" in err and "407" in err and gh.requests == [] and len(proxy.heads) == 1, err
    with FakeGitHub(load_case("alive")) as gh, ConnectProxy("silent") as proxy:
        api = GitHubApi("test-token", _https(gh, tls_cert), Limits(request_seconds=1.0, attempts=1),
                        proxy=proxy.url)
        start = time.monotonic()
        with pytest.raises(ApiError, match="timed out"):
            api(f"/repos/{REPO}{RUNS}")
        assert time.monotonic() - start < 5 and gh.requests == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_proxy_with_an_http_api_is_refused_before_any_connection(root, capsys):
    """Through a tunnel, an http API's request (the token in its header) reaches the proxy in the
    clear, and ``CONNECT 127.0.0.1:P`` reaches whatever listens on the proxy's own loopback: the
    loopback exemption from https does not hold there. Refused, exit 2 in one line, nothing sent."""
    env = {"GITHUB_TOKEN": "test-token", "GITHUB_REPOSITORY": REPO}
    with FakeGitHub(load_case("alive")) as gh, ConnectProxy() as proxy:
        for api in (gh.base, gh.base.replace("127.0.0.1", "localhost")):
            assert liveness.main(["--root", str(root), "--now", NOW_ARG, "--proxy", proxy.url],
                                 env={**env, "GITHUB_API_URL": api}) == 2
            err = _one_line(capsys.readouterr().err)
            assert "--proxy needs an https API URL (over http the proxy would read the token)" in err, err
        assert proxy.heads == [] and gh.requests == [] and "test-token" not in err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("value, words", [
    ("https://proxy.example:3128", "expected http://HOST[:PORT]"),
    ("http://user:secret@proxy.example:3128", "proxy credentials are not supported"),
    ("http://user:secret@[::1", "not a valid URL"),
    ("http://proxy.example:3128/path", "no path or query"),
    ("proxy.example:3128", "expected http://HOST[:PORT]"),
    ("http://proxy.example:99999", "not a valid URL"),
])
def test_a_proxy_that_is_not_a_plain_connect_proxy_url_is_exit_2_before_any_connection(root, capsys, monkeypatch,
                                                                                        value, words):
    calls = []

    def no_network(*args, **kw):
        calls.append(args)
        raise OSError("the test forbids the network")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    env = {"GITHUB_TOKEN": "t", "GITHUB_REPOSITORY": REPO}
    assert liveness.main(["--root", str(root), "--now", NOW_ARG, "--proxy", value], env=env) == 2
    err = _one_line(capsys.readouterr().err)
    assert words in err and "secret" not in err and calls == [], err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_crafted_link_header_is_read_in_linear_time_and_refused(root, capsys):
    """``Link: <<<<...`` (no ``>``) took a backtracking pattern 13 s of CPU for 65,000 characters and
    grew with the square of the length (a folded header reaches 6 MB): now one pass, a header over
    8 KiB is refused unread, and one that does not parse is unreadable, exit 2 in one line."""
    one_line_of_it = "<" * 60_000
    folded = "\r\n ".join(["<" * 6_000] * 10)                 # obsolete line folding: one 60 KB value
    for header, words in ((one_line_of_it, "over the 8192-character limit"),
                          (folded, "over the 8192-character limit"),
                          ("<" * 8_000, "the Link header cannot be read (a '<' without its '>'"),
                          ('<' + "a" * 8_000 + '> rel="next"', "expected ';' or ','")):
        with FakeGitHub(load_case("alive")) as gh:
            gh.script(RUNS, status=200, body={"total_count": 0, "workflow_runs": []}, headers={"Link": header})
            cpu = time.process_time()
            assert _main(root, gh) == 2
            cpu = time.process_time() - cpu
        err = _one_line(capsys.readouterr().err)
        assert words in err and len(err) < 400, err
        assert cpu < 0.5, (words, cpu)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_every_valid_spelling_of_rel_next_is_followed(root, capsys):
    """``rel=next``, ``rel = "next"``, ``rel="next last"``, ``REL=NEXT``, a second Link field: each
    reads on (the run is on page 2), where paging that stopped would read as no run at all (DEAD)."""
    for spelling in ('<{}>;rel=next', '<{}> ; rel = "next"', '<{}>; rel="last next"', '<{}>; REL=NEXT',
                     '<{}>; title="a, b; rel=prev"; rel="next"'):
        with FakeGitHub(load_case("alive")) as gh:
            page2 = f"{gh.base}/repos/{REPO}{RUNS}?branch=main&event=push&per_page=100"
            gh.script(RUNS, status=200, body={"total_count": 0, "workflow_runs": []},
                      headers={"Link": spelling.format(page2)})
            assert _main(root, gh) == 0, (spelling, capsys.readouterr())
            assert _hits(gh, RUNS) == 2, spelling
    capsys.readouterr()
    assert liveness.next_link('<https://a/1>; rel="prev", <https://a/2>; rel="next"') == "https://a/2"
    with pytest.raises(ApiError, match='two different rel="next" URLs'):
        liveness.next_link("<https://a/1>; rel=next, <https://a/2>; rel=next")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_run_deadline_is_checked_after_each_page_is_processed(root):
    """Work on a page (not only waiting for one) counts: a run that passes its deadline while the
    last page is processed ends with DeadlineExceeded, with no request left to notice it."""
    clock = Clock()
    with FakeGitHub(load_case("alive")) as gh:
        api = _api(gh, clock, fake_monotonic=True, run_seconds=60)
        seen = []
        with pytest.raises(DeadlineExceeded, match="60-second deadline has passed"):
            for run in api.pages(f"/repos/{REPO}{RUNS}?branch=main&per_page=100", "workflow_runs"):
                seen.append(run["id"])
                clock.now += 61                  # the caller's work on this page
        assert seen and _hits(gh, RUNS) == 1


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_header_number_is_ascii_digits_only(root, capsys):
    """``str.isdigit()`` is true for ``²`` and ``¹²`` (Latin-1, as http.client decodes headers), which
    ``float``/``int`` refuse: a crash, exit 3, before. Now a header number is 1 to 18 ASCII digits
    (``Retry-After`` may also be an HTTP date); anything else is exit 2 naming the header."""
    limited = {"retry-after": "\u00b2"}, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "\u00b9\u00b2"}
    for status, headers, words in ((429, limited[0], "the retry-after header is not a whole number "
                                    "(up to 18 ASCII digits): '\u00b2'"),
                                   (403, limited[1], "the x-ratelimit-reset header is not a whole number"),
                                   (429, {"retry-after": "9" * 5000}, "the retry-after header is not a whole"),
                                   (429, {"retry-after": "-1"}, "the retry-after header is not a whole"),
                                   (429, {"retry-after": "soon"}, "neither a number of seconds nor an HTTP date")):
        clock = Clock()
        with FakeGitHub(load_case("alive")) as gh:
            gh.script(JOBS, status=status, headers=headers, body={"message": "API rate limit exceeded"})
            assert _main(root, gh, clock=clock) == 2, headers
        err = _one_line(capsys.readouterr().err)
        assert f"/jobs?filter=all&per_page=100: HTTP {status}: " in err and words in err, err
        assert clock.sleeps == []
    clock = Clock()                                       # an HTTP date: waited until then
    with FakeGitHub(load_case("alive")) as gh:
        gh.script(JOBS, status=429, headers={"retry-after": "Tue, 01 Dec 2026 06:41:30 GMT"}, body={})
        assert _main(root, gh, clock=clock) == 0
    assert clock.sleeps == [30.0]
    capsys.readouterr()
    for length in ("\u00b2", "1_0", "+10", "9" * 5000):     # http.client's own int() takes 1_0 and +10
        answer = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n{{}}".encode("latin-1")
        with RawServer(answer) as server:
            assert _raw_main(root, server) == 2
        err = _one_line(capsys.readouterr().err)
        assert "the Content-Length header is not one whole number (up to 18 ASCII digits)" in err, err
        assert len(server.requests) == 1, "a malformed answer is not retried"
    with RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}") as server:
        assert _raw_main(root, server) == 2
    assert "the Content-Length header is not one whole number" in _one_line(capsys.readouterr().err)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_body_shorter_than_its_length_is_retried_and_a_malformed_answer_is_not(root, capsys):
    """http.client's ``read(n)`` returns what came before the connection closed: a prefix that is
    valid JSON (an empty list of runs) was read as the whole answer, so DEAD (exit 1). Now a short
    body is a failed transfer (retried, then exit 2); an answer http.client cannot parse (over 100
    header lines, a line over 64 KiB) is the server's doing: exit 2 at once, not retried."""
    body = b'{"total_count": 0, "workflow_runs": []}'
    short = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (len(body) + 50) + body
    with RawServer(short) as server:
        assert _raw_main(root, server, attempts=3) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"the connection closed after {len(body)} of the {len(body) + 50} bytes" in err and "(3 attempts)" in err
    assert len(server.requests) == 3
    many = b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 101 + b"Content-Length: 2\r\n\r\n{}"
    long_line = b"HTTP/1.1 200 OK\r\nX-A: " + b"b" * 70_000 + b"\r\nContent-Length: 2\r\n\r\n{}"
    for answer, words in ((many, "got more than 100 headers"), (long_line, "LineTooLong")):
        with RawServer(answer) as server:
            assert _raw_main(root, server) == 2
        err = _one_line(capsys.readouterr().err)
        assert "a malformed answer" in err and words in err and len(server.requests) == 1, err


def _cli(api: str, *args: str, lang: str = "C.UTF-8", root=None) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REAL_ROOT), "LANG": lang,
           "GITHUB_TOKEN": "test-token", "GITHUB_API_URL": api}
    where = ["--root", str(root)] if root else []
    return subprocess.run([sys.executable, "-m", "ci.tools.liveness", *where, "--repo", REPO, "--now", NOW_ARG,
                           *args], cwd=REAL_ROOT, env=env, capture_output=True, timeout=60)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_server_text_with_a_lone_surrogate_or_a_command_prints_escaped(root):
    """JSON may carry ``"\\ud800"``, a str no encoder writes: printing it crashed the report half-way
    (exit 3). Every unprintable character of server text is escaped, ``##[`` (read anywhere in a
    line) and a leading ``::`` are encoded, under a UTF-8 and a C locale; the verdict stands."""
    case = load_case("alive")
    job = next(j for j in case["jobs"]["80101"] if j["name"] == "per-commit/cpu shard 1/1")
    job.update(status="in_progress\ud800 ##[add-mask]x \u202egnp.exe", conclusion=None, completed_at=None)
    flows = load_case("alive")
    for flow in flows["workflows"]:
        flow["state"] = "active\udcff\ud800 ##[warning]y"
    for lang in ("C.UTF-8", "C"):
        with FakeGitHub(case) as gh:
            proc = _cli(gh.base, root=root, lang=lang)
        out = proc.stdout.decode("utf-8")        # strict: no raw surrogate bytes reached the log
        assert proc.returncode == 1 and proc.stderr == b"", (lang, proc.stderr)
        assert "in_progress\\ud800 ##%5Badd-mask]x \\u202egnp.exe since" in out and "##[" not in out, out
        assert len(out.splitlines()) == 2, out
        with FakeGitHub(flows) as gh:
            proc = _cli(gh.base, "--self-check", lang=lang)
        out = proc.stdout.decode("utf-8")
        assert proc.returncode == 1 and proc.stderr == b"", (lang, proc.stderr)
        assert "state active\\udcff\\ud800 ##%5Bwarning]y" in out and "##[" not in out, out
    assert liveness.one_line("::add-mask::x") == "%3A%3Aadd-mask::x"
    assert liveness.one_line(" \t::x\n::y") == " \\t::x\\n::y"     # escaped first: one line, never at its start


class EndlessHistory:
    """A loopback API with no end: every runs page lists 100 new runs (the runs listing runs to its
    100-page cap), every run's jobs listing has 50 pages of ``jobs`` jobs named the expected shard
    and queued (the jobs a walk must keep). Pages are built once and served as fast as asked for."""

    def __init__(self, jobs: int):
        job = {"name": "per-commit/cpu shard 1/1", "status": "queued", "conclusion": None,
               "created_at": "2026-11-30T00:00:00Z", "runner_id": None, "labels": ["self-hosted", "x" * 100]}
        self.jobs_page = json.dumps({"total_count": jobs, "jobs": [job] * jobs}).encode()
        self.pages = 0
        history = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):  # noqa: N802 - http.server's name
                history.pages += 1
                parts = urllib.parse.urlsplit(self.path)
                page = int(dict(urllib.parse.parse_qsl(parts.query)).get("page", "1"))
                if "/jobs" in parts.path:
                    body = history.jobs_page
                else:
                    runs = [{"id": page * 1000 + i, "conclusion": None, "created_at": "2026-11-30T00:00:00Z"}
                            for i in range(100)]
                    body = json.dumps({"total_count": 10**6, "workflow_runs": runs}).encode()
                nxt = f"{history.base}{parts.path}?{urllib.parse.urlencode({'per_page': 100, 'page': page + 1})}"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                if "/jobs" not in parts.path or page < 50:          # under the 100-page cap of a listing
                    self.send_header("Link", f'<{nxt}>; rel="next"')
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    def __enter__(self) -> "EndlessHistory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_memory_is_bounded_over_a_run_that_reads_pages_without_end(root):
    """The byte cap is per answer; the walk kept every job of every page until the run's deadline
    (2.3 GB after 120 s, about 17 GB by the default 900 s: an OOM kill, not exit 2). Now a walk
    keeps only the jobs the verdict reads, slimmed, and a run reads at most 50,000 runs and jobs:
    exit 2 ("too large to read") long before the deadline, with peak memory bounded."""
    with EndlessHistory(jobs=2000) as api:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REAL_ROOT),
               "GITHUB_TOKEN": "test-token", "GITHUB_API_URL": api.base}
        cmd = [sys.executable, "-c", MEASURE, sys.executable, "-m", "ci.tools.liveness", "--root", str(root),
               "--repo", REPO, "--now", NOW_ARG, "--deadline", "300"]
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=REAL_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)           # the wrapper and the check under it
            proc.communicate()
            pytest.fail(f"still reading after 60 s ({api.pages} pages served)")
        took = time.monotonic() - start
    err, _, usage = err.rstrip("\n").rpartition("\n")
    rss_mb = int(usage.split()[0]) / 1024
    print(f"exit {proc.returncode}, {took:.1f} s, peak {rss_mb:.0f} MB, {api.pages} pages: {err[:200]}")
    assert proc.returncode == 2, err
    assert "more than 50000 runs and jobs in this run; the history is too large to read" in _one_line(err + "\n")
    assert rss_mb < 150 and took < 30, (rss_mb, took)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_walk_keeps_only_the_jobs_the_verdict_reads_and_slims_them(root):
    case = load_case("alive")
    jobs = case["jobs"]["80101"]
    template = next(j for j in jobs if j["name"] == "per-commit/cpu shard 1/1")
    jobs.append(dict(template, name="lint", steps=[{"status": "completed"}] * 500))
    jobs.append(dict(template, name="per-commit/cpu shard 2/3", status="queued" + "x" * 10_000, runner_id=None,
                     runner_name=None, labels=[f"l{i}" for i in range(50)],
                     steps=[{"status": "queued"}] * 499 + [{"status": "in_progress"}]))
    jobs.append(dict(template, name="other/group shard 1/2"))
    exps = liveness.expectations(liveness.load_registry(root))
    since = dt.datetime(2026, 11, 24, 6, 41, tzinfo=dt.timezone.utc)
    with FakeGitHub(case) as gh:
        history = liveness._walk(_api(gh), REPO, exps, since)
    names = [j["name"] for j in history.jobs]
    assert "lint" not in names and "other/group shard 1/2" not in names, names
    old = next(j for j in history.jobs if j["name"] == "per-commit/cpu shard 2/3")
    assert len(old["status"]) == 103 and old["steps"] == [{"status": "in_progress"}], old
    assert old["labels"] == [f"l{i}" for i in range(10)] + ["..."] and liveness.has_runner(old)
