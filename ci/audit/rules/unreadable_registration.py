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


def problem_file(problem: str, files: set[str]) -> str:
    """The registered file a ``file:line: ...`` problem is about: the longest prefix before a ":" that is a
    file the collection read (a file name may hold ":" itself), else the text before the first ":"."""
    best, at = "", problem.find(":")
    while at >= 0:
        if problem[:at] in files:
            best = problem[:at]
        at = problem.find(":", at + 1)
    return best or problem.split(":", 1)[0]


def foreign(report) -> None:
    """``report``: ``ci.audit.foreign.ForeignReport``."""
    files = set(report.suites.files)
    for problem in report.suites.problems:   # "file:line: ...": keyed by the registered file
        report.add(RULE.id, problem, suite=problem_file(problem, files))
