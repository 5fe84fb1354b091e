"""The audits' closing lines and report printer; ``format_table`` is impl.table's (torch-free)."""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

from impl.table import format_table  # noqa: F401 (re-exported: impl/ and ci/ print tables one way)


def format_rules(rules: Mapping[str, str], violations: Mapping[str, Sequence[str]],
                 skipped: Mapping[str, str] | None = None) -> list[str]:
    """An audit's closing lines: each rule's [PASS]/[FAIL] (or [----] with why, if skipped) and findings,
    the verdict."""
    skipped = skipped or {}
    lines = ["", "rules:"]
    for code, title in rules.items():
        found = violations[code]
        if code in skipped and not found:
            lines.append(f"  [----] ({code}) {title}: {skipped[code]}")
            continue
        lines.append(f"  [{'FAIL' if found else 'PASS'}] ({code}) {title}")
        lines += [f"         - {v}" for v in found]
    failed = sum(1 for v in violations.values() if v)
    lines += ["", f"audit: {'OK' if not failed else f'{failed} of {len(rules)} rule(s) failed'}"]
    return lines


def print_report(ok: bool, fmt: str, as_json: Callable[[], dict[str, Any]], as_text: Callable[[], str]) -> int:
    """Print an audit report as ``--format`` asks (json or text); the exit status: 0 if ``ok``, else 1."""
    print(json.dumps(as_json(), indent=2) if fmt == "json" else as_text())
    return 0 if ok else 1
