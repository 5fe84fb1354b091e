"""Adopting the audit on a repository that already has debt: a baseline of known findings and of
the suites that ran.

A baseline records, for each finding key ``(rule, hardware, suite, schedule)`` (``Finding.key``)
present when it was written, the worst severity and run state (``ci.audit.findings.STATES``) seen under
it, and the suites that were in the good ``run`` state (run by a triggered, unmasked step on their schedule).
It never records line numbers, messages, job, step or workflow-file names, so an edit or a rename
elsewhere does not turn a known finding into a new one. Comparing a run with it:

    new         found now, not in the baseline; or in it, but with a worse severity or state
                (a baselined warning that became an error; manual-only that became dormant); or a
                suite the baseline records as run that now has a finding ("regressed": run ->
                unproven, manual-only, partial or dormant is an error whatever the finding's own
                severity)                                               (these fail the run)
    suppressed  found now, in the baseline, no worse                    (known debt: "baselined")
    stale       in the baseline, not found now                          (debt paid: delete the entry;
                                                                         fails only with --strict-baseline)
    outdated    a stale entry about a suite's run state (dormant-suite) (fails by default: rewrite the
                whose suite is now run                                   baseline, so that it records the
                                                                         suite under run; left in, the entry
                                                                         would hide the suite if it stopped
                                                                         running again)

Several findings can share a key (a rule that is not about one target leaves hardware, suite and
schedule empty). The entry then carries ``count``; when a run finds more of them than that, the
baseline cannot tell which one is new, so every finding of that key is reported as new ("grown").

The file is JSON, written the same way every time so that it diffs well: a version field, the
adapter it was written for, one entry per line, sorted, then the suites that ran::

    {
      "version": 2,
      "adapter": "sglang",
      "entries": [
        {"rule": "dormant-suite", "hardware": "amd", "suite": "nightly-amd-x", "schedule": "nightly",
         "severity": "warning", "state": "manual-only"},
        {"rule": "masked-step", "hardware": "", "suite": "", "schedule": "", "severity": "error", "count": 3}
      ],
      "run": [
        {"hardware": "cuda", "suite": "stage-a-test-1-gpu", "schedule": "per-commit"}
      ]
    }

A version 1 file (keys only: no severity, no state, no suites that ran) is refused with one line
that says how to rewrite it: read as version 2 it would hide exactly the regressions version 2
exists to catch (docs/audit-baseline.md).

Imports nothing from ``impl/``, test code or torch.
"""
from __future__ import annotations

from ci.input_errors import InputError, json_input

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ci.audit.findings import SEVERITIES, STATES, Finding, SuiteKey, severity_rank, state_rank
from ci.safe_files import UnreadableFile, UnsafeOutput, read_inside, write_atomic
from ci.safe_yaml import short

MAX_BASELINE_BYTES = 16 * 1024 * 1024

BASELINE_VERSION = 2
KEY_FIELDS = ("rule", "hardware", "suite", "schedule")
SUITE_FIELDS = ("hardware", "suite", "schedule")
Key = tuple[str, str, str, str]


class BaselineError(InputError):
    """A baseline file that cannot be read: the message names the file and what was expected."""


@dataclass(frozen=True)
class Entry:
    """What the baseline knows under one key: how many findings, their worst severity and state."""
    count: int
    severity: str
    state: str = ""


@dataclass(frozen=True)
class Baseline:
    adapter: str
    entries: Mapping[Key, Entry]
    run: frozenset[SuiteKey] = frozenset()      # suites a triggered, unmasked step ran, on schedule

    @property
    def counts(self) -> dict[Key, int]:
        return {k: e.count for k, e in self.entries.items()}

    @property
    def keys(self) -> frozenset[Key]:
        return frozenset(self.entries)


@dataclass(frozen=True)
class BaselineComparison:
    new: tuple[Finding, ...]
    suppressed: tuple[Finding, ...]
    stale: tuple[Key, ...]                          # sorted
    grown: tuple[tuple[Key, int, int], ...] = ()    # (key, count in the baseline, found now), sorted
    worse: tuple[tuple[Finding, str], ...] = ()     # new because worse than the baseline: (finding, was)
    outdated: tuple[tuple[Key, str], ...] = ()      # stale run-state entries of suites that run now: (key, was)


def entry_of(key: Key) -> dict[str, str]:
    return dict(zip(KEY_FIELDS, key))


def suite_key(finding: Finding) -> SuiteKey:
    return (finding.hardware, finding.suite, finding.schedule)


