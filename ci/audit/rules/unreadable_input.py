"""unreadable-input: every workflow the audit must read is a regular UTF-8 file inside the tree, under the
size cap, with aliases and nesting within bounds.

``from_scan(report, message, path, line, audit)``: the workflow scan (``ci.github.scan``) finds a
file it must not or cannot read (``ci.safe_files``, ``ci.safe_yaml``) while it reads the workflows,
one pass for every rule, and records ``(rule id, message, path, line)``;
``ci.audit.rules.add_scan_findings`` hands each of this rule's items here, in the scan's order, for both
audits. Keyed by the path (renaming a job or a step keeps a baseline).
"""
from __future__ import annotations

from ci.audit.findings import Location, Rule

RULE = Rule(
    "unreadable-input",
    "every workflow the audit must read is a regular UTF-8 file inside the tree, "
    "under the size cap, with aliases and nesting within bounds",
    "a workflow that is a link to another file, a device or an alias bomb: read, it leaks or hangs the audit; "
    "skipped silently, it hides a run",
    ".github/workflows/ci.yml -> /etc/hostname",
    "error   [unreadable-input] .github/workflows/ci.yml: a symlink that resolves outside the audited tree "
    "(not read): a workflow the audit cannot read may hide a run",
)


def from_scan(report, message: str, path: str, line: int, audit: str) -> None:
    """One item of the scan's ``input_findings``; ``audit``: "own" or "foreign"."""
    report.add(RULE.id, message, suite=path, locations=(Location(path, line),))
