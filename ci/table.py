"""The audits' report printer; ``format_table`` is impl.table's (torch-free). Rule lines: ci/audit/report.py."""
from __future__ import annotations

import json
from typing import Any, Callable

from ci.log_escape import log_safe
from impl.table import format_table  # noqa: F401 (re-exported: impl/ and ci/ print tables one way)


def print_report(ok: bool, fmt: str, as_json: Callable[[], dict[str, Any]], as_text: Callable[[], str]) -> int:
    """Print an audit report as ``--format`` asks (json or text); the exit status: 0 if ``ok``, else 1."""
    print(json.dumps(as_json(), indent=2) if fmt == "json" else log_safe(as_text()))
    return 0 if ok else 1
