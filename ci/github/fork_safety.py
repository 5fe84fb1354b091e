"""Rule fork-on-self-hosted: a fork's pull request never reaches a self-hosted runner unapproved.

A job is on a self-hosted runner when one of its ``runs-on`` labels is ``self-hosted``, a
runner label of a GPU in the hardware catalog (ci/hardware.yaml ``runs_on``), or any label that is not
a GitHub-hosted image name (``ubuntu-24.04``, ``windows-latest``, ``macos-15-xlarge``...).
Such a job is flagged when its workflow starts on ``pull_request`` or ``pull_request_target``
(which adds the base repository's token and secrets) and a later push to a fork's pull request
(``action: synchronize``, head repository another than ``github.repository``) could run it:
its ``if:``, and the jobs it needs, are not definitely false then (ci/github/masking.py
``job_state``),

unless the job names an ``environment:`` (required reviewers approve each run, that is the
exact commit it runs). A guard that only checks a label (``contains(...labels.*.name, 'gpu')``)
does not count: the label stays on the pull request when the fork's author pushes again.
``if: github.event.action == 'labeled' && github.event.label.name == 'run-gpu-ci'`` does: only
the labelling itself, an act of a maintainer on the head commit of that moment, runs it
(docs/fork-safety.md). A label known only at run time (``runs-on: ${{ inputs.runner }}``
unresolved) is not judged. A job that calls a local reusable workflow (``uses: ./.github/workflows/
y.yml``) exposes every job of it (and of the workflows it calls, MAX_CALL_DEPTH deep) that would
be flagged under the same event: the called workflow sees the caller's ``github`` context, its
``inputs`` are the caller's literal ``with:`` values and its own defaults (others unknown); the
finding sits on the calling job. A fork-reachable job that calls a reusable workflow of another
repository (``uses: owner/repo/.github/workflows/y.yml@ref``, not fetched) is named too, as a note:
its runners are unknown, and a gap left silent would read as safe. Imports nothing from ``impl/``
or test code.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from ci.github.expressions import UNKNOWN, ExpressionError, evaluate
from ci.github.masking import job_state
from ci.github.triggers import call_input_defaults, workflow_triggers

RULE = "fork-on-self-hosted"
MAX_CALL_DEPTH = 4  # reusable workflows calling reusable workflows (GitHub allows four levels)
HOSTED_IMAGE = re.compile(r"^(ubuntu|windows|macos)-(latest|\d+(\.\d+)?)(-(arm|arm64|large|xlarge|intel))?$")
FORK_OWNER = "a-fork-owner"   # any owner other than the base repository's


def is_self_hosted(label: str, catalog_labels: Iterable[str] = ()) -> bool:
    """``self-hosted``, a catalog runner label, or any name that is not a GitHub-hosted image."""
    return label == "self-hosted" or label in set(catalog_labels) or not HOSTED_IMAGE.match(label)


def fork_context(event: str, base: Mapping[str, Any]) -> dict[str, Any]:
    """What a static reader knows when a fork's author pushes to an open pull request."""
    repository = str(base.get("github.repository") or "the-owner/the-repository")
    owner, _, name = repository.partition("/")
    return {**base, "github.event_name": event, "github.event.action": "synchronize",
            "github.repository": repository, "github.repository_owner": owner,
            "github.event.pull_request.head.repo.full_name": f"{FORK_OWNER}/{name}",
            "github.event.pull_request.head.repo.owner.login": FORK_OWNER,
            "github.event.pull_request.head.repo.fork": True,
            "github.event.label.name": None}


def _approved(job: Mapping[str, Any], ctx: Mapping[str, Any]) -> bool:
    """The job names an environment (a literal, or an expression that is a non-empty name for a fork)."""
    env = job.get("environment")
    name = env.get("name") if isinstance(env, dict) else env
    if not name:
        return False
    value = evaluate(name, ctx) if isinstance(name, str) and "${{" in name else name
    return value is not UNKNOWN and bool(value)


def _self_hosted(labels: tuple[str, ...], catalog_labels: tuple[str, ...]) -> list[str]:
    """The self-hosted labels of a job's ``runs-on`` (none when any label is known only at run time)."""
    if any("${{" in lbl for lbl in labels):
        return []
    return [lbl for lbl in labels if is_self_hosted(lbl, catalog_labels)]


REMOTE_CALL = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/\.github/workflows/[^@\s]+@\S+$")
NOT_READ = "<another repository's workflow: not read>"  # the labels of a remote call's jobs: unknown


def _remote_call(job: Mapping[str, Any]) -> str | None:
    """``owner/repo/.github/workflows/y.yml@ref`` when the job calls a reusable workflow of another repository."""
    uses = job.get("uses")
    return uses if isinstance(uses, str) and REMOTE_CALL.match(uses) else None


def _local_call(job: Mapping[str, Any], docs: Mapping[str, Any]) -> str | None:
    """The workflow file a job calls with ``uses: ./...``, when it is one of the scanned workflows."""
    uses = job.get("uses")
    if isinstance(uses, str) and uses.startswith("./"):
        rel = uses[2:].split("@")[0]
        return rel if rel in docs else None
    return None


