"""Liveness: every registered job really ran lately, read from GitHub's workflow-run history.

    GITHUB_TOKEN=... python -m ci.tools.liveness [--repo OWNER/NAME] [--now TIMESTAMP] [--max-queued-hours H]
    GITHUB_TOKEN=... python -m ci.tools.liveness --self-check [--days N]

Scheduled is not the same as ran: GitHub disables a scheduled workflow in a public repository
after 60 days without repository activity (and does not re-enable it when activity resumes),
and a self-hosted label can have no online runner for weeks. For every (group, shard) GitHub
job the workflows define (``<group> shard I/N``), this walks the runs of its workflow on
``main`` newest first (per-commit: push events only), reading each run's jobs of every attempt,
and stops once every shard has its evidence. A job is evidence only when a runner took it
(``runner_id``/``runner_name`` set, or steps executed): a job that waited for a runner until
GitHub gave up also ends as ``failure``, with no runner and no steps. A shard is DEAD when
- a nightly shard has no *successful* run in ``defaults.liveness_days.nightly`` days;
- a per-commit shard has not *run* on a push to main in ``defaults.liveness_days.per-commit``
  days: success, failure, or cancelled after a runner took it (a job that hits its
  ``timeout-minutes`` is cancelled, GitHub's jobs never end ``timed_out``); skipped, neutral,
  ``action_required`` and never-started jobs do not count;
- it has a job queued with no runner for more than ``--max-queued-hours`` and no job of the
  same name ran after it was queued (GitHub itself fails a job after 24 hours in the queue).
The window is ``now - days`` in full UTC timestamps: a job counts when its ``completed_at`` is
inside it (runs are listed from 30 hours earlier, the longest a job can take from its run's creation).
After a reshard (the shard count is recomputed from durations, so the names change) and until
a run with the new names completes, shard I/N is matched by group and index: job ``I/M`` of the
old count M vouches for it, and a new index beyond M is vouched for by all M old shards.

``--self-check`` is the check keeping itself alive (the per-commit lint job runs it): DEAD when
``nightly.yml`` or ``liveness.yml`` is not ``active`` (disabled for inactivity or by hand) or
``liveness.yml`` has not completed a run (success or failure) on main in ``--days`` days.

Exit codes: 0 every job alive; 1 some job DEAD; 2 the history cannot be read or the check is
misconfigured (a usage error, no ``GITHUB_TOKEN``, bad ``--repo`` or ``GITHUB_API_URL``, registry
errors, HTTP errors, deadlines, resets, an answer over the size cap, a body that is not JSON, a
field of the wrong type, a paging loop, a history of more than 50,000 runs and jobs, a rate limit
longer than the wait); 3 an internal error
(a bug: one line, the traceback only with ``--debug``). A failure is one line on stderr (a
registry that cannot be collected: one line per error).
Environment: ``GITHUB_TOKEN`` (required; in a workflow ``${{ github.token }}`` with
``actions: read``), ``GITHUB_REPOSITORY`` (default ``--repo``), ``GITHUB_API_URL`` (REST root,
default https://api.github.com; Actions sets it, GitHub Enterprise Server uses its own host).
HTTP lives in :mod:`ci.github.api` (what it promises: docs/http-client.md); tests feed a fake API
over loopback HTTP. Never imports torch, ``impl`` or test code.
"""
from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import re
import sys
import traceback
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, NoReturn

from ci.log_escape import log_safe
from ci.registry.catalog import CatalogError
from ci.registry.collect import CollectionError
from ci.github.http_client import proxy_of
from ci.github.api import (RUN_SECONDS, ApiError, GitHubApi, Limits, api_base, field, next_link,  # noqa: F401
                           path_id)  # next_link: re-exported
from ci.registry.group_plan import groups
from ci.registry.jobs import load_registry

