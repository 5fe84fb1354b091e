"""The measured-durations file (``ci/durations.json``): its format, read and written here.

The file maps hardware label -> registered node id -> seconds (all its parameters
together). Plans (``ci.registry.jobs``) read it; ``python -m ci.registry.durations`` refreshes it from JUnit
files. Imports nothing of the project but ci.safe_files (stdlib only), no torch, no test code.
"""
from __future__ import annotations

from ci.input_errors import InputError, json_input

import json
from collections.abc import Mapping
from pathlib import Path

from ci.safe_files import read_inside
from ci.safe_yaml import short

DURATIONS_PATH = "ci/durations.json"
ABOUT = ("measured seconds per registered test (all its parameters), per hardware label; "
         "plans fall back to est_time; refresh: python -m ci.registry.durations --from <JUnit dir>")
REGISTRATION_PROPERTY = "ci.registration"   # testcase property the pytest plugin writes

Durations = dict[str, dict[str, float]]       # label -> node id -> seconds


class DurationsError(InputError):
    """ci/durations.json is malformed, or a refresh found nothing to read."""


def parse(text: str, *, path: str = DURATIONS_PATH) -> Durations:
    data = json_input(text, path, DurationsError)
    table = data.get("hardware") if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise DurationsError(f"{path}: expected {{\"hardware\": {{label: {{node_id: seconds}}}}}}")
    out: Durations = {}
    for label, tests in table.items():
        if not isinstance(tests, dict):
            raise DurationsError(f"{path}: hardware {short(label)}: expected {{node_id: seconds}}")
        for node_id, seconds in tests.items():
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
                raise DurationsError(f"{path}: {short(label)} {short(node_id)}: seconds must be a non-negative number")
        out[str(label)] = {str(k): float(v) for k, v in tests.items()}
    return out


def load(root: str | Path) -> Durations:
    """The committed durations, or an empty table when the file does not exist."""
    path = Path(root) / DURATIONS_PATH
    if not path.is_file():
        return {}
    return parse(read_inside(root, path))   # an audited tree's file: never a link out of it, never /dev/zero


def dump(durations: Mapping[str, Mapping[str, float]]) -> str:
    table = {label: {k: round(v, 2) for k, v in sorted(tests.items())}
             for label, tests in sorted(durations.items()) if tests}
    return json.dumps({"about": ABOUT, "hardware": table}, indent=1) + "\n"
