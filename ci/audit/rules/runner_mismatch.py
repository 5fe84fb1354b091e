"""runner-mismatch: every suite runs on the runner its name / catalog entry asks for.

``own(report)``: a workflow job runs a job or group whose hardware label the catalog (ci/hardware.yaml)
maps to runner labels the job's ``runs-on`` lacks. ``foreign(report)``: a step runs a suite on a
runner its name rules out (the adapter's ``runner_mismatch``); more GPUs than needed is a note.
"""
from __future__ import annotations

import re

from ci.adapters.sglang import runner_mismatch
from ci.audit.findings import Location, Rule
from ci.audit.keys import target_key
from ci.github.scan import StepRun
from ci.numbers import whole_number

RULE = Rule(
    "runner-mismatch",
    "every suite runs on the runner its name / catalog entry asks for",
    "an 8-GPU suite sent to a 1-GPU runner fails or skips on every run",
    "runs-on: ${{ inputs.runner }} with runner: linux-mi325-gpu-1 for suite stage-c-test-8-gpu-amd",
    "error   [runner-mismatch] HARDWARE ...: the suite needs 8 GPU(s), runner linux-mi325-gpu-1 has 1",
)


def _runner_problem(report, ref: StepRun, label: str) -> str | None:
    """The workflow job must ask for the runner labels the catalog gives the hardware it runs."""
    hardware = report.registry.catalog.hardware.get(label)
    asked = report.scan.runs_on.get((ref.workflow, ref.wf_job), ())
    if hardware is None or any("${{" in a for a in asked) or set(hardware.runs_on) <= set(asked):
        return None
    return (f"{ref.workflow}:{ref.wf_job}: runs {ref.kind} {ref.target} on runs-on {list(asked)}, but "
            f"{report.registry.catalog.path} gives {label} the runner(s) {list(hardware.runs_on)}")


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport``."""
    for ref in report.scan.refs:
        label = ref.target.split("/")[1] if ref.target.count("/") >= 1 else ""
        problem = _runner_problem(report, ref, label)
        if problem:
            report.add(RULE.id, problem, hardware=label, suite=ref.target)


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    for ref in report.refs:
        schedule, hw, suite = ref.target.split("/", 2)
        problem = runner_mismatch(suite, hw, ref.runners or report.scan.runs_on.get((ref.workflow, ref.wf_job), ()))
        if problem:
            wasteful = re.search(r"needs (\d+) GPU\(s\), runner \S+ has (\d+)", problem)
            needs, has = (whole_number(g) for g in wasteful.groups()) if wasteful else (None, None)
            note = needs is not None and has is not None and has > needs
            report.add(RULE.id, f"HARDWARE {ref.where}: runs {ref.target}, but {problem}"
                       + (" (more GPUs than it needs: wasteful, not wrong)" if note else ""),
                       severity="note" if note else None,
                       locations=(Location(ref.workflow, ref.line),), **target_key(ref.target))