def _worst(findings: list[Finding]) -> Entry:
    severity = max((f.severity for f in findings), key=severity_rank)
    state = max((f.state for f in findings), key=state_rank)
    return Entry(len(findings), severity, state)


def baseline_text(findings: Iterable[Finding], adapter: str, run: Iterable[SuiteKey] = ()) -> str:
    """The baseline file for ``findings`` and the suites ``run``: sorted, one entry per line, ends with a newline."""
    by_key: dict[Key, list[Finding]] = {}
    for f in findings:
        by_key.setdefault(f.key, []).append(f)
    lines = []
    for key in sorted(by_key):
        entry = _worst(by_key[key])
        fields = {**entry_of(key), "severity": entry.severity}
        if entry.state:
            fields["state"] = entry.state
        if entry.count > 1:
            fields["count"] = entry.count
        lines.append(json.dumps(fields, ensure_ascii=False))
    suites = [json.dumps(dict(zip(SUITE_FIELDS, k)), ensure_ascii=False) for k in sorted(set(run))]

    def block(items: list[str]) -> str:
        body = ",\n".join(f"    {line}" for line in items)
        return f"[\n{body}\n  ]" if items else "[]"

    return (f'{{\n  "version": {BASELINE_VERSION},\n  "adapter": {json.dumps(adapter)},\n'
            f'  "entries": {block(lines)},\n  "run": {block(suites)}\n}}\n')


def write_baseline(path: str | Path, findings: Iterable[Finding], adapter: str, run: Iterable[SuiteKey] = ()) -> int:
    """Write the baseline of ``findings`` (and the suites ``run``) to ``path``; returns the number of entries."""
    text = baseline_text(findings, adapter, run)
    path = Path(path)
    try:
        write_atomic(path, text)   # never half a baseline, never through a planted symlink
    except UnsafeOutput as exc:
        raise BaselineError(f"--write-baseline {exc}") from None
    except OSError as exc:
        raise BaselineError(f"--write-baseline {path}: cannot write: {exc.strerror or exc}") from None
    return len(json.loads(text)["entries"])


def _entry(where: str, i: int, entry: object) -> tuple[Key, Entry]:
    required = {*KEY_FIELDS, "severity"}
    if (not isinstance(entry, dict) or not required <= set(entry) <= {*required, "count", "state"}
            or not all(isinstance(entry[k], str) for k in KEY_FIELDS) or not entry["rule"]):
        raise BaselineError(f"{where}: entries[{i}] must be an object with the string fields "
                            f"{', '.join(KEY_FIELDS)} (rule non-empty), severity, and optionally state and count, "
                            f"got {short(entry)}")
    if entry["severity"] not in SEVERITIES:
        raise BaselineError(f"{where}: entries[{i}].severity must be one of {list(SEVERITIES)}, "
                            f"got {short(entry['severity'])}")
    state = entry.get("state", "")
    if state not in ("", *STATES):
        raise BaselineError(f"{where}: entries[{i}].state must be one of {list(STATES)}, got {short(state)}")
    count = entry.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise BaselineError(f"{where}: entries[{i}].count must be a positive integer, got {short(count)}")
    return tuple(entry[k] for k in KEY_FIELDS), Entry(count, entry["severity"], state)


def parse_baseline(text: str, where: str) -> Baseline:
    """Read a baseline file's text; ``where`` names it in errors."""
    data = json_input(text, where, BaselineError)
    if not isinstance(data, dict):
        raise BaselineError(f"{where}: expected a JSON object with version, adapter, entries, run")
    if data.get("version") == 1:
        raise BaselineError(f"{where}: version 1 records no severities, states or suites that ran, so it cannot "
                            "tell a regression from known debt: rewrite it with --write-baseline FILE and review "
                            "the diff (docs/audit-baseline.md)")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"{where}: version {short(data.get('version'))} is not supported "
                            f"(expected {BASELINE_VERSION})")
    adapter, entries, run = data.get("adapter"), data.get("entries"), data.get("run", [])
    if not isinstance(adapter, str) or not adapter:
        raise BaselineError(f"{where}: 'adapter' must be a non-empty string, got {short(adapter)}")
    if not isinstance(entries, list):
        raise BaselineError(f"{where}: 'entries' must be a list, got {type(entries).__name__}")
    if not isinstance(run, list):
        raise BaselineError(f"{where}: 'run' must be a list, got {type(run).__name__}")
    known: dict[Key, Entry] = {}
    for i, raw in enumerate(entries):
        key, entry = _entry(where, i, raw)
        if key in known:
            raise BaselineError(f"{where}: entries[{i}] repeats {short(entry_of(key), 240)} (use count)")
        known[key] = entry
    suites: set[SuiteKey] = set()
    for i, raw in enumerate(run):
        if not isinstance(raw, dict) or set(raw) != set(SUITE_FIELDS) or not all(
                isinstance(raw[k], str) and raw[k] for k in SUITE_FIELDS):
            raise BaselineError(f"{where}: run[{i}] must be an object with the non-empty string fields "
                                f"{', '.join(SUITE_FIELDS)}, got {short(raw)}")
        suites.add(tuple(raw[k] for k in SUITE_FIELDS))
    for i, (key, entry) in enumerate(known.items()):   # dicts keep order: i is the entry's index
        if entry.state and (key[1], key[2], key[3]) in suites:
            raise BaselineError(f"{where}: entries[{i}] records {short(key[0], 60)} {entry.state} for "
                                f"{short('/'.join((key[3], key[1], key[2])), 240)}, which 'run' lists as run: "
                                "the tool never writes both, and the entry would hide the suite's regression; "
                                "rewrite the baseline with --write-baseline FILE")
    return Baseline(adapter, known, frozenset(suites))