PROG = "python -m ci.tools.liveness"
EXIT_ALIVE, EXIT_DEAD, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3
WORKFLOW_OF = {"per-commit": "per-commit.yml", "nightly": "nightly.yml"}
SELF_WORKFLOW = "liveness.yml"
SCHEDULED_WORKFLOWS = ("nightly.yml", SELF_WORKFLOW)
SELF_CHECK_DAYS = 3            # liveness.yml runs daily: three missed days mean it stopped
MAX_DAYS = 3650
MAX_QUEUED_HOURS = 6.0
MAX_QUEUED_LIMIT = 8760.0      # a year: GitHub fails a job after 24 h in the queue
EARLIEST_NOW = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
# A job completes at most this long after its run is created (24 h in the queue, then the 6 h
# timeout-minutes cap of ci/github/generate.py): runs created this much before the window are read too.
RUN_SLACK = dt.timedelta(hours=30)
RAN = frozenset({"success", "failure", "timed_out", "cancelled"})   # per-commit, with a runner
WAITING = frozenset({"queued", "pending", "requested"})     # for a runner ("waiting" is for an approval)
Fetch = GitHubApi      # url -> (decoded JSON, next page url or None); .pages(url, key) for lists
_SHARD_NAME = re.compile(r"(?P<group>.+) shard (?P<index>[0-9]{1,6})/(?P<count>[0-9]{1,6})")
LivenessError = ApiError
_NULL = type(None)
# The fields this module reads from an answer, (key, types, required): every one is checked
# where the object enters (github_api.field), so a wrong shape is one "unreadable" line, exit 2.
RUN_FIELDS = (("id", (int,), True), ("conclusion", (str, _NULL), False), ("created_at", (str, _NULL), False),
              ("updated_at", (str, _NULL), False))
JOB_FIELDS = (("name", (str,), True), ("status", (str,), True), ("conclusion", (str, _NULL), False),
              ("created_at", (str, _NULL), False), ("started_at", (str, _NULL), False),
              ("completed_at", (str, _NULL), False), ("runner_id", (int, _NULL), False),
              ("runner_name", (str, _NULL), False), ("run_id", (int, _NULL), False),
              ("run_attempt", (int, _NULL), False), ("steps", (list, _NULL), False),
              ("labels", (list, _NULL), False))


@dataclass(frozen=True)
class Expected:
    schedule: str
    workflow: str
    group: str
    index: int
    shards: int
    jobs: tuple[str, ...]      # registry job ids the group holds
    labels: tuple[str, ...]    # runs-on labels of the group's hardware

    @property
    def name(self) -> str:
        """The GitHub job name, ``<group> shard I/N``."""
        return f"{self.group} shard {self.index}/{self.shards}"


@dataclass(frozen=True)
class Finding:
    name: str
    ok: bool
    message: str
    last_seen: str | None = None       # completed_at of the newest counted job, if any
    expected: Expected | None = None


def expectations(registry) -> list[Expected]:
    out = []
    for group in groups(registry):
        workflow = WORKFLOW_OF.get(group.schedule)
        if workflow is None:
            continue
        ids = tuple(job.id for job in group.jobs)
        out.extend(Expected(group.schedule, workflow, group.id, i, group.shards, ids, tuple(group.hardware.runs_on))
                   for i in range(1, group.shards + 1))
    return out


# ---------------------------------------------------------------- time

def parse_time(value: Any, what: str = "timestamp") -> dt.datetime:
    """An ISO 8601 timestamp (``Z`` or an offset; none means UTC) as an aware UTC datetime."""
    try:
        stamp = dt.datetime.fromisoformat(str(value))
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        raise LivenessError(f"{what}: not an ISO 8601 timestamp: {str(value)[:60]!r}") from None


def iso(stamp: dt.datetime) -> str:
    return stamp.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- reading the history

def runs_url(repo: str, workflow: str, since: dt.datetime, *, event: str | None = None,
             status: str | None = None) -> str:
    query = {"branch": "main", "created": f">={iso(since)}", "per_page": "100"}
    if event:
        query["event"] = event
    if status:
        query["status"] = status
    return f"/repos/{repo}/actions/workflows/{workflow}/runs?{urllib.parse.urlencode(query)}"


