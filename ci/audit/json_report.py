"""``--format json``: the audit's findings as a versioned JSON document.

The schema is ``ci/schemas/audit-findings.schema.json`` (JSON Schema 2020-12, shipped as package
data); a per-commit test validates the output of ``dspark-audit``, ``python -m ci.audit`` and
``nox -s audit`` (one program) against it. Version 2 added each finding's ``state``, the
baseline's ``worse`` and ``baselined`` lists, ``rules`` and ``tables``; the baseline's ``outdated`` list
came later (optional in the schema, so version 2 documents of older tools stay valid).
Bump ``JSON_VERSION`` (and the schema's ``version`` const) when a
field changes meaning or disappears; an added optional field keeps the version.
Imports nothing from ``impl/``, test code or torch.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ci.audit.baseline import BaselineComparison, entry_of
from ci.audit.findings import SEVERITIES, Finding
from ci.audit.rules import REGISTRY as RULES

JSON_FORMAT = "dspark-audit-findings"
JSON_VERSION = 2
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "schemas" / "audit-findings.schema.json"


def finding_json(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity,
        "hardware": finding.hardware,
        "suite": finding.suite,
        "schedule": finding.schedule,
        "state": finding.state,
        "message": finding.message,
        "locations": [{"path": loc.path, "line": loc.line if loc.line > 0 else None} for loc in finding.locations],
        "why_unproven": finding.why_unproven,
    }


def findings_document(findings: Iterable[Finding], *, adapter: str, tool_version: str, fail_on: str, ok: bool,
                      comparison: BaselineComparison | None = None, baseline_path: str | None = None,
                      rules: Sequence[str] = (), skipped: Mapping[str, str] | None = None,
                      tables: Mapping[str, list] | None = None) -> dict[str, Any]:
    """The JSON document: ``findings`` are those to report (the baseline's new ones when there is one);
    ``rules`` the adapter's rule ids (``skipped``: those not checked); ``tables`` the text report's tables."""
    findings = list(findings)
    skipped = skipped or {}
    baseline = None
    known: list[Finding] = []
    if comparison is not None and baseline_path is not None:
        known = list(comparison.suppressed)
        baseline = {"path": baseline_path, "suppressed": len(comparison.suppressed),
                    "stale": [entry_of(k) for k in comparison.stale],
                    "grown": [{**entry_of(k), "known": n_known, "found": now} for k, n_known, now in comparison.grown],
                    "worse": [{**entry_of(f.key), "was": was, "now": " ".join(filter(None, (f.severity, f.state)))}
                              for f, was in comparison.worse],
                    "outdated": [{**entry_of(k), "was": was} for k, was in comparison.outdated],
                    "baselined": [finding_json(f) for f in known]}
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
        "rules": {rule: {"title": RULES[rule].title,
                         "checked": rule not in skipped or any(f.rule == rule for f in findings + known),
                         "new": sum(1 for f in findings if f.rule == rule),
                         "baselined": sum(1 for f in known if f.rule == rule)} for rule in rules},
        "tables": dict(tables or {}),
    }
