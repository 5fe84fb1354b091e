"""fork-on-self-hosted: a job on a self-hosted runner never runs a fork's pull request without a maintainer's
approval of that commit.

``from_scan(report, message, path, line, audit)``: the workflow scan finds these jobs while it reads the
workflows (the analysis is ``ci.github.fork_safety``, one pass for every rule) and records
``(rule id, message, path, line)``; ``ci.audit.rules.add_scan_findings`` hands each of this rule's items
here, in the scan's order. Keyed by what the job exposes (the self-hosted labels and the event), so
renaming a workflow file or a job is not a new finding (docs/audit-baseline.md). In the foreign audit
a finding is a warning: another repository may require approval of every fork run in its settings.
A fork-reachable call of another repository's reusable workflow is a note (not read, so not judged).
"""
from __future__ import annotations

import re

from ci.audit.findings import Location, Rule

RULE = Rule(
    "fork-on-self-hosted",
    "a job on a self-hosted runner never runs a fork's pull request without a "
    "maintainer's approval of that commit",
    "a fork's code (any later push included) on the project's own GPU machines: their tokens, caches, network",
    "on: pull_request; runs-on: linux-h200-gpu-1; if: contains(github.event.pull_request.labels.*.name, 'gpu')",
    "error   [fork-on-self-hosted] .github/workflows/w.yml:gpu: runs on self-hosted runner(s) "
    "['linux-h200-gpu-1'] under pull_request from a fork, every push included: ...",
)


# another repository may require approval of every fork run in its settings, which its files cannot show
FORK_SETTINGS = ("unless the repository's settings require approval of every workflow run from outside "
                 "collaborators (Settings > Actions > fork pull request workflows), which its files cannot show")


# a fork-reachable call of another repository's reusable workflow: not read, so not judged
NOT_READ = "the called workflow is in another repository, which the audit does not read"


def from_scan(report, message: str, path: str, line: int, audit: str) -> None:
    """One item of the scan's ``input_findings``; ``audit``: "own" or "foreign"."""
    remote = re.search(r" -> (\S+): calls a reusable workflow of another repository under (\S+)", message)
    if remote:
        report.add(RULE.id, message, suite=f"{remote.group(1)} under {remote.group(2)}",
                   locations=(Location(path, line),), severity="note", why_unproven=NOT_READ)
        return
    exposed = re.search(r"self-hosted runner\(s\) \[([^\]]*)\] under (\S+)", message)
    key = f"[{exposed.group(1)}] under {exposed.group(2)}" if exposed else "self-hosted"
    unproven = FORK_SETTINGS if audit == "foreign" else None
    report.add(RULE.id, message, suite=key, locations=(Location(path, line),),
               severity="warning" if unproven else None, why_unproven=unproven)