def jobs_url(repo: str, run_id: Any) -> str:
    """The jobs of a run; the id must be an integer (it goes into the path)."""
    return f"/repos/{repo}/actions/runs/{path_id(run_id, f'a run id of {repo}')}/jobs?filter=all&per_page=100"


def iter_pages(fetch: Fetch, url: str, key: str) -> Iterator[dict[str, Any]]:
    """The items of every page, fetched lazily (a caller that stops early reads no more pages);
    the visited-URL set, page cap and origin check are :meth:`GitHubApi.pages`."""
    return fetch.pages(url, key)


def checked(item: dict[str, Any], fields: tuple, where: str) -> dict[str, Any]:
    """``item`` once every field this module reads has its type (see RUN_FIELDS, JOB_FIELDS)."""
    for key, kinds, required in fields:
        value = field(item, key, *kinds, where=where, required=required)
        if key.endswith("_at") and value is not None:
            parse_time(value, f"{where}: '{key}'")
    for i, step in enumerate(item.get("steps") or ()):
        field(step, "status", str, _NULL, where=f"{where}: step {i}", required=False)
    for i, label in enumerate(item.get("labels") or ()):
        if type(label) is not str:
            raise LivenessError(f"{where}: label {i} is {type(label).__name__}, expected a string")
    return item


def _run(run: dict[str, Any], url: str) -> dict[str, Any]:
    return checked(run, RUN_FIELDS, f"a workflow run from {url.split('?')[0]}")


def _job(job: dict[str, Any], run_id: int) -> dict[str, Any]:
    return checked(job, JOB_FIELDS, f"a job of run {run_id}")


def has_runner(job: Mapping[str, Any]) -> bool:
    """A runner took the job: a runner id or name, or a step that started."""
    return bool(job.get("runner_id")) or bool(job.get("runner_name")) or any(
        isinstance(step, dict) and step.get("status") in ("in_progress", "completed")
        for step in job.get("steps") or ())


def counts(job: Mapping[str, Any], schedule: str, since: dt.datetime) -> bool:
    """The job is evidence that its shard ran (nightly: succeeded) inside the window."""
    wanted = {"success"} if schedule == "nightly" else RAN
    if job.get("status") != "completed" or job.get("conclusion") not in wanted or not has_runner(job):
        return False
    completed = job.get("completed_at")
    return bool(completed) and parse_time(completed, "completed_at") >= since


def _labels(job: Mapping[str, Any], fallback: tuple[str, ...]) -> str:
    return ", ".join(job.get("labels") or fallback)


def describe(job: Mapping[str, Any], fallback_labels: tuple[str, ...], now: dt.datetime) -> str:
    """Why a job is not evidence, in words."""
    where = f"run {job.get('run_id')} attempt {job.get('run_attempt', 1)}"
    status, conclusion = job.get("status"), job.get("conclusion")
    if status in WAITING and not has_runner(job):
        hours = (now - parse_time(job.get("created_at"), "created_at")).total_seconds() / 3600
        return (f"{where}: queued {hours:.1f} h ago, no runner picked it up "
                f"(labels: {_labels(job, fallback_labels)})")
    if status != "completed":
        return f"{where}: {status} since {job.get('started_at')}"
    if conclusion == "skipped":
        return f"{where}: skipped"
    if conclusion == "action_required":
        return f"{where}: action_required (waiting for an approval, never started)"
    if not has_runner(job):
        return (f"{where}: ended {conclusion} at {job.get('completed_at')} without ever running: "
                f"queued, no runner picked it up (labels: {_labels(job, fallback_labels)})")
    return f"{where}: {conclusion} at {job.get('completed_at')}"


@dataclass
class _History:
    """What the walk over one workflow's runs saw."""
    jobs: list[dict[str, Any]]
    startup_failures: list[dict[str, Any]]


def _short(value: Any, limit: int = 100) -> Any:
    """A string cut to ``limit`` characters (no value this module compares with is that long)."""
    return value[:limit] + "..." if isinstance(value, str) and len(value) > limit else value


