"""masked-step: nothing between a workflow step and the runner can turn a failure green.

The masking analysis itself is shared (``ci.github.masking``, run by the workflow scan for every
rule); this module turns its result into findings. ``own(report)``: each masked step, and the nox
suite session's own masking (``ci.audit.nox_session``) when a workflow runs suites through nox.
``foreign(report)``: each masked step; a mask on a run-time condition is a warning.
"""
from __future__ import annotations

from pathlib import Path

from ci.audit.findings import Rule
from ci.audit.keys import masked_key, masked_steps, step_location
from ci.audit.nox_session import suite_session_problems
from ci.github.scan import MAX_WORKFLOW_BYTES, workflow_files
from ci.safe_files import UnreadableFile, read_inside

RULE = Rule(
    "masked-step",
    "nothing between a workflow step and the runner can turn a failure green",
    "continue-on-error, `|| true`, a pipe without pipefail: a red suite reported green",
    "continue-on-error: true on the step that runs the suite",
    "error   [masked-step] MASKED ...: step continue-on-error: True: a failure is reported as success",
)


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    steps = masked_steps(report.scan)
    for masked in report.scan.masked:   # keyed by what the step runs, never by its job or step name
        report.add(RULE.id, f"MASKED {masked}", **masked_key(steps.get(masked, [])))
    if any(r.kind in ("job", "group") for r in report.scan.refs) and _uses_nox(report.registry.root):
        report.extend(RULE.id, [f"MASKED {p}" for p in suite_session_problems(report.registry.root)])


def _uses_nox(root: Path) -> bool:
    """Whether a workflow mentions nox (an unreadable one is reported by unreadable-input, not read here)."""
    for path in workflow_files(root):
        try:
            if "nox" in read_inside(root, path, MAX_WORKFLOW_BYTES):
                return True
        except UnreadableFile:
            continue
    return False


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    scan = report.scan
    steps = masked_steps(scan)
    for masked in scan.masked:
        refs = steps.get(masked, [])
        key = masked_key(refs)   # the baseline key: what the step runs, never its job or step name
        where = step_location(masked, scan, refs)
        if masked in scan.masked_unproven:
            report.add(RULE.id, f"MASKED {masked}", severity="warning", locations=where,
                       why_unproven="the condition is known only at run time", **key)
        else:
            report.add(RULE.id, f"MASKED {masked}", locations=where, **key)
