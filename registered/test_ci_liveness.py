"""Liveness against GitHub API responses stored under registered/fixtures/liveness/ (never the network)."""
from __future__ import annotations

import copy
import datetime as dt
import json
import subprocess
import sys
import urllib.parse

import pytest

from ci import liveness
from ci.jobs import load_registry
from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

FIXTURES = REAL_ROOT / "registered" / "fixtures" / "liveness"
REPO = "dspark/dspark-suite"
TODAY = dt.date(2026, 12, 1)


def _registry(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_l.py", """
        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
        def test_cpu(): pass

        @register(suite="kernels", hardware="h200-1", schedule="per-commit", est_time=5)
        def test_gpu(): pass

        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=500)
        def test_e2e(): pass

        @register(suite="dspark-verify", hardware="mi35x-8", schedule="nightly", est_time=500)
        def test_verify(): pass
    """)
    return repo, load_registry(repo.root)


class FakeApi:
    """Serves the stored responses by path and ?page=; records every URL asked for."""

    def __init__(self, edit=None):
        routes = json.loads((FIXTURES / "routes.json").read_text())
        self.pages = {path: [json.loads((FIXTURES / f).read_text()) for f in files]
                      for path, files in routes.items() if path.startswith("/")}
        if edit:
            edit(self.pages)
        self.urls: list[str] = []

    def __call__(self, url: str):
        self.urls.append(url)
        parsed = urllib.parse.urlsplit(url)
        page = int(urllib.parse.parse_qs(parsed.query).get("page", ["1"])[0])
        pages = self.pages[parsed.path]
        query = dict(urllib.parse.parse_qsl(parsed.query), page=str(page + 1))
        nxt = f"{parsed.path}?{urllib.parse.urlencode(query)}" if page < len(pages) else None
        return copy.deepcopy(pages[page - 1]), nxt


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_dead_jobs_are_named_with_their_registry_jobs(tmp_path, capsys):
    repo, registry = _registry(tmp_path)
    assert [e.name for e in liveness.expectations(registry)] == [
        "per-commit/cpu shard 1/1", "per-commit/h200-1 shard 1/1",
        "nightly/mi35x-8 shard 1/2", "nightly/mi35x-8 shard 2/2"]
    api = FakeApi()
    findings = {f.expected.name: f for f in liveness.check_liveness(registry, api, REPO, TODAY)}
    # a failed per-commit run still ran; a skipped one did not
    assert findings["per-commit/cpu shard 1/1"].ok
    assert not findings["per-commit/h200-1 shard 1/1"].ok
    assert "per-commit/h200-1/kernels" in findings["per-commit/h200-1 shard 1/1"].message
    # nightly needs a success: shard 2/2 failed once and was cancelled once (page 2 of the runs)
    assert findings["nightly/mi35x-8 shard 1/2"].ok
    assert findings["nightly/mi35x-8 shard 1/2"].last_seen == "2026-11-30T02:40:09Z"
    dead = findings["nightly/mi35x-8 shard 2/2"]
    assert not dead.ok and "since 2026-11-28 (3 days)" in dead.message
    assert "nightly/mi35x-8/dspark-e2e" in dead.message and "nightly/mi35x-8/dspark-verify" in dead.message
    runs = [u for u in api.urls if "/runs?" in u]
    assert any("event=push" in u and "branch=main" in u and "created=%3E%3D2026-11-24" in u for u in runs)
    assert any("nightly.yml/runs" in u and "page=2" in u for u in runs), "the second page is read"

    assert liveness.main(["--root", str(repo.root), "--repo", REPO, "--today", "2026-12-01"], fetch=FakeApi()) == 1
    out = capsys.readouterr().out
    assert "DEAD  nightly/mi35x-8 shard 2/2" in out and "liveness: 2 of 4 GitHub job(s) alive; 2 dead" in out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_all_alive_passes_and_old_runs_do_not_count(tmp_path, capsys):
    repo, registry = _registry(tmp_path)

    def heal(pages):
        for job in pages[f"/repos/{REPO}/actions/runs/90102/jobs"][0]["jobs"]:
            job["conclusion"] = "success"
        for job in pages[f"/repos/{REPO}/actions/runs/80101/jobs"][0]["jobs"]:
            job["conclusion"] = "success"

    args = ["--root", str(repo.root), "--repo", REPO]
    assert liveness.main(args + ["--today", "2026-12-01"], fetch=FakeApi(heal)) == 0
    assert "4 of 4 GitHub job(s) alive" in capsys.readouterr().out
    # a week later the same history is stale: every job is dead
    assert liveness.main(args + ["--today", "2026-12-09"], fetch=FakeApi(heal)) == 1
    assert "0 of 4 GitHub job(s) alive" in capsys.readouterr().out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_missing_token_or_repo_is_a_clear_exit_2(tmp_path):
    repo, _ = _registry(tmp_path)
    env = repo.env()
    env.pop("GITHUB_TOKEN", None)
    env["GITHUB_REPOSITORY"] = REPO
    proc = subprocess.run([sys.executable, "-m", "ci.liveness", "--root", str(repo.root)], cwd=REAL_ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "GITHUB_TOKEN is not set" in proc.stderr, proc.stderr
    env.pop("GITHUB_REPOSITORY")
    proc = subprocess.run([sys.executable, "-m", "ci.liveness", "--root", str(repo.root)], cwd=REAL_ROOT,
                          env={**env, "GITHUB_TOKEN": "x"}, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--repo must be OWNER/NAME" in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_link_header_paging_and_bad_responses(tmp_path):
    link = ('<https://api.github.com/repositories/1/actions/runs?page=2>; rel="next", '
            '<https://api.github.com/repositories/1/actions/runs?page=5>; rel="last"')
    assert liveness.next_link(link) == "https://api.github.com/repositories/1/actions/runs?page=2"
    assert liveness.next_link('<https://x?page=1>; rel="prev"') is None and liveness.next_link(None) is None
    _, registry = _registry(tmp_path)

    def broken(url):
        return {"message": "Not Found"}, None

    with pytest.raises(liveness.LivenessError, match="workflow_runs"):
        liveness.check_liveness(registry, broken, REPO, TODAY)