def _slim(job: dict[str, Any]) -> dict[str, Any]:
    """What :func:`judge` and :func:`describe` read of a job, bounded in size: the steps reduced to
    whether one started (``has_runner``), at most 10 labels, long strings cut."""
    slim = {key: _short(job.get(key)) for key in ("name", "status", "conclusion", "created_at", "started_at",
                                                  "completed_at", "runner_id", "runner_name", "run_id")}
    slim["run_attempt"] = job.get("run_attempt", 1)
    slim["steps"] = [{"status": "in_progress"}] if has_runner({"steps": job.get("steps")}) else []
    labels = job.get("labels") or []
    slim["labels"] = [_short(label) for label in labels[:10]] + (["..."] if len(labels) > 10 else [])
    return slim


def _walk(fetch: Fetch, repo: str, exps: list[Expected], since: dt.datetime) -> _History:
    """Runs newest first, each run's jobs (all attempts); stop once every expected shard has evidence.
    Kept are only the jobs :func:`judge` reads (the expected names, other shard counts of the same
    groups, the dispatch-skipped name), slimmed: memory follows the evidence, not the pages read."""
    schedule, workflow = exps[0].schedule, exps[0].workflow
    url = runs_url(repo, workflow, since - RUN_SLACK, event="push" if schedule == "per-commit" else None)
    missing = {e.name for e in exps}
    names = missing | {_dispatch_name(e.group) for e in exps}
    groups_of = {e.group for e in exps}
    history = _History([], [])
    for run in iter_pages(fetch, url, "workflow_runs"):
        run = _run(run, url)
        if run.get("conclusion") == "startup_failure":
            history.startup_failures.append({"id": run["id"], "created_at": run.get("created_at")})
        for job in iter_pages(fetch, jobs_url(repo, run["id"]), "jobs"):
            job = _job(job, run["id"])
            name = job["name"]
            shard = _SHARD_NAME.fullmatch(name) if name not in names else None
            if name in names or (shard and shard["group"] in groups_of):
                history.jobs.append(_slim(job))
            if name in missing and counts(job, schedule, since):
                missing.discard(name)
        if not missing:
            break
    return history


def _dispatch_name(group: str) -> str:
    """The name GitHub gives a matrix job that a dispatch for another group skipped (not expanded)."""
    return f"{group} shard ${{{{ matrix.shard }}}}"


# ---------------------------------------------------------------- judging one shard

def _newest(jobs: list[dict[str, Any]], key: str = "completed_at") -> dict[str, Any]:
    return max(jobs, key=lambda j: parse_time(j.get(key) or j.get("created_at") or "1970-01-01", key))


def _reshard_evidence(exp: Expected, history: _History, since: dt.datetime) -> tuple[str, str] | None:
    """(last seen, words) when old-count jobs of the group vouch for ``exp`` (see the module doc)."""
    by_count: dict[int, dict[int, list[dict[str, Any]]]] = {}
    for job in history.jobs:
        match = _SHARD_NAME.fullmatch(str(job.get("name", "")))
        if not match or match["group"] != exp.group:
            continue
        count, index = int(match["count"]), int(match["index"])
        if count == exp.shards and job.get("status") == "completed" and has_runner(job):
            return None        # a run with the new names completed: they stand on their own
        if count != exp.shards and counts(job, exp.schedule, since):
            by_count.setdefault(count, {}).setdefault(index, []).append(job)
    for count, shards in sorted(by_count.items(), key=lambda kv: -max(
            parse_time(_newest(js)["completed_at"]).timestamp() for js in kv[1].values())):
        if exp.index <= count and exp.index in shards:
            job = _newest(shards[exp.index])
            return job["completed_at"], (f"as shard {exp.index}/{count} before the reshard to {exp.shards} "
                                         f"shards (no run with the new names has completed yet)")
        if exp.index > count and set(range(1, count + 1)) <= shards.keys():
            oldest = min((_newest(shards[i]) for i in range(1, count + 1)), key=lambda j: j["completed_at"])
            return oldest["completed_at"], (f"the group ran as {count} shards before the reshard to "
                                            f"{exp.shards} (no run with the new names has completed yet)")
    return None