def load_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    try:   # often a file of the audited checkout: a regular file in its own folder, bounded (never /dev/zero)
        text = read_inside(path.parent, path, MAX_BASELINE_BYTES)
    except UnreadableFile as exc:
        raise BaselineError(f"--baseline {path}: cannot read: {exc.reason}") from None
    return parse_baseline(text, f"--baseline {path}")


def _when(schedule: str) -> str:
    return "on a schedule" if schedule == "nightly" else "by pull_request/push"


def regressed(finding: Finding) -> Finding:
    """A finding about a suite the baseline records as run: an error, whatever its own severity. Manual-only,
    partial or dormant is proven: the suite no longer runs on its schedule. Unproven is a run that now
    hangs on a run-time value (``if: vars.RUN_NIGHTLY == 'true'``, ``continue-on-error: ${{ vars.X }}``): a
    warning without a baseline, but against one that knew the suite as run it is the step that lets a
    variable nobody reviews switch the suite off, so it fails too. Intended, it is accepted the way debt is:
    rewrite the baseline (its diff moves the suite from ``run`` to an unproven entry)."""
    head = (f"REGRESSED {finding.schedule}/{finding.hardware}/{finding.suite}: ran {_when(finding.schedule)} "
            f"in the baseline, now {finding.state}: ")
    if finding.state == "unproven":   # keep why_unproven: the run-time value is what the reader must see
        return dataclasses.replace(finding, severity="error", message=head + finding.message)
    return dataclasses.replace(finding, severity="error", message=head + finding.message, why_unproven=None)


def compare(findings: Iterable[Finding], baseline: Baseline | None,
            run_suites: Iterable[SuiteKey] = ()) -> BaselineComparison:
    """Split ``findings`` into new and suppressed; list the baseline's stale keys, the grown ones, and the
    outdated ones: stale entries about a suite's run state whose suite is in ``run_suites`` (the suites in
    state run now). Such an entry must go (the baseline rewritten, recording the suite under ``run``):
    left in, it would suppress the suite's next regression as known debt."""
    findings = tuple(findings)
    if baseline is None:
        return BaselineComparison(findings, (), ())
    found = Counter(f.key for f in findings)
    known = baseline.entries
    new: list[Finding] = []
    suppressed: list[Finding] = []
    worse: list[tuple[Finding, str]] = []
    for f in findings:
        entry = known.get(f.key)
        if entry is None:
            if f.state and suite_key(f) in baseline.run:
                f = regressed(f)
                worse.append((f, "run"))
            new.append(f)
        elif severity_rank(f.severity) > severity_rank(entry.severity) or state_rank(f.state) > state_rank(entry.state):
            was = " ".join(part for part in (entry.severity, entry.state) if part)
            worse.append((f, was))
            new.append(f)
        elif found[f.key] > entry.count:
            new.append(f)
        else:
            suppressed.append(f)
    stale = tuple(sorted(k for k in known if k not in found))
    grown = tuple(sorted((k, known[k].count, n) for k, n in found.items() if k in known and n > known[k].count))
    running = set(run_suites)
    outdated = tuple((k, f"{known[k].severity} {known[k].state}") for k in stale
                     if known[k].state and (k[1], k[2], k[3]) in running)
    return BaselineComparison(tuple(new), tuple(suppressed), stale, grown, tuple(worse), outdated)
