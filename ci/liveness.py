"""Liveness: every registered job really ran lately, read from GitHub's workflow-run history.

    GITHUB_TOKEN=... python -m ci.liveness [--repo OWNER/NAME] [--today YYYY-MM-DD]

Scheduled is not the same as ran: GitHub disables a scheduled workflow after 60 days
without repository activity, and a self-hosted label can have no online runner for
weeks. For every (group, shard) GitHub job the workflows define (``<group> shard I/N``),
this reads the runs of its workflow on ``main`` from the REST API and fails, naming
each registry job the group holds, when
- a nightly shard has no *successful* run in ``defaults.liveness_days.nightly`` days;
- a per-commit shard has not *run* (succeeded or failed; skipped and cancelled do not
  count) on a push to main in ``defaults.liveness_days.per-commit`` days.
The token comes from ``GITHUB_TOKEN`` only (exit 2 without it). urllib only; the HTTP
layer is one function (:class:`GitHubApi`), so tests feed recorded JSON instead.
Never imports torch, ``impl`` or test code.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ci.catalog import CatalogError
from ci.collect import CollectionError
from ci.group_plan import groups
from ci.jobs import load_registry

API_URL = "https://api.github.com"
WORKFLOW_OF = {"per-commit": "per-commit.yml", "nightly": "nightly.yml"}
RAN = frozenset({"success", "failure", "timed_out"})
Fetch = Callable[[str], tuple[Any, "str | None"]]   # url -> (decoded JSON, next page url or None)
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class LivenessError(RuntimeError):
    """The history cannot be read (HTTP error, unknown workflow, bad JSON)."""


def next_link(header: str | None) -> str | None:
    """The ``rel="next"`` URL of a GitHub ``Link`` header."""
    match = _NEXT.search(header or "")
    return match.group(1) if match else None


class GitHubApi:
    """GET with the token, JSON decoded, ``Link: rel="next"`` returned for paging."""

    def __init__(self, token: str, base: str = API_URL, timeout: float = 30.0):
        self.token, self.base, self.timeout = token, base.rstrip("/"), timeout

    def __call__(self, url: str) -> tuple[Any, str | None]:
        full = url if url.startswith("http") else self.base + url
        request = urllib.request.Request(full, headers={
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": "dspark-suite-liveness",
        })
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:   # noqa: S310 - https API URL
                return json.load(response), next_link(response.headers.get("Link"))
        except urllib.error.HTTPError as exc:
            raise LivenessError(f"GET {full}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise LivenessError(f"GET {full}: {exc.reason}") from None


def _pages(fetch: Fetch, url: str, key: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        data, next_url = fetch(next_url)
        if not isinstance(data, dict) or not isinstance(data.get(key), list):
            raise LivenessError(f"GET {url}: expected a JSON object with a '{key}' list")
        items.extend(data[key])
    return items


@dataclass(frozen=True)
class Expected:
    schedule: str
    workflow: str
    name: str                  # GitHub job name, "<group> shard I/N"
    jobs: tuple[str, ...]      # registry job ids the group holds


@dataclass(frozen=True)
class Finding:
    expected: Expected
    last_seen: str | None      # completed_at of the latest counted run in the window, if any
    ok: bool
    message: str


def expectations(registry) -> list[Expected]:
    out = []
    for group in groups(registry):
        workflow = WORKFLOW_OF.get(group.schedule)
        if workflow is None:
            continue
        ids = tuple(job.id for job in group.jobs)
        out.extend(Expected(group.schedule, workflow, f"{group.id} shard {i}/{group.shards}", ids)
                   for i in range(1, group.shards + 1))
    return out


def runs_url(repo: str, workflow: str, schedule: str, since: dt.date) -> str:
    query = {"branch": "main", "created": f">={since.isoformat()}", "per_page": "100"}
    if schedule == "per-commit":
        query["event"] = "push"
    return f"/repos/{repo}/actions/workflows/{workflow}/runs?{urllib.parse.urlencode(query)}"


def check_liveness(registry, fetch: Fetch, repo: str, today: dt.date) -> list[Finding]:
    days = registry.catalog.liveness_days
    findings = []
    jobs_by_workflow: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for exp in expectations(registry):
        since = today - dt.timedelta(days=days[exp.schedule])
        cache_key = (exp.workflow, exp.schedule)
        if cache_key not in jobs_by_workflow:
            runs = _pages(fetch, runs_url(repo, exp.workflow, exp.schedule, since), "workflow_runs")
            jobs_by_workflow[cache_key] = [
                job for run in runs
                for job in _pages(fetch, f"/repos/{repo}/actions/runs/{run['id']}/jobs?filter=all&per_page=100",
                                  "jobs")]
        wanted = {"success"} if exp.schedule == "nightly" else RAN
        hits = sorted((j.get("completed_at") or "" for j in jobs_by_workflow[cache_key]
                       if j.get("name") == exp.name and j.get("conclusion") in wanted
                       and (j.get("completed_at") or "")[:10] >= since.isoformat()), reverse=True)
        what = "successful run" if exp.schedule == "nightly" else "run on a push to main"
        if hits:
            findings.append(Finding(exp, hits[0], True, f"last {what} {hits[0]}"))
        else:
            findings.append(Finding(exp, None, False,
                                    f"no {what} of GitHub job '{exp.name}' ({exp.workflow}) since {since.isoformat()} "
                                    f"({days[exp.schedule]} days); registry job(s): {', '.join(exp.jobs)}"))
    return findings


def main(argv: list[str] | None = None, fetch: Fetch | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.liveness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY"),
                        help="OWNER/NAME (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--today", type=dt.date.fromisoformat, default=None, help="date to measure from (UTC)")
    parser.add_argument("--root", default=".")
    args = parser.parse_args(argv)
    if not args.repo or not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        parser.error(f"--repo must be OWNER/NAME (or set GITHUB_REPOSITORY), got {args.repo!r}")
    if fetch is None:
        token = os.environ.get("GITHUB_TOKEN", "")
        if not token:
            print("liveness: GITHUB_TOKEN is not set; it needs a token that may read Actions history "
                  "(in a workflow: env GITHUB_TOKEN: ${{ github.token }} with permissions actions: read)",
                  file=sys.stderr)
            return 2
        fetch = GitHubApi(token, os.environ.get("GITHUB_API_URL", API_URL))
    try:
        registry = load_registry(Path(args.root).resolve())
    except (CollectionError, CatalogError) as exc:
        print(f"liveness: registry cannot be collected:\n{exc}", file=sys.stderr)
        return 2
    today = args.today or dt.datetime.now(dt.timezone.utc).date()
    try:
        findings = check_liveness(registry, fetch, args.repo, today)
    except LivenessError as exc:
        print(f"liveness: cannot read the run history of {args.repo}: {exc}", file=sys.stderr)
        return 2
    width = max((len(f.expected.name) for f in findings), default=10)
    for f in findings:
        print(f"{'ok  ' if f.ok else 'DEAD'}  {f.expected.name:<{width}}  {f.message}")
    dead = [f for f in findings if not f.ok]
    print(f"liveness: {len(findings) - len(dead)} of {len(findings)} GitHub job(s) alive"
          + (f"; {len(dead)} dead" if dead else ""))
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