def judge(exp: Expected, history: _History, now: dt.datetime, since: dt.datetime, days: int,
          max_queued: dt.timedelta) -> Finding:
    mine = [j for j in history.jobs if j.get("name") == exp.name]
    hits = [j for j in mine if counts(j, exp.schedule, since)]
    ran_last = max((parse_time(j["completed_at"]) for j in hits), default=None)
    stuck = [j for j in mine if j.get("status") in WAITING and not has_runner(j)
             and now - parse_time(j.get("created_at"), "created_at") > max_queued
             and (ran_last is None or parse_time(j.get("created_at"), "created_at") > ran_last)]
    if stuck:
        job = _newest(stuck, "created_at")
        return Finding(exp.name, False, f"{describe(job, exp.labels, now)}; longer than "
                       f"{max_queued.total_seconds() / 3600:g} h; registry job(s): {', '.join(exp.jobs)}",
                       expected=exp)
    what = "successful run" if exp.schedule == "nightly" else "run on a push to main"
    if hits:
        job = _newest(hits)
        extra = (" (cancelled after a runner took it: counted as a failed run)"
                 if job.get("conclusion") == "cancelled" else "")
        return Finding(exp.name, True, f"last {what} {job['completed_at']}{extra}", job["completed_at"], exp)
    reshard = _reshard_evidence(exp, history, since)
    if reshard:
        return Finding(exp.name, True, f"last {what} {reshard[0]}, {reshard[1]}", reshard[0], exp)
    notes = []
    if mine:
        notes.append("newest job: " + describe(_newest(mine, "created_at"), exp.labels, now))
    dispatch_skipped = [j for j in history.jobs if j.get("name") == _dispatch_name(exp.group)]
    if dispatch_skipped and not mine:
        notes.append(f"{len(dispatch_skipped)} run(s) skipped the group (a dispatch for another group)")
    if history.startup_failures:
        run = history.startup_failures[0]
        notes.append(f"{len(history.startup_failures)} run(s) ended in startup_failure with no jobs "
                     f"(newest: run {run.get('id')} at {run.get('created_at')}; the workflow could not start)")
    return Finding(exp.name, False,
                   f"GitHub job '{exp.name}' ({exp.workflow}) has no {what} since {iso(since)} ({days} days)"
                   + "".join(f"; {n}" for n in notes) + f"; registry job(s): {', '.join(exp.jobs)}",
                   expected=exp)


def check_liveness(registry, fetch: Fetch, repo: str, now: dt.datetime,
                   max_queued_hours: float = MAX_QUEUED_HOURS) -> list[Finding]:
    days = registry.catalog.liveness_days
    by_workflow: dict[str, list[Expected]] = {}
    for exp in expectations(registry):
        by_workflow.setdefault(exp.workflow, []).append(exp)
    findings = []
    for exps in by_workflow.values():
        window = days[exps[0].schedule]
        since = now - dt.timedelta(days=window)
        history = _walk(fetch, repo, exps, since)
        for exp in exps:
            fetch.check_deadline(f"judging {exp.name}")
            findings.append(judge(exp, history, now, since, window, dt.timedelta(hours=max_queued_hours)))
    return findings


# ---------------------------------------------------------------- the check of the check

def self_check(fetch: Fetch, repo: str, now: dt.datetime, days: int = SELF_CHECK_DAYS) -> list[Finding]:
    """The scheduled workflows are active and liveness.yml completed a run on main in ``days`` days."""
    findings = []
    for workflow in SCHEDULED_WORKFLOWS:
        url = f"/repos/{repo}/actions/workflows/{workflow}"
        data, _ = fetch(url)
        state = field(data, "state", str, where=f"GET {url}")
        state = _short(state)
        findings.append(Finding(f"{workflow} schedule", state == "active", f"state {state}" if state == "active" else
                                f"state {state}: GitHub does not run its schedule; re-enable it "
                                f"(gh workflow enable {workflow}, or the Actions tab)"))
    since = now - dt.timedelta(days=days)
    url = runs_url(repo, SELF_WORKFLOW, since, status="completed")
    run, newest = None, None          # only the newest completed run is kept, however many are listed
    for item in iter_pages(fetch, url, "workflow_runs"):
        item = _run(item, url)
        if item.get("conclusion") not in ("success", "failure"):
            continue
        stamp = parse_time(item.get("updated_at") or item.get("created_at"), "updated_at")
        if stamp >= since and (newest is None or stamp > newest):
            run, newest = {key: item.get(key) for key in ("id", "updated_at", "conclusion")}, stamp
    if run is not None:
        words = f"last completed run {run.get('id')} at {run.get('updated_at')} ({run.get('conclusion')})"
        findings.append(Finding(f"{SELF_WORKFLOW} ran", True, words, run.get("updated_at")))
    else:
        findings.append(Finding(f"{SELF_WORKFLOW} ran", False,
                                f"no completed run of {SELF_WORKFLOW} on main since {iso(since)} ({days} days): "
                                f"nothing checks that the registered jobs still run"))
    return findings