def _callee_context(ctx: Mapping[str, Any], job: Mapping[str, Any], callee: dict[str, Any]) -> dict[str, Any]:
    """The caller's context with ``inputs.*`` replaced by the callee's: the caller's literal ``with:``
    values (an expression is evaluated in the caller's context), else the callee's defaults."""
    out = {k: v for k, v in ctx.items() if not k.lower().startswith("inputs.")}
    inputs = dict(call_input_defaults(callee))
    with_ = job.get("with")
    for name, value in (with_.items() if isinstance(with_, dict) else ()):
        if isinstance(value, str) and "${{" in value:
            try:
                value = evaluate(value, ctx)
            except ExpressionError:
                value = UNKNOWN
        inputs[str(name)] = value
    out.update({f"inputs.{name}": value for name, value in inputs.items() if value is not UNKNOWN})
    return out


def _labels_here(job: Mapping[str, Any], ctx: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A called job's ``runs-on`` as this caller's inputs resolve it (None when it is not a string or
    list, or depends on anything unknown here, such as a matrix value: the scan's labels are used)."""
    raw = job.get("runs-on")
    values = raw if isinstance(raw, list) else [raw]
    out = []
    for value in values:
        if not isinstance(value, str):
            return None
        if "${{" in value:
            try:
                value = evaluate(value, ctx)
            except ExpressionError:
                return None
        if value is UNKNOWN or not isinstance(value, (str, list)):
            return None
        out += [str(v) for v in value] if isinstance(value, list) else [value]
    return tuple(out)


def _exposed(docs: Mapping[str, dict[str, Any]], runs_on: Mapping[tuple[str, str], tuple[str, ...]], rel: str,
             ctx: Mapping[str, Any], catalog_labels: tuple[str, ...], depth: int = 0) -> list[tuple[str, list[str]]]:
    """("file:job", self-hosted labels) of every job of workflow ``rel`` a fork's push can run unapproved
    under ``ctx``, following its local reusable-workflow calls."""
    doc, out, memo = docs[rel], [], {}
    for key, job in doc["jobs"].items():
        if not isinstance(job, dict) or job_state(doc, str(key), ctx, memo) is False or _approved(job, ctx):
            continue
        labels = _labels_here(job, ctx) if depth else None  # a called job: its labels for this caller
        hosted = _self_hosted(labels or runs_on.get((rel, str(key)), ()), catalog_labels)
        if hosted:
            out.append((f"{rel}:{str(key)[:80]}", hosted))
        callee = _local_call(job, docs)
        if callee is not None and depth < MAX_CALL_DEPTH:
            out += [(f"{rel}:{str(key)[:80]} -> {where}", labels) for where, labels in
                    _exposed(docs, runs_on, callee, _callee_context(ctx, job, docs[callee]), catalog_labels,
                             depth + 1)]
        remote = _remote_call(job)
        if remote is not None:   # its jobs cannot be judged here: named, so the gap is not silent
            out.append((f"{rel}:{str(key)[:80]} -> {remote[:200]}", [NOT_READ]))
    return out


def fork_findings(docs: Mapping[str, dict[str, Any]], runs_on: Mapping[tuple[str, str], tuple[str, ...]],
                  lines: Mapping[str, Mapping[str, int]], base_ctx: Mapping[str, Any],
                  catalog_labels: Iterable[str] = ()) -> list[tuple[str, str, str, int]]:
    """(rule, message, path, line) for every self-hosted job a fork's pull request can reach unapproved,
    directly or through the local reusable workflows it calls (the finding sits on the calling job)."""
    catalog_labels = tuple(catalog_labels)
    out = []
    for rel, doc in docs.items():
        events = [e for e in ("pull_request_target", "pull_request") if e in workflow_triggers(doc)]
        for event in events:
            why = ("the base repository's token and secrets, whatever it checks out"
                   if event == "pull_request_target" else
                   "every later push of the fork's author runs it too (its if: is not false on synchronize)")
            for where, hosted in _exposed(docs, runs_on, rel, fork_context(event, base_ctx), catalog_labels):
                key = where.split(":", 1)[1].split(" -> ")[0]
                line = lines.get(rel, {}).get(f"job:{key}", 0)
                if hosted == [NOT_READ]:
                    out.append((RULE, f"{where}: calls a reusable workflow of another repository under {event} from "
                                "a fork, which the audit does not read: whether its jobs run on self-hosted runners "
                                "is unknown; guard the calling job or pin the call to a commit whose runners you "
                                "have checked (docs/fork-safety.md)", rel, line))
                    continue
                out.append((RULE, f"{where}: runs on self-hosted runner(s) {hosted[:4]} under {event} "
                            f"from a fork: {why}; guard it (github.event.pull_request.head.repo.full_name == "
                            "github.repository, or run it only on the labelled event) or add an environment with "
                            "required reviewers (docs/fork-safety.md)", rel, line))
    return out
