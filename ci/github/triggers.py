"""When a workflow starts: its triggers, their branch / path / cron filters, and one Activation per trigger.

A reusable workflow (``on: workflow_call``) has no triggers of its own: it starts when a caller does
(ci/github/reusable.py adds those activations). Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ci.github.expressions import UNKNOWN
from ci.numbers import whole_number
from ci.safe_yaml import YAML_LOADER, load_yaml  # noqa: F401  (re-exported: bounded aliases and nesting)
from ci.safe_yaml import mapping, short

PER_COMMIT_TRIGGERS = frozenset({"pull_request", "push", "merge_group", "pull_request_target"})
NIGHTLY_TRIGGERS = frozenset({"schedule"}) | PER_COMMIT_TRIGGERS
MANUAL_TRIGGERS = frozenset({"workflow_dispatch"})


def events_needed(schedule: str) -> frozenset[str]:
    """Events under which a registered schedule counts as run."""
    return NIGHTLY_TRIGGERS if schedule == "nightly" else PER_COMMIT_TRIGGERS


def workflow_on(doc: dict[str, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` key as True


def workflow_triggers(doc: dict[str, Any]) -> frozenset[str]:
    on = workflow_on(doc)
    if isinstance(on, str):
        names = {on}
    elif isinstance(on, list):
        names = {str(x) for x in on}
    elif isinstance(on, dict):
        names = {str(k) for k in on}
        if "schedule" in names and not (isinstance(on["schedule"], list) and
                                         any(isinstance(s, dict) and s.get("cron") for s in on["schedule"])):
            names.discard("schedule")
    else:
        names = set()
    return frozenset(names)


def dispatch_inputs(doc: dict[str, Any]) -> dict[str, Any]:
    """``on: workflow_dispatch: inputs:`` of a workflow ({} when none)."""
    on = workflow_on(doc)
    dispatch = on.get("workflow_dispatch") if isinstance(on, dict) else None
    inputs = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    return inputs if isinstance(inputs, dict) else {}


def call_input_defaults(doc: dict[str, Any]) -> dict[str, Any]:
    """``on: workflow_call: inputs: X: default:`` of a reusable workflow (inputs without a default omitted)."""
    on = workflow_on(doc)
    call = on.get("workflow_call") if isinstance(on, dict) else None
    inputs = call.get("inputs") if isinstance(call, dict) else None
    return {str(k): v["default"] for k, v in mapping(inputs).items() if isinstance(v, dict) and "default" in v}


@dataclass(frozen=True)
class Activation:
    """One way a workflow starts: an event, plus what ``inputs.*`` hold then (UNKNOWN where run-time)."""
    event: str
    inputs: tuple[tuple[str, Any], ...] | None   # None: inputs unknown (dispatch)
    via: str = ""                                # "caller.yml:job" for a reusable workflow
    filtered: str = ""                           # why this trigger does not fire on every commit / night
    extra: tuple[tuple[str, Any], ...] = ()      # context known for this event (github.ref on main)
    paths: tuple[tuple[str, ...], tuple[str, ...]] | None = None   # (paths, paths-ignore) filter
    unproven: str = ""                           # why the caller job may not run (its if: is unknown)

    def context(self, base: Mapping[str, Any]) -> dict[str, Any]:
        ctx = dict(base)
        ctx.update(self.extra)
        ctx["github.event_name"] = self.event
        if self.inputs is not None:
            ctx["inputs.*"] = None
            ctx["github.event.inputs.*"] = None
            for name, value in self.inputs:
                ctx[f"inputs.{name}"] = value
        return ctx

    @property
    def unknown_inputs(self) -> list[str]:
        return [name for name, value in self.inputs or () if value is UNKNOWN]


def _branch_matches(patterns: Any, branch: str) -> bool:
    items = [patterns] if isinstance(patterns, str) else patterns if isinstance(patterns, list) else []
    return any(fnmatch.fnmatchcase(branch, str(p).replace("**", "*")) for p in items)


def _cron_never_fires(cron: str) -> str | None:
    fields = str(cron).split()
    if len(fields) != 5:
        return f"cron {short(cron)} does not have 5 fields"
    dom, month = fields[2], fields[3]
    day, month_number = whole_number(dom), whole_number(month)
    if day is not None and month_number is not None:
        days = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}.get(month_number, 31)
        if not 1 <= month_number <= 12 or day > days:
            return f"cron {short(cron)} names a day that does not exist"
    return None


def trigger_filter(on: Any, event: str, branch: str = "main") -> str:
    """Why ``event`` does not fire on every commit to (or every night of) ``branch``; "" when it does."""
    spec = on.get(event) if isinstance(on, dict) else None
    if event == "schedule":
        crons = [s.get("cron") for s in spec or [] if isinstance(s, dict)]
        bad = [_cron_never_fires(c) for c in crons]
        return "; ".join(b for b in bad if b) if bad and all(bad) else ""
    if not isinstance(spec, dict):
        return ""
    if event in ("push", "pull_request", "pull_request_target"):
        if "branches" in spec and not _branch_matches(spec["branches"], branch):
            return f"{event} is limited to branches {short(spec['branches'])}"
        if "branches-ignore" in spec and _branch_matches(spec["branches-ignore"], branch):
            return f"{event} ignores branch {branch}"
        if event == "push" and "tags" in spec and "branches" not in spec:
            return "push runs on tags only"
    if event in ("pull_request", "pull_request_target") and spec.get("types") is not None:
        types = spec["types"] if isinstance(spec["types"], list) else [spec["types"]]
        if "synchronize" not in {str(t) for t in types}:
            return f"{event} types {types} miss synchronize (a new commit on the pull request)"
    return ""


def _patterns(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in (value if isinstance(value, list) else [value] if value else []))


def trigger_paths(on: Any, event: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(paths, paths-ignore) of an event with a path filter, or None when it has none."""
    spec = on.get(event) if isinstance(on, dict) else None
    if not isinstance(spec, dict) or (spec.get("paths") is None and spec.get("paths-ignore") is None):
        return None
    return _patterns(spec.get("paths")), _patterns(spec.get("paths-ignore"))


def path_matches(path: str, pattern: str) -> bool:
    """GitHub's path filter glob, approximately: ``**`` any depth, ``*`` within one name."""
    regex = re.escape(pattern.lstrip("/")).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
    return re.fullmatch(regex, path) is not None


def paths_trigger(include: tuple[str, ...], ignore: tuple[str, ...], files: list[str]) -> bool:
    """Does a change to any of ``files`` fire an event filtered by these paths?"""
    for f in files:
        if include:
            hits = [p for p in include if not p.startswith("!") and path_matches(f, p)]
            negated = [p for p in include if p.startswith("!") and path_matches(f, p[1:])]
            if hits and not negated:
                return True
        elif not any(path_matches(f, p) for p in ignore):
            return True
    return False


def own_activations(doc: dict[str, Any], branch: str = "main") -> list[Activation]:
    """One Activation per trigger of the workflow itself (workflow_call excluded)."""
    acts = []
    on = workflow_on(doc)
    main_ref = (("github.ref", f"refs/heads/{branch}"), ("github.ref_name", branch))
    for event in sorted(workflow_triggers(doc) - {"workflow_call"}):
        extra = main_ref if event in ("push", "schedule") else ()
        acts.append(Activation(event, None if event == "workflow_dispatch" else (),
                               filtered=trigger_filter(on, event, branch), extra=extra,
                               paths=trigger_paths(on, event)))
    return acts
