"""``--format json``: the audit's findings as a versioned JSON document.

The schema is ``ci/schemas/audit-findings.schema.json`` (JSON Schema 2020-12); a per-commit test
validates real output against it. Bump ``JSON_VERSION`` (and the schema's ``version`` const) when a
field changes meaning or disappears; an added optional field keeps the version.
Imports nothing from ``impl/``, test code or torch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ci.baseline import BaselineComparison, entry_of
from ci.findings import SEVERITIES, Finding

JSON_FORMAT = "dspark-audit-findings"
JSON_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "audit-findings.schema.json"


def finding_json(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity,
        "hardware": finding.hardware,
        "suite": finding.suite,
        "schedule": finding.schedule,
        "message": finding.message,
        "locations": [{"path": loc.path, "line": loc.line if loc.line > 0 else None} for loc in finding.locations],
        "why_unproven": finding.why_unproven,
    }


def findings_document(findings: Iterable[Finding], *, adapter: str, tool_version: str, fail_on: str, ok: bool,
                      comparison: BaselineComparison | None = None,
                      baseline_path: str | None = None) -> dict[str, Any]:
    """The JSON document: ``findings`` are those to report (the baseline's new ones when there is one)."""
    findings = list(findings)
    baseline = None
    if comparison is not None and baseline_path is not None:
        baseline = {"path": baseline_path, "suppressed": len(comparison.suppressed),
                    "stale": [entry_of(k) for k in comparison.stale],
                    "grown": [{**entry_of(k), "known": known, "found": now} for k, known, now in comparison.grown]}
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "tool": {"name": "dspark-audit", "version": tool_version},
        "adapter": adapter,
        "fail_on": fail_on,
        "ok": ok,
        "counts": {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES},
        "findings": [finding_json(f) for f in findings],
        "baseline": baseline,
    }
