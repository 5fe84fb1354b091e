"""Adopting the audit on a repository that already has debt: a baseline of known findings.

A baseline is the set of finding keys ``(rule, hardware, suite, schedule)`` (``Finding.key``) that
were present when it was written. It never records line numbers, messages or paths, so an edit
elsewhere in a file does not turn a known finding into a new one. Comparing a run with it:

    new         found now, not in the baseline        (these fail the run)
    suppressed  found now, and in the baseline        (known debt)
    stale       in the baseline, not found now        (debt paid: delete the entry;
                                                       fails only with --strict-baseline)

Several findings can share a key (a rule that is not about one suite leaves hardware, suite and
schedule empty). The entry then carries ``count``; when a run finds more of them than that, the
baseline cannot tell which one is new, so every finding of that key is reported as new ("grown").

The file is JSON, written the same way every time so that it diffs well: a version field, the
adapter it was written for, and one entry per line, sorted::

    {
      "version": 1,
      "adapter": "sglang",
      "entries": [
        {"rule": "dormant-suite", "hardware": "amd", "suite": "nightly-amd-...", "schedule": "nightly"},
        {"rule": "masked-step", "hardware": "", "suite": "", "schedule": "", "count": 3}
      ]
    }

Imports nothing from ``impl/``, test code or torch.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ci.findings import Finding
from ci.safe_files import UnreadableFile, UnsafeOutput, read_inside, write_atomic

MAX_BASELINE_BYTES = 16 * 1024 * 1024

BASELINE_VERSION = 1
KEY_FIELDS = ("rule", "hardware", "suite", "schedule")
Key = tuple[str, str, str, str]


class BaselineError(ValueError):
    """A baseline file that cannot be read: the message names the file and what was expected."""


@dataclass(frozen=True)
class Baseline:
    adapter: str
    counts: Mapping[Key, int]       # key -> how many findings had it

    @property
    def keys(self) -> frozenset[Key]:
        return frozenset(self.counts)


@dataclass(frozen=True)
class BaselineComparison:
    new: tuple[Finding, ...]
    suppressed: tuple[Finding, ...]
    stale: tuple[Key, ...]                          # sorted
    grown: tuple[tuple[Key, int, int], ...] = ()    # (key, count in the baseline, found now), sorted


def entry_of(key: Key) -> dict[str, str]:
    return dict(zip(KEY_FIELDS, key))


def baseline_text(findings: Iterable[Finding], adapter: str) -> str:
    """The baseline file for ``findings``: sorted, one entry per line, ends with a newline."""
    counts = Counter(f.key for f in findings)
    lines = [json.dumps({**entry_of(k), **({"count": counts[k]} if counts[k] > 1 else {})}, ensure_ascii=False)
             for k in sorted(counts)]
    body = ",\n".join(f"    {line}" for line in lines)
    entries = f"[\n{body}\n  ]" if lines else "[]"
    return (f'{{\n  "version": {BASELINE_VERSION},\n  "adapter": {json.dumps(adapter)},\n'
            f'  "entries": {entries}\n}}\n')


def write_baseline(path: str | Path, findings: Iterable[Finding], adapter: str) -> int:
    """Write the baseline of ``findings`` to ``path``; returns the number of entries."""
    text = baseline_text(findings, adapter)
    path = Path(path)
    try:
        write_atomic(path, text)   # never half a baseline, never through a planted symlink
    except UnsafeOutput as exc:
        raise BaselineError(f"--write-baseline {exc}") from None
    except OSError as exc:
        raise BaselineError(f"--write-baseline {path}: cannot write: {exc.strerror or exc}") from None
    return len(json.loads(text)["entries"])


def parse_baseline(text: str, where: str) -> Baseline:
    """Read a baseline file's text; ``where`` names it in errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise BaselineError(f"{where}: expected a JSON object with version, adapter, entries")
    if data.get("version") != BASELINE_VERSION:
        raise BaselineError(f"{where}: version {data.get('version')!r} is not supported (expected {BASELINE_VERSION})")
    adapter, entries = data.get("adapter"), data.get("entries")
    if not isinstance(adapter, str) or not adapter:
        raise BaselineError(f"{where}: 'adapter' must be a non-empty string, got {adapter!r}")
    if not isinstance(entries, list):
        raise BaselineError(f"{where}: 'entries' must be a list, got {type(entries).__name__}")
    counts: dict[Key, int] = {}
    for i, entry in enumerate(entries):
        if (not isinstance(entry, dict) or not set(KEY_FIELDS) <= set(entry) <= {*KEY_FIELDS, "count"}
                or not all(isinstance(entry[k], str) for k in KEY_FIELDS) or not entry["rule"]):
            raise BaselineError(f"{where}: entries[{i}] must be an object with the string fields "
                                f"{', '.join(KEY_FIELDS)} (rule non-empty) and optionally count, got {entry!r}")
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise BaselineError(f"{where}: entries[{i}].count must be a positive integer, got {count!r}")
        key = tuple(entry[k] for k in KEY_FIELDS)
        if key in counts:
            raise BaselineError(f"{where}: entries[{i}] repeats {entry_of(key)} (use count)")
        counts[key] = count
    return Baseline(adapter, counts)


def load_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    try:   # often a file of the audited checkout: a regular file in its own folder, bounded (never /dev/zero)
        text = read_inside(path.parent, path, MAX_BASELINE_BYTES)
    except UnreadableFile as exc:
        raise BaselineError(f"--baseline {path}: cannot read: {exc.reason}") from None
    return parse_baseline(text, f"--baseline {path}")


def compare(findings: Iterable[Finding], baseline: Baseline | None) -> BaselineComparison:
    """Split ``findings`` into new and suppressed; list the baseline's stale keys and the grown ones."""
    findings = tuple(findings)
    if baseline is None:
        return BaselineComparison(findings, (), ())
    found = Counter(f.key for f in findings)
    known = baseline.counts
    new = tuple(f for f in findings if found[f.key] > known.get(f.key, 0))
    suppressed = tuple(f for f in findings if found[f.key] <= known.get(f.key, 0))
    stale = tuple(sorted(k for k in known if k not in found))
    grown = tuple(sorted((k, known[k], n) for k, n in found.items() if k in known and n > known[k]))
    return BaselineComparison(new, suppressed, stale, grown)
