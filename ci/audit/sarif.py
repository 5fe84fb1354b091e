"""``--format sarif``: the audit's findings as SARIF 2.1.0, the log GitHub code scanning uploads.

What GitHub needs and this writes:
  - ``tool.driver.rules``: every registered rule, with its title (shortDescription), what it
    prevents (fullDescription), and help text (title, why, example, output) from ``ci.audit.rules``;
  - one result per finding, its level from the finding's severity (error / warning / note);
  - at least one location per result, a repo-relative URI under ``uriBaseId`` ``%SRCROOT%`` with a
    region; a finding with no location points at ``fallback`` (a workflow or registration file),
    and an unknown line is line 1;
  - ``partialFingerprints`` from the finding's key (rule, hardware, suite, schedule), never from a
    line number, so an alert survives edits elsewhere in the file.
A test validates the output against the OASIS SARIF 2.1.0 schema. Imports nothing from ``impl/``,
test code or torch.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable
from urllib.parse import quote

from ci.audit.findings import Finding, Location, Rule, RuleRegistry

SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT = "dsparkAuditKey/v1"


def fingerprint(finding: Finding) -> str:
    """A stable hash of the finding's key: the same finding on a later commit hashes the same."""
    return hashlib.sha256("\x1f".join(finding.key).encode("utf-8", "surrogatepass")).hexdigest()


def rule_name(rule_id: str) -> str:
    """``dormant-suite`` -> ``DormantSuite`` (SARIF's friendly name)."""
    return "".join(part[:1].upper() + part[1:] for part in rule_id.replace("_", "-").split("-"))


def rule_descriptor(rule: Rule) -> dict[str, Any]:
    text = (f"{rule.title}\n\nWhy: {rule.prevents}\n\nExample:\n{rule.example}\n\n"
            f"Output:\n{rule.output}")
    markdown = (f"**{rule.title}**\n\n{rule.prevents}\n\nExample:\n\n```\n{rule.example}\n```\n\n"
                f"Output:\n\n```\n{rule.output}\n```")
    return {
        "id": rule.id,
        "name": rule_name(rule.id),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.prevents},
        "help": {"text": text, "markdown": markdown},
        "defaultConfiguration": {"level": rule.default_severity},
        "properties": {"tags": ["ci", "test-registry"]},
    }


def _uri(path: str) -> str:
    """A repo-relative POSIX path as a relative URI reference (spaces and the like percent-encoded). A
    backslash or a colon is a character of a POSIX file name (``a\\b.yml``, ``c:x.yml``), encoded
    (``%5C``, ``%3A``: no colon can read as a scheme), never a refusal: the names come from the tree."""
    if not path or path.startswith("/"):
        raise ValueError(f"finding location {path!r}: expected a repo-relative POSIX path")
    path = path.removeprefix("./")
    try:   # a file name that is not UTF-8 (kept as surrogates): its own bytes, percent-encoded
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = path.encode("utf-8", "surrogatepass")
    return quote(raw, safe="/-._~")


def _location(loc: Location, prefix: str) -> dict[str, Any]:
    return {"physicalLocation": {
        "artifactLocation": {"uri": _uri(f"{prefix}/{loc.path}" if prefix else loc.path), "uriBaseId": SRCROOT},
        "region": {"startLine": loc.line if loc.line > 0 else 1},
    }}


def _result(finding: Finding, rule_index: int, fallback: Location, occurrence: int,
            baseline_state: str | None, prefix: str, suppressed_by: str | None = None) -> dict[str, Any]:
    print_fp = fingerprint(finding) + (f":{occurrence}" if occurrence > 1 else "")
    properties: dict[str, Any] = {"hardware": finding.hardware, "suite": finding.suite,
                                  "schedule": finding.schedule}
    message = finding.message
    if finding.why_unproven:
        properties["whyUnproven"] = finding.why_unproven
        message = f"{message} (not proven: {finding.why_unproven})"
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": rule_index,
        "level": finding.severity,
        "message": {"text": message},
        "locations": [_location(loc, prefix) for loc in (finding.locations or (fallback,))],
        "partialFingerprints": {FINGERPRINT: print_fp},
        "properties": properties,
    }
    if baseline_state:
        result["baselineState"] = baseline_state
    if suppressed_by is not None:  # known debt: shown, never counted as open
        result["suppressions"] = [{"kind": "external", "status": "accepted",
                                   "justification": f"a known finding in the audit baseline {suppressed_by}"}]
    return result


def sarif_log(findings: Iterable[Finding], rules: RuleRegistry, *, tool_version: str, fallback: Location,
              baseline_state: str | None = None, prefix: str = "", baselined: Iterable[Finding] = (),
              baseline_path: str = "") -> dict[str, Any]:
    """The SARIF log of ``findings``. ``baseline_state`` ("new") marks results when a baseline filtered them;
    ``prefix`` is the audited root's path inside its git repository ("" at the top), put before every path
    so that GitHub finds the file when the audit ran on a subfolder. ``baselined``: the findings the
    baseline ``baseline_path`` suppressed, listed after the others as ``unchanged`` results carrying an
    external, accepted suppression (``--show-baselined``; without it they are left out)."""
    descriptors = [rule_descriptor(rule) for rule in rules]
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    seen: dict[str, int] = {}
    results = []
    tagged = [(f, baseline_state, None) for f in findings] + [(f, "unchanged", baseline_path) for f in baselined]
    for finding, state, suppressed_by in tagged:
        if finding.rule not in index:
            raise KeyError(f"finding of unknown rule {finding.rule!r}; registered: {sorted(index)}")
        fp = fingerprint(finding)
        seen[fp] = seen.get(fp, 0) + 1
        results.append(_result(finding, index[finding.rule], fallback, seen[fp], state, prefix.strip("/"),
                               suppressed_by))
    return {
        "$schema": SARIF_SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "dspark-audit", "version": tool_version, "rules": descriptors}},
            "columnKind": "utf16CodeUnits",
            "results": results,
        }],
    }