# ---------------------------------------------------------------- command line

class UsageError(Exception):
    """A mistake on the command line: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _timestamp(value: str) -> dt.datetime:
    try:
        stamp = parse_time(value)
    except LivenessError:
        raise argparse.ArgumentTypeError(f"expected an ISO 8601 UTC timestamp or date, got {value[:60]!r}") from None
    if stamp < EARLIEST_NOW:
        raise argparse.ArgumentTypeError(f"expected a timestamp from {iso(EARLIEST_NOW)} on, got {value[:60]!r}")
    return stamp


def _hours(value: str) -> float:
    try:
        hours = float(value)
    except ValueError:
        hours = math.nan
    if not (math.isfinite(hours) and 0 < hours <= MAX_QUEUED_LIMIT):
        raise argparse.ArgumentTypeError(f"expected a number of hours > 0 and <= {MAX_QUEUED_LIMIT:g}, "
                                         f"got {value[:60]!r}")
    return hours


def _days(value: str) -> int:
    if not value.strip().isascii() or not value.strip().isdigit() or not 0 < int(value) <= MAX_DAYS:
        raise argparse.ArgumentTypeError(f"expected a whole number of days from 1 to {MAX_DAYS}, got {value[:60]!r}")
    return int(value)


def _proxy(value: str) -> str:
    """A CONNECT proxy URL, checked before anything connects (``ci.github.http_client.proxy_of``)."""
    try:
        proxy_of(value)
    except ApiError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--proxy: ")) from None
    return value


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and 0 < seconds <= 86400):
        raise argparse.ArgumentTypeError(f"expected seconds > 0 and <= 86400, got {value[:60]!r}")
    return seconds


EPILOG = """exit codes:
  0  every job (or, with --self-check, every check) is alive
  1  some job is DEAD
  2  usage error, or the history cannot be read: no GITHUB_TOKEN, bad --repo or GITHUB_API_URL,
     registry errors, HTTP errors, a deadline, a reset, an answer over the size cap, a body that
     is not JSON, a field of the wrong type, a paging loop, a history of more than 50,000 runs
     and jobs, a rate limit longer than the wait
  3  internal error (a bug): one line; --debug prints the traceback
