"""What both audits share: a report that collects :class:`Finding`s, and their text form.

``format_findings(rule_ids, findings)`` prints one line per finding, ``severity [rule-id] message``
(locations and, for warnings, why it was not proven, on the lines below), each rule's PASS/FAIL/WARN,
and the verdict; it takes any list of findings (a baseline may have filtered them).
Imports nothing from ``impl/``, torch or test code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ci.audit.findings import Finding, Location, Severity, SuiteKey, severity_rank
from ci.audit.rules import REGISTRY as RULES

LOCATION_RE = re.compile(r"(?P<path>[\w./-]+\.(?:py|ya?ml|toml|json|cfg)):(?P<line>\d+)")


def locations_in(*texts: str) -> tuple[Location, ...]:
    """Every ``path:line`` named in ``texts``, once, in order (repo-relative as written)."""
    out: dict[tuple[str, int], Location] = {}
    for text in texts:
        for m in LOCATION_RE.finditer(text or ""):
            out.setdefault((m["path"], int(m["line"])), Location(m["path"], int(m["line"])))
    return tuple(out.values())


MAX_MESSAGE = 2000   # characters of one finding's message (text, JSON and SARIF alike)


@dataclass
class FindingCollector:
    """Mixin: ``findings`` plus the rule-keyed view older callers read (``violations[rule_id]``)."""
    findings: list[Finding] = field(default_factory=list)
    run_suites: set[SuiteKey] = field(default_factory=set)   # (hardware, suite, schedule) in state "run"
    _seen: set[tuple[str, str, str]] = field(default_factory=set, repr=False, compare=False)  # (rule, message, sev)

    def add(self, rule: str, message: str, *, severity: Severity | None = None, hardware: str = "",
            suite: str = "", schedule: str = "", locations: Iterable[Location] = (),
            why_unproven: str | None = None, state: str = "") -> Finding | None:
        """Record a finding once (same rule, severity and message); ``severity`` defaults to the rule's."""
        severity = severity or RULES[rule].default_severity
        if len(message) > MAX_MESSAGE:   # text quoted from a crafted file: a finding is read by people
            message = message[:MAX_MESSAGE - 3] + "..."
        if severity == "warning" and not why_unproven:
            raise ValueError(f"[{rule}] a warning must say why it was not proven: {message}")
        if len(self._seen) != len(self.findings):   # the list was changed elsewhere: derive the keys again
            self._seen = {(f.rule, f.message, f.severity) for f in self.findings}
        if (rule, message, severity) in self._seen:   # a set, not a scan: thousands of findings stay linear
            return None
        finding = Finding(rule, severity, message, hardware, suite, schedule,
                          tuple(locations) or locations_in(message), why_unproven, state)
        self.findings.append(finding)
        self._seen.add((rule, message, severity))
        return finding

    def extend(self, rule: str, messages: Iterable[str]) -> None:
        for message in messages:
            self.add(rule, message)

    def of(self, rule: str, severity: Severity | None = None) -> list[Finding]:
        return [f for f in self.findings if f.rule == rule and (severity is None or f.severity == severity)]

    @property
    def violations(self) -> dict[str, list[str]]:
        """rule id -> the messages of its error findings (warnings and notes are in ``findings``)."""
        out: dict[str, list[str]] = {}
        for f in self.findings:
            if f.severity == "error":
                out.setdefault(f.rule, []).append(f.message)
        return _Violations(out)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


class _Violations(dict):
    """A dict that answers [] for a rule with no error findings."""

    def __missing__(self, key: str) -> list[str]:
        RULES[key]   # an unknown id is a KeyError naming the known ones
        return []


def format_findings(rule_ids: Sequence[str], findings: Sequence[Finding],
                    skipped: Mapping[str, str] | None = None, *, baselined: Sequence[Finding] = (),
                    show_baselined: bool = False, fail_on: str = "error") -> list[str]:
    """The closing lines of an audit's text: each rule's status with its findings, then the verdict.
    ``findings`` are those to report (new ones under a baseline); ``baselined`` the ones a baseline
    suppressed: never a silent PASS, each rule says ``baselined (N)`` (``show_baselined`` lists them).
    The verdict is OK only when no finding is at or above ``fail_on``."""
    skipped = skipped or {}
    lines = ["", "rules:"]
    counts = {s: 0 for s in ("error", "warning", "note")}
    for rule_id in rule_ids:
        mine = [f for f in findings if f.rule == rule_id]
        known = [f for f in baselined if f.rule == rule_id]
        title = RULES[rule_id].title
        if rule_id in skipped and not mine and not known:
            lines.append(f"  [----] [{rule_id}] {title}: {skipped[rule_id]}")
            continue
        status = ("FAIL" if any(f.severity == "error" for f in mine) else "WARN" if mine
                  else "BASE" if known else "PASS")
        lines.append(f"  [{status}] [{rule_id}] {title}")
        for f in mine:
            counts[f.severity] += 1
            lines.append(f"         {f.severity:7} [{f.rule}] {f.message}")
            if f.why_unproven:
                lines.append(f"                 not proven: {f.why_unproven}")
        lines += _baselined_lines(rule_id, known, show_baselined)
    others = [f for f in findings if f.rule not in rule_ids]
    for f in others:
        counts[f.severity] += 1
        lines.append(f"         {f.severity:7} [{f.rule}] {f.message}")
    lines += _baselined_lines("", [f for f in baselined if f.rule not in rule_ids], show_baselined)
    level = severity_rank(fail_on)
    blocking = [f for f in findings if severity_rank(f.severity) >= level]
    failed = sorted({f.rule for f in blocking})
    tail = ", ".join(f"{n} {s}(s)" for s, n in counts.items() if n)
    known_text = f"{len(baselined)} baselined" if baselined else ""
    if failed:
        rest = ", ".join(f"{n} {s}(s)" for s, n in counts.items() if n and s != "error")
        if fail_on == "error":
            verdict = f"{counts['error']} error(s) in {len(failed)} of {len(rule_ids)} rule(s)"
        else:
            verdict = f"{len(blocking)} finding(s) at or above {fail_on} in {len(failed)} of {len(rule_ids)} rule(s)"
            rest = ""
        verdict += "; ".join(["", *(t for t in (rest, known_text) if t)])
    else:
        inside = "; ".join(t for t in (tail, known_text) if t)
        verdict = "OK" + (f" ({inside})" if inside else "")
    lines += ["", f"audit: {verdict}"]
    return lines


def _baselined_lines(rule_id: str, known: Sequence[Finding], show: bool) -> list[str]:
    if not known:
        return []
    label = f" [{rule_id}]" if rule_id else ""
    by_severity = ", ".join(f"{n} {s}" for s in ("error", "warning", "note")
                            if (n := sum(1 for f in known if f.severity == s)))
    lines = [f"         baselined ({len(known)}){label}: {by_severity} known to the baseline"
             + ("" if show else " (--show-baselined lists them)")]
    if show:
        lines += [f"           baselined {f.severity:7} [{f.rule}] {f.message}" for f in known]
    return lines


def findings_json(findings: Sequence[Finding]) -> list[dict]:
    return [{"rule": f.rule, "severity": f.severity, "message": f.message, "hardware": f.hardware,
             "suite": f.suite, "schedule": f.schedule,
             "locations": [{"path": loc.path, "line": loc.line} for loc in f.locations],
             "why_unproven": f.why_unproven} for f in findings]
