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
unresolved) is not judged. Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from ci.github.expressions import UNKNOWN, evaluate
from ci.github.masking import job_state
from ci.github.triggers import workflow_triggers

RULE = "fork-on-self-hosted"
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


def fork_findings(docs: Mapping[str, dict[str, Any]], runs_on: Mapping[tuple[str, str], tuple[str, ...]],
                  lines: Mapping[str, Mapping[str, int]], base_ctx: Mapping[str, Any],
                  catalog_labels: Iterable[str] = ()) -> list[tuple[str, str, str, int]]:
    """(rule, message, path, line) for every self-hosted job a fork's pull request can reach unapproved."""
    catalog_labels = tuple(catalog_labels)
    out = []
    for rel, doc in docs.items():
        events = [e for e in ("pull_request_target", "pull_request") if e in workflow_triggers(doc)]
        for event in events:
            ctx = fork_context(event, base_ctx)
            memo: dict[str, bool | None] = {}
            for key, job in doc["jobs"].items():
                if not isinstance(job, dict):
                    continue
                labels = runs_on.get((rel, str(key)), ())
                hosted = [lbl for lbl in labels if "${{" not in lbl and is_self_hosted(lbl, catalog_labels)]
                if not hosted or any("${{" in lbl for lbl in labels):
                    continue
                if job_state(doc, str(key), ctx, memo) is False or _approved(job, ctx):
                    continue
                why = ("the base repository's token and secrets, whatever it checks out"
                       if event == "pull_request_target" else
                       "every later push of the fork's author runs it too (its if: is not false on synchronize)")
                out.append((RULE, f"{rel}:{str(key)[:80]}: runs on self-hosted runner(s) {hosted[:4]} under {event} "
                            f"from a fork: {why}; guard it (github.event.pull_request.head.repo.full_name == "
                            "github.repository, or run it only on the labelled event) or add an environment with "
                            "required reviewers (docs/fork-safety.md)", rel, lines.get(rel, {}).get(f"job:{key}", 0)))
    return out