The token goes only to the origin of GITHUB_API_URL (https unless loopback); a redirect to
another origin is refused; proxy variables are ignored unless --proxy names one, used as a
CONNECT tunnel, with an https API URL only (docs/http-client.md)."""


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=None, help="OWNER/NAME (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--now", "--today", dest="now", type=_timestamp, default=None,
                        help="UTC timestamp (or date: midnight UTC) the windows end at (default: now)")
    parser.add_argument("--root", default=".")
    parser.add_argument("--max-queued-hours", type=_hours, default=MAX_QUEUED_HOURS,
                        help=f"a job queued with no runner longer than this is DEAD (default {MAX_QUEUED_HOURS:g})")
    parser.add_argument("--self-check", action="store_true",
                        help=f"check {SELF_WORKFLOW} itself: the scheduled workflows are active and it ran lately")
    parser.add_argument("--days", type=_days, default=SELF_CHECK_DAYS,
                        help=f"with --self-check: the window in days (default {SELF_CHECK_DAYS})")
    parser.add_argument("--deadline", type=_seconds, default=RUN_SECONDS,
                        help=f"wall-clock seconds for the whole run, waits included (default {RUN_SECONDS:g})")
    parser.add_argument("--proxy", default=None, type=_proxy, metavar="http://HOST:PORT",
                        help="reach the API (https only) through this CONNECT proxy (TLS end to end; the proxy "
                             "learns the API's host and port only). HTTP(S)_PROXY are never read: pass one here "
                             "to use it")
    parser.add_argument("--debug", action="store_true", help="on an internal error (exit 3), print the traceback")
    return parser


def one_line(text: object) -> str:
    """Text from an answer, safe to print as (part of) one line of a CI log: every character that is
    not printable (line breaks and other controls, a lone surrogate such as ``\\ud800`` that no
    encoder writes, bidi and other format characters, spaces other than U+0020) is written as its
    ``\\x..``/``\\u..`` escape, then :func:`ci.log_escape.log_safe` encodes a ``::`` that would
    start the line and every ``##[``, so the runner never reads a workflow command in it."""
    text = str(text)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return log_safe(text)


def _report(findings: list[Finding]) -> int:
    width = max((len(f.name) for f in findings), default=10)
    for f in findings:
        print(one_line(f"{'ok  ' if f.ok else 'DEAD'}  {f.name:<{width}}  {f.message}"))
    dead = [f for f in findings if not f.ok]
    print(f"liveness: {len(findings) - len(dead)} of {len(findings)} check(s) alive"
          + (f"; {len(dead)} dead" if dead else ""))
    return EXIT_DEAD if dead else EXIT_ALIVE


def _repo(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    repo = args.repo or env.get("GITHUB_REPOSITORY")
    if not repo or not re.fullmatch(r"[\w.-]+/[\w.-]+", repo, re.ASCII) or any(
            part in (".", "..") for part in repo.split("/")):
        raise UsageError(f"--repo must be OWNER/NAME (or set GITHUB_REPOSITORY), got {repo!r}")
    return repo


def _check(args: argparse.Namespace, repo: str, fetch: Fetch | None, env: Mapping[str, str]) -> int:
    if fetch is None:
        token = env.get("GITHUB_TOKEN", "")
        if not token:
            print("liveness: GITHUB_TOKEN is not set; it needs a token that may read Actions history "
                  "(in a workflow: env GITHUB_TOKEN: ${{ github.token }} with permissions actions: read)",
                  file=sys.stderr)
            return EXIT_UNREADABLE
        fetch = GitHubApi(token, api_base(env), Limits(run_seconds=args.deadline), proxy=args.proxy)
    now = args.now or dt.datetime.now(dt.timezone.utc)
    if args.self_check:
        return _report(self_check(fetch, repo, now, args.days))
    try:
        registry = load_registry(Path(args.root).resolve())
    except (CollectionError, CatalogError) as exc:
        print(f"liveness: registry cannot be collected:\n{exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    return _report(check_liveness(registry, fetch, repo, now, args.max_queued_hours))


def main(argv: list[str] | None = None, fetch: Fetch | None = None, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    try:
        args = _parser().parse_args(argv)
        repo = _repo(args, env)
    except UsageError as exc:
        print(f"{PROG}: error: {one_line(exc)} (see --help)", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        return _check(args, repo, fetch, env)
    except LivenessError as exc:
        print(f"liveness: cannot read the run history of {repo}: {one_line(exc)}", file=sys.stderr)
        return EXIT_UNREADABLE
    except Exception as exc:          # a bug: its own exit code, never read as "dead" or "unreadable"
        if args.debug:
            traceback.print_exc()
        print(f"liveness: internal error: {type(exc).__name__}: {one_line(exc)[:300]}"
              + ("" if args.debug else " (run with --debug for the traceback)"), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    # one_line escapes what it prints; this keeps any other character an odd locale's encoding
    # lacks from turning a report into a crash half-way (exit 3)
    sys.stdout.reconfigure(errors="backslashreplace")
    sys.exit(main())
