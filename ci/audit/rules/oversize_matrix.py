"""oversize-matrix: no job's matrix makes more than GitHub's 256 jobs.

``from_scan(report, message, path, line, audit)``: the workflow scan (``ci.github.scan``) finds
a matrix over the cap (``ci.github.matrix``) while it reads the workflows, one pass for every rule, and records
``(rule id, message, path, line)``; ``ci.audit.rules.add_scan_findings`` hands each of this rule's
items here, in the scan's order, for both audits. Keyed by the path (renaming a job or a step keeps
a baseline).
"""
from __future__ import annotations

from ci.audit.findings import Location, Rule

RULE = Rule(
    "oversize-matrix",
    "no job's matrix makes more than GitHub's 256 jobs",
    "GitHub refuses the whole workflow: none of its suites run, and no check turns red",
    "strategy: {matrix: {a: [1..9], b: [1..9], c: [1..9]}}  (729 jobs)",
    "error   [oversize-matrix] .github/workflows/w.yml:j: strategy.matrix of 729 combinations before exclude: "
    "over GitHub's 256-job cap: ...",
)


def from_scan(report, message: str, path: str, line: int, audit: str) -> None:
    """One item of the scan's ``input_findings``; ``audit``: "own" or "foreign"."""
    report.add(RULE.id, message, suite=path, locations=(Location(path, line),))
