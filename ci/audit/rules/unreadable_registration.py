"""unreadable-registration: every registration is readable by the repository's own runner (foreign audit only).

``foreign(report)``: the adapter's collection problems (``file:line: ...``), keyed by the registered file.
"""
from __future__ import annotations

from ci.audit.findings import Rule

RULE = Rule(
    "unreadable-registration",
    "every registration is readable by the repository's own runner",
    "a registration call inside a function or with a computed argument: the runner never sees it",
    "if FAST: register_cuda_ci(est_time=60, suite='s')",
    "error   [unreadable-registration] test/registered/x.py:4: register_cuda_ci(...) "
    "is not a module-level statement",
)


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    for problem in report.suites.problems:   # "file:line: ...": keyed by the registered file
        report.add(RULE.id, problem, suite=problem.split(":", 1)[0])
