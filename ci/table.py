"""Plain-text tables for terminal output, and the audits' report printer."""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, right: Sequence[int] = ()) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        parts = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(parts).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def format_rules(rules: Mapping[str, str], violations: Mapping[str, Sequence[str]],
                 skipped: Mapping[str, str] | None = None) -> list[str]:
    """An audit's closing lines: each rule's [PASS]/[FAIL] (or [----] with why, if skipped) and findings, the verdict."""
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
