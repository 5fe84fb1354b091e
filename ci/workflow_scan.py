"""Read committed workflow files: which workflow jobs run which registry job ids, and when.

Works on any workflow, generated or hand-written: a step counts as running a
registry job when its ``run:`` calls the suite runner (``nox -s suite`` or
``python -m ci.run_suite``) with ``--job X``; X may be literal or come from the
job's matrix, ``env:`` or a workflow_dispatch input.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ci.partition import parse_shard

WORKFLOW_DIR = ".github/workflows"
PER_COMMIT_TRIGGERS = frozenset({"pull_request", "push", "merge_group", "pull_request_target"})
RUNNER_RE = re.compile(r"\bnox\b[^\n;&|]*?(?:-s|--session|--sessions|-e)\s+['\"]?suite\b|\bci\.run_suite\b")
ARG_RE = r"{flag}(?:=|\s+)(\"[^\"]*\"|'[^']*'|\$\{{\{{[^}}]*\}}\}}|\S+)"
EXPR_RE = re.compile(r"^\$\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}$")
SHELL_VAR_RE = re.compile(r"^\$\{?([A-Za-z_]\w*)\}?$")
FALSE_IFS = {"false", "${{ false }}"}


@dataclass(frozen=True)
class WorkflowRef:
    workflow: str                 # .github/workflows/x.yml
    wf_job: str                   # the workflow job key
    job_id: str                   # the registry job id it passes to --job
    triggers: frozenset[str]      # events on which this reference runs
    never_runs: bool = False      # job-level if: false
    shard_problem: str | None = None


@dataclass
class WorkflowScan:
    refs: list[WorkflowRef] = field(default_factory=list)
    triggers: dict[str, frozenset[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # unresolvable references, unreadable files


def workflow_triggers(doc: dict[str, Any]) -> frozenset[str]:
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` key as True
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


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
        return token[1:-1]
    return token


def _matrix_values(job: dict[str, Any], name: str) -> list[str] | None:
    matrix = (job.get("strategy") or {}).get("matrix")
    if not isinstance(matrix, dict):
        return None
    values = matrix.get(name)
    out = [str(v) for v in values] if isinstance(values, list) else []
    for extra in matrix.get("include") or []:
        if isinstance(extra, dict) and name in extra:
            out.append(str(extra[name]))
    return out or None


class _Resolver:
    def __init__(self, doc: dict[str, Any], job: dict[str, Any], step: dict[str, Any]):
        self.doc, self.job, self.step = doc, job, step
        self.dispatch_only = False

    def env(self, name: str) -> str | None:
        for scope in (self.step, self.job, self.doc):
            env = scope.get("env")
            if isinstance(env, dict) and name in env:
                return str(env[name])
        return None

    def inputs(self, name: str) -> list[str] | None:
        on = self.doc.get("on", self.doc.get(True))
        dispatch = on.get("workflow_dispatch") if isinstance(on, dict) else None
        spec = ((dispatch or {}).get("inputs") or {}).get(name) if isinstance(dispatch, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("options"), list):
            self.dispatch_only = True
            return [str(o) for o in spec["options"] if str(o) != "all"]
        return None

    def values(self, token: str, depth: int = 0) -> list[str] | None:
        token = _unquote(token.strip())
        if depth > 3:
            return None
        expr = EXPR_RE.match(token)
        if expr:
            path = expr.group(1)
            head, _, rest = path.partition(".")
            if head == "matrix":
                return _matrix_values(self.job, rest)
            if head == "env":
                value = self.env(rest)
                return None if value is None else self.values(value, depth + 1)
            if head == "inputs" or path.startswith("github.event.inputs."):
                return self.inputs(path.rpartition(".")[2])
            return None
        shell = SHELL_VAR_RE.match(token)
        if shell:
            value = self.env(shell.group(1))
            return None if value is None else self.values(value, depth + 1)
        if "$" in token:
            return None
        return [token]


def _shard_problem(values: list[str] | None, token: str | None) -> str | None:
    if token is None:
        return None  # no --shard: the whole job runs
    if values is None:
        return f"cannot resolve --shard {token}"
    try:
        parsed = [parse_shard(v) for v in values]
    except ValueError as exc:
        return str(exc)
    counts = {n for _, n in parsed}
    if len(counts) != 1:
        return f"--shard values {values} mix shard counts"
    count = counts.pop()
    missing = sorted(set(range(1, count + 1)) - {i for i, _ in parsed})
    if missing:
        return f"runs shards {sorted({i for i, _ in parsed})} of {count}: shard(s) {missing} never run"
    return None


def scan_workflows(root: str | Path) -> WorkflowScan:
    scan = WorkflowScan()
    base = Path(root) / WORKFLOW_DIR
    for path in sorted(base.glob("*.y*ml")) if base.is_dir() else []:
        rel = path.relative_to(root).as_posix()
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            scan.problems.append(f"{rel}: not valid YAML: {exc}")
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
            scan.problems.append(f"{rel}: no jobs: mapping")
            continue
        triggers = workflow_triggers(doc)
        scan.triggers[rel] = triggers
        for key, job in doc["jobs"].items():
            if not isinstance(job, dict):
                continue
            never = str(job.get("if", "")).strip().lower() in FALSE_IFS or job.get("if") is False
            for step in job.get("steps") or []:
                run = step.get("run") if isinstance(step, dict) else None
                if not isinstance(run, str) or not RUNNER_RE.search(run):
                    continue
                resolver = _Resolver(doc, job, step)
                job_tokens = re.findall(ARG_RE.format(flag="--job"), run)
                if not job_tokens:
                    scan.problems.append(f"{rel}: job {key}: calls the suite runner without --job")
                shard_tokens = re.findall(ARG_RE.format(flag="--shard"), run)
                shard_token = shard_tokens[0] if shard_tokens else None
                shard_values = resolver.values(shard_token) if shard_token else None
                problem = _shard_problem(shard_values, shard_token)
                for token in job_tokens:
                    ids = resolver.values(token)
                    if ids is None:
                        scan.problems.append(f"{rel}: job {key}: cannot resolve --job {token}")
                        continue
                    when = frozenset({"workflow_dispatch"}) if resolver.dispatch_only else triggers
                    for job_id in ids:
                        scan.refs.append(WorkflowRef(rel, str(key), job_id, when, never, problem))
    return scan
