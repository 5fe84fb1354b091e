"""Read any workflow file back into "this step runs target T (shard S) under event E, unmasked or not".

Works on generated and hand-written workflows alike. For every job and every
step whose ``run:`` starts the suite runner (as the adapter recognizes it):

- the events under which the job and the step definitely run: each workflow
  trigger (and each caller of a reusable ``workflow_call`` workflow) is tried
  with a three-valued evaluation of the job and step ``if:`` (ci/gh_expr.py);
  an ``if:`` that is unknown for an event does not count for that event;
- the targets: runner options are resolved through ``${{ matrix.* }}`` (the
  matrix expanded into rows, include/exclude applied), ``env:`` (step, job,
  workflow), ``$VAR``/``${VAR}`` and ``inputs.*`` (choice options on
  workflow_dispatch, ``with:`` values from a caller, null otherwise);
- what can mask its exit: ``continue-on-error`` on the step or job, a step
  ``if:`` that is not definitely true, and the shell around the command
  (ci/shell_words.py).

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import fnmatch
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from ci.adapters import Adapter, RunnerCall, Target, get_adapter
from ci.gh_expr import UNKNOWN, ExpressionError, evaluate, is_truthy, strip_wrapper, truth
from ci.shell_words import NOT_A_RUN, Command, masking, split_commands

WORKFLOW_DIR = ".github/workflows"
PER_COMMIT_TRIGGERS = frozenset({"pull_request", "push", "merge_group", "pull_request_target"})
NIGHTLY_TRIGGERS = frozenset({"schedule"}) | PER_COMMIT_TRIGGERS
EXPR_RE = re.compile(r"\$\{\{(.*?)\}\}", re.S)
SHELL_VAR_RE = re.compile(r"\$(?:\{([A-Za-z_]\w*)\}|([A-Za-z_]\w*))")
MAX_CALL_DEPTH = 4


@dataclass(frozen=True)
class StepRun:
    """One resolved runner call: workflow ``workflow``, job ``wf_job``, step ``step``."""
    workflow: str
    wf_job: str
    step: str
    kind: str                          # "job" | "group" | "suite"
    target: str
    shard: tuple[int, int] | None      # None: the whole target
    events: frozenset[str]             # events under which the job and this step definitely run
    seen_events: frozenset[str]        # every event that could start this workflow
    masks: tuple[str, ...] = ()        # why its exit could be masked (empty: it cannot)
    never_runs: bool = False           # job or step if: is false under every event
    filters: tuple[str, ...] = ()      # triggers that do not fire on every commit / night, and why
    path_events: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()   # (event, paths, ignore)

    def events_for(self, files: list[str]) -> frozenset[str]:
        """Events that run this step whenever one of ``files`` (the suite's own) changes."""
        extra = {e for e, inc, ign in self.path_events if paths_trigger(inc, ign, files)}
        return self.events | extra

    def path_note(self, files: list[str]) -> str:
        missed = sorted({f"{e} is filtered by paths {list(inc) or ['!' + p for p in ign]} that miss its files"
                         for e, inc, ign in self.path_events if not paths_trigger(inc, ign, files)})
        return "; ".join(missed)

    @property
    def where(self) -> str:
        return f"{self.workflow}:{self.wf_job}:{self.step}"

    @property
    def job_id(self) -> str | None:
        return self.target if self.kind == "job" else None

    @property
    def triggers(self) -> frozenset[str]:
        return self.events


def describe_steps(refs: list[StepRun], files: list[str], *, undecided: str) -> str:
    """The steps that mention a target, each ``workflow:job on [events]`` with why it does not
    count (``if: false``; ``undecided`` when its ``if:`` is not definitely true on any event; trigger
    and path filters; masked), duplicates once, joined by "; ". ``files``: the target's test files."""
    seen = []
    for r in refs:
        text = f"{r.workflow}:{r.wf_job} on {sorted(r.seen_events) or 'nothing'}"
        notes = list(r.filters) + ([r.path_note(files)] if r.path_note(files) else [])
        if r.never_runs:
            text += " (if: false)"
        elif not r.events and not notes and not r.masks:
            text += f" ({undecided})"
        if notes:
            text += f" ({'; '.join(notes)})"
        if r.masks:
            text += " (masked)"
        seen.append(text)
    return "; ".join(dict.fromkeys(seen))


@dataclass
class WorkflowScan:
    refs: list[StepRun] = field(default_factory=list)
    triggers: dict[str, frozenset[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # unresolvable references, unreadable files
    masked: list[str] = field(default_factory=list)     # "workflow:job:step: reason" per masked step
    runs_on: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)


def _on(doc: dict[str, Any]) -> Any:
    return doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` key as True


def workflow_triggers(doc: dict[str, Any]) -> frozenset[str]:
    on = _on(doc)
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


def _dispatch_inputs(doc: dict[str, Any]) -> dict[str, Any]:
    on = _on(doc)
    dispatch = on.get("workflow_dispatch") if isinstance(on, dict) else None
    inputs = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    return inputs if isinstance(inputs, dict) else {}


@dataclass(frozen=True)
class Activation:
    """One way a workflow starts: an event, plus what ``inputs.*`` hold then."""
    event: str
    inputs: tuple[tuple[str, Any], ...] | None   # None: inputs unknown (dispatch / caller without literals)
    via: str = ""                                # "caller.yml:job" for a reusable workflow
    filtered: str = ""                           # why this trigger does not fire on every commit / night
    extra: tuple[tuple[str, Any], ...] = ()      # context known for this event (github.ref on main)
    paths: tuple[tuple[str, ...], tuple[str, ...]] | None = None   # (paths, paths-ignore) filter

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


def matrix_rows(job: dict[str, Any]) -> tuple[list[dict[str, str]], str | None]:
    """Every combination of a job's matrix (include/exclude applied), or a problem."""
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    if matrix is None:
        return [{}], None
    if not isinstance(matrix, dict):
        return [], f"matrix {matrix!r} is computed at run time"
    base = {k: v for k, v in matrix.items() if k not in ("include", "exclude")}
    for key, values in base.items():
        if not isinstance(values, list):
            return [], f"matrix.{key} = {values!r} is computed at run time"
    keys = list(base)
    rows = [dict(zip(keys, (str(v) if not isinstance(v, (dict, list)) else v for v in combo)))
            for combo in itertools.product(*(base[k] for k in keys))] if keys else []
    for item in matrix.get("exclude") or []:
        if isinstance(item, dict):
            rows = [r for r in rows if not all(str(r.get(k)) == str(v) for k, v in item.items())]
    for item in matrix.get("include") or []:
        if not isinstance(item, dict):
            continue
        item = {k: str(v) if not isinstance(v, (dict, list)) else v for k, v in item.items()}
        matched = False
        for row in rows:
            if all(row.get(k) == v for k, v in item.items() if k in keys):
                for k, v in item.items():
                    if k not in keys:
                        row[k] = v
                matched = True
        if not matched:
            rows.append(dict(item))
    return rows or [{}], None


class _Resolver:
    """Resolve runner option tokens for one (job, step, matrix row, activation)."""

    def __init__(self, doc, job, step, row: Mapping[str, Any], act: Activation, base_ctx: Mapping[str, Any]):
        self.doc, self.job, self.step, self.row, self.act = doc, job, step, row, act
        self.ctx = act.context(base_ctx)
        self.ctx["matrix.*"] = None      # a key the matrix does not have is empty, as on GitHub
        for key, value in row.items():
            self.ctx[f"matrix.{key}"] = value

    def env(self, name: str) -> Any:
        for scope in (self.step, self.job, self.doc):
            env = scope.get("env") if isinstance(scope, dict) else None
            if isinstance(env, dict) and name in env:
                return env[name]
        return None

    def _expr(self, body: str) -> list[str] | None:
        body = body.strip()
        name = body.split(".")[-1]
        if self.act.event == "workflow_dispatch" and re.fullmatch(r"(github\.event\.)?inputs\.[\w-]+", body):
            spec = _dispatch_inputs(self.doc).get(name)
            if isinstance(spec, dict) and isinstance(spec.get("options"), list):
                return [str(o) for o in spec["options"] if str(o) != "all"]
            return None
        if body.startswith("env."):
            value = self.env(body[4:])
            return None if value is None else self.values(str(value))
        try:
            value = evaluate(body, self.ctx)
        except ExpressionError:
            return None
        if value is UNKNOWN:
            return None
        if value is None or value is False:
            return [""]
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return [str(value)]

    def values(self, token: str, depth: int = 0) -> list[str] | None:
        """Every value a token can take in this context; None when unknowable."""
        if depth > 4:
            return None
        parts: list[list[str]] = []
        pos = 0
        for match in EXPR_RE.finditer(token):
            parts.append([token[pos:match.start()]])
            got = self._expr(match.group(1))
            if got is None:
                return None
            parts.append(got)
            pos = match.end()
        parts.append([token[pos:]])
        out: list[str] = []
        for combo in itertools.product(*parts):
            text = "".join(combo)
            shell = SHELL_VAR_RE.search(text)
            if shell:
                name = shell.group(1) or shell.group(2)
                value = self.env(name)
                if value is None:
                    return None
                sub = self.values(str(value), depth + 1)
                if sub is None:
                    return None
                for v in sub:
                    rest = self.values(text[:shell.start()] + v + text[shell.end():], depth + 1)
                    if rest is None:
                        return None
                    out += rest
                continue
            if "$" in text:
                return None
            out.append(text)
        return out


# environment variables that change what pytest selects or how it reports, wherever a workflow sets them
MASKING_ENV = {"PYTEST_ADDOPTS": "adds pytest options (-k, --deselect, -p no:...) behind the runner's back",
               "PYTEST_PLUGINS": "loads extra pytest plugins that can rewrite outcomes"}


def _env_masks(step: dict[str, Any], job: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    out = []
    for scope, what in ((step, "step"), (job, "job"), (doc, "workflow")):
        env = scope.get("env") if isinstance(scope, dict) else None
        for name in env if isinstance(env, dict) else ():
            if name in MASKING_ENV:
                out.append(f"{what} env {name}={env[name]!r} {MASKING_ENV[name]}")
    return out


def _truthy_flag(value: Any, ctx: Mapping[str, Any]) -> bool | None:
    """continue-on-error: a literal or an expression; None when unknown."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    try:
        return is_truthy(evaluate(value, ctx))
    except ExpressionError:
        return None


def _load(path: Path, root: Path, scan: WorkflowScan) -> dict[str, Any] | None:
    rel = path.relative_to(root).as_posix()
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        scan.problems.append(f"{rel}: not valid YAML: {exc}")
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
        scan.problems.append(f"{rel}: no jobs: mapping")
        return None
    return doc


def _branch_matches(patterns: Any, branch: str) -> bool:
    items = [patterns] if isinstance(patterns, str) else patterns if isinstance(patterns, list) else []
    return any(fnmatch.fnmatchcase(branch, str(p).replace("**", "*")) for p in items)


def _cron_never_fires(cron: str) -> str | None:
    fields = str(cron).split()
    if len(fields) != 5:
        return f"cron {cron!r} does not have 5 fields"
    dom, month = fields[2], fields[3]
    if dom.isdigit() and month.isdigit():
        days = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}.get(int(month), 31)
        if not 1 <= int(month) <= 12 or int(dom) > days:
            return f"cron {cron!r} names a day that does not exist"
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
            return f"{event} is limited to branches {spec['branches']}"
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


def _own_activations(doc: dict[str, Any], branch: str = "main") -> list[Activation]:
    acts = []
    on = _on(doc)
    main_ref = (("github.ref", f"refs/heads/{branch}"), ("github.ref_name", branch))
    for event in sorted(workflow_triggers(doc) - {"workflow_call"}):
        extra = main_ref if event in ("push", "schedule") else ()
        acts.append(Activation(event, None if event == "workflow_dispatch" else (),
                               filtered=trigger_filter(on, event, branch), extra=extra,
                               paths=trigger_paths(on, event)))
    return acts


def _called_file(uses: Any, root: Path) -> str | None:
    if isinstance(uses, str) and uses.startswith("./"):
        if (root / uses[2:]).exists():
            return (root / uses[2:]).resolve().relative_to(root.resolve()).as_posix()
        return uses[2:]
    return None


def _activations(docs: dict[str, dict[str, Any]], root: Path,
                 base_ctx: Mapping[str, Any]) -> dict[str, list[Activation]]:
    """Own triggers of each workflow, plus (for reusable workflows) the events of the jobs that call them."""
    branch = str(base_ctx.get("default_branch", "main"))
    acts = {rel: _own_activations(doc, branch) for rel, doc in docs.items()}
    for _ in range(MAX_CALL_DEPTH):
        changed = False
        for rel, doc in docs.items():
            for key, job in doc["jobs"].items():
                if not isinstance(job, dict):
                    continue
                callee = _called_file(job.get("uses"), root)
                if callee not in docs:
                    continue
                with_ = job.get("with") if isinstance(job.get("with"), dict) else {}
                for act in list(acts[rel]):
                    ctx = act.context(base_ctx)
                    if truth(job.get("if"), ctx) is not True:
                        continue
                    literal: list[tuple[str, Any]] = []
                    known = True
                    for name, value in with_.items():
                        if isinstance(value, str) and "${{" in value:
                            try:
                                got = evaluate(value, ctx)
                            except ExpressionError:
                                got = UNKNOWN
                            if got is UNKNOWN:
                                known = False
                                continue
                            value = got
                        literal.append((str(name), value))
                    new = Activation(act.event, tuple(sorted(literal, key=lambda kv: kv[0])) if known else None,
                                     f"{rel}:{key}", act.filtered, act.extra, act.paths)
                    if new not in acts[callee]:
                        acts[callee].append(new)
                        changed = True
        if not changed:
            break
    return acts


def scan_workflows(root: str | Path, adapter: Adapter | str = "dspark") -> WorkflowScan:
    adapter = get_adapter(adapter) if isinstance(adapter, str) else adapter
    root = Path(root)
    scan = WorkflowScan()
    base = root / WORKFLOW_DIR
    docs: dict[str, dict[str, Any]] = {}
    for path in sorted(base.glob("*.y*ml")) if base.is_dir() else []:
        doc = _load(path, root, scan)
        if doc is not None:
            docs[path.relative_to(root).as_posix()] = doc
    base_ctx = dict(adapter.context)
    activations = _activations(docs, root, base_ctx)
    for rel, doc in docs.items():
        scan.triggers[rel] = workflow_triggers(doc)
        seen = frozenset(a.event for a in activations[rel])
        for key, job in doc["jobs"].items():
            if isinstance(job, dict):
                _scan_job(scan, adapter, rel, doc, str(key), job, activations[rel], seen, base_ctx, root)
    return scan


def _step_label(step: dict[str, Any], index: int) -> str:
    name = step.get("name") or step.get("id")
    return str(name) if name else f"step {index + 1}"


STATUS_OVERRIDE_RE = re.compile(r"\b(always|failure|cancelled)\s*\(")


def _job_runs(doc: dict[str, Any], key: str, ctx: Mapping[str, Any], memo: dict[str, bool], depth: int = 0) -> bool:
    """Job ``key`` definitely runs: its ``if:`` is true and (unless the if: overrides the status check with
    always()/failure()/cancelled()) every job it ``needs`` runs too -- a skipped need skips it."""
    if key in memo:
        return memo[key]
    memo[key] = False   # a cycle never runs
    job = doc["jobs"].get(key)
    if not isinstance(job, dict) or depth > 20:
        return False
    cond = job.get("if")
    ok = truth(cond, ctx) is True
    if ok and not (isinstance(cond, str) and STATUS_OVERRIDE_RE.search(cond)):
        needs = job.get("needs") or []
        needs = [needs] if isinstance(needs, str) else needs
        ok = all(_job_runs(doc, str(n), ctx, memo, depth + 1) for n in needs)
    memo[key] = ok
    return ok


def _composite_steps(step: dict[str, Any], root: Path) -> list[dict[str, Any]] | None:
    """The ``run:`` steps of a local composite action, as steps of the calling job (None: not one).

    ``${{ inputs.X }}`` becomes the caller's ``with: X`` (or the input's default); the caller's
    ``if:``, ``continue-on-error`` and ``env:`` apply to every inner step.
    """
    uses = step.get("uses")
    if not isinstance(uses, str) or not uses.startswith("./"):
        return None
    folder = root / uses[2:]
    path = next((p for p in (folder / "action.yml", folder / "action.yaml") if p.is_file()), None)
    if path is None:
        return None
    try:
        action = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        return None
    runs = action.get("runs") if isinstance(action, dict) else None
    if not isinstance(runs, dict) or runs.get("using") != "composite":
        return None
    with_ = step.get("with") if isinstance(step.get("with"), dict) else {}
    defaults = {k: (v or {}).get("default") for k, v in (action.get("inputs") or {}).items() if isinstance(v, dict)}
    values = {**{k: v for k, v in defaults.items() if v is not None}, **with_}
    out = []
    for inner in runs.get("steps") or []:
        if not isinstance(inner, dict) or not isinstance(inner.get("run"), str):
            continue
        text = inner["run"]
        for name, value in values.items():
            text = re.sub(r"\$\{\{\s*inputs\." + re.escape(str(name)) + r"\s*\}\}", lambda _m, v=str(value): v, text)
        merged = dict(inner)
        merged["run"] = text
        merged["name"] = f"{step.get('name') or uses} > {inner.get('name') or 'run'}"
        ifs = [x for x in (step.get("if"), inner.get("if")) if x is not None]
        if ifs:
            merged["if"] = " && ".join(f"({strip_wrapper(str(x))})" for x in ifs) if len(ifs) > 1 else ifs[0]
        flags = [x for x in (step.get("continue-on-error"), inner.get("continue-on-error")) if x not in (None, False)]
        if flags:
            merged["continue-on-error"] = flags[0]
        merged["env"] = {**(step.get("env") or {}), **(inner.get("env") or {})}
        out.append(merged)
    return out


def _expanded_steps(steps: list[Any], root: Path) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for index, step in enumerate(steps):
        inner = _composite_steps(step, root) if isinstance(step, dict) else None
        out += [(index, s) for s in inner] if inner is not None else [(index, step)]
    return out


PathEvent = tuple[str, tuple[str, ...], tuple[str, ...]]   # (event, paths, paths-ignore)


def _runner_calls(adapter: Adapter, commands: list[Command]) -> list[tuple[int, RunnerCall]]:
    """(index, call) for each command of a script that starts the suite runner."""
    calls = [(k, adapter.find_call(c.words) if c.words and c.words[0] not in NOT_A_RUN else None)
             for k, c in enumerate(commands)]
    return [(k, call) for k, call in calls if call is not None]


def _run_defaults(owner: dict[str, Any]) -> dict[str, Any]:
    """The ``defaults: run:`` mapping of a job or workflow ({} when it has none)."""
    return (owner.get("defaults") or {}).get("run", {}) if isinstance(owner.get("defaults"), dict) else {}


def _command_masks(adapter: Adapter, commands: list[Command], calls: list[tuple[int, RunnerCall]],
                   shell: str | None) -> list[str]:
    """What in the script around each runner call (and in the call itself) can mask its exit."""
    masks: list[str] = []
    for k, call in calls:
        masks += masking(commands, k, shell)
        masks += adapter.call_masks(call)
    return masks


def _step_events(doc, key: str, job: dict[str, Any], step: dict[str, Any], acts: list[Activation],
                 base_ctx: Mapping[str, Any]) -> tuple[set[str], set[PathEvent], list[str]]:
    """Events that definitely run the step, events that run it through a path filter, and masks found on the way."""
    step_events: set[str] = set()
    path_events: set[PathEvent] = set()
    masks: list[str] = []
    for act in acts:
        ctx = act.context(base_ctx)
        if not _job_runs(doc, key, ctx, {}):
            continue
        t_step = truth(step.get("if"), ctx)
        if t_step is True and not act.filtered:
            if act.paths is None:
                step_events.add(act.event)
            else:
                path_events.add((act.event, *act.paths))
        elif "if" in step:
            masks.append(f"step if: {step.get('if')!r} is not definitely true on {act.event}: "
                         "it can skip the run while the job stays green")
        for scope, what in ((step, "step"), (job, "job")):
            flag = _truthy_flag(scope.get("continue-on-error"), ctx)
            if flag is not False:
                masks.append(f"{what} continue-on-error: {scope.get('continue-on-error')!r}: "
                             "a failure is reported as success")
    return step_events, path_events, masks


def _never_runs(job: dict[str, Any], step: dict[str, Any], acts: list[Activation], base_ctx: Mapping[str, Any]) -> bool:
    """The job's or the step's ``if:`` is false under every activation."""
    return bool(acts) and all(
        truth(job.get("if"), a.context(base_ctx)) is False or truth(step.get("if"), a.context(base_ctx)) is False
        for a in acts)


def _option_values(resolver: _Resolver, options: Mapping[str, str | None]) -> tuple[dict[str, list[str]], str | None]:
    """Every value of each runner option in the resolver's context, or why one cannot be resolved."""
    option_values: dict[str, list[str]] = {}
    for name, token in options.items():
        if token is None:
            return option_values, f"{name} has no value"
        got = resolver.values(token)
        if got is None:
            return option_values, f"cannot resolve {name} {token}"
        option_values[name] = got
    return option_values, None


def _call_targets(adapter: Adapter, doc, job: dict[str, Any], step: dict[str, Any], call: RunnerCall,
                  acts: list[Activation], rows: list[dict[str, str]], base_ctx: Mapping[str, Any],
                  step_events: set[str], path_events: set[PathEvent],
                  ) -> tuple[dict[Target, set[str]], dict[Target, set[PathEvent]], set[str]]:
    """Targets of one runner call over every activation and matrix row: their events, path-gated events, problems."""
    found: dict[Target, set[str]] = {}
    gated: dict[Target, set[PathEvent]] = {}
    unresolved: set[str] = set()
    for act in acts or [Activation("none", ())]:
        for row in rows:
            option_values, bad = _option_values(_Resolver(doc, job, step, row, act, base_ctx), call.options)
            if bad:
                unresolved.add(bad)
                continue
            names = list(option_values)
            for combo in itertools.product(*(option_values[n] for n in names)):
                targets, problem = adapter.targets(dict(zip(names, combo)))
                if problem:
                    unresolved.add(problem)
                for target in targets:
                    events = found.setdefault(target, set())
                    if act.event in step_events:
                        events.add(act.event)
                    elif act.paths is not None and (act.event, *act.paths) in path_events:
                        gated.setdefault(target, set()).add((act.event, *act.paths))
    return found, gated, unresolved


def _scan_job(scan: WorkflowScan, adapter: Adapter, rel: str, doc, key: str, job: dict[str, Any],
              acts: list[Activation], seen: frozenset[str], base_ctx: Mapping[str, Any], root: Path) -> None:
    """Record the runs-on labels of one job and, for each step that starts the runner, its targets and masks."""
    runs_on = job.get("runs-on")
    scan.runs_on[(rel, key)] = tuple(runs_on) if isinstance(runs_on, list) else (str(runs_on),) if runs_on else ()
    rows, matrix_problem = matrix_rows(job)
    defaults, wf_defaults = _run_defaults(job), _run_defaults(doc)
    filters = tuple(sorted({a.filtered for a in acts if a.filtered}))
    for index, step in _expanded_steps(job.get("steps") or [], root):
        if not isinstance(step, dict) or not isinstance(step.get("run"), str):
            continue
        commands = split_commands(step["run"])
        calls = _runner_calls(adapter, commands)
        if not calls:
            continue
        label = _step_label(step, index)
        where = f"{rel}:{key}:{label}"
        if matrix_problem:
            scan.problems.append(f"{where}: {matrix_problem}: cannot tell what it runs")
            continue
        shell = step.get("shell") or defaults.get("shell") or wf_defaults.get("shell")
        step_events, path_events, event_masks = _step_events(doc, key, job, step, acts, base_ctx)
        masks = list(dict.fromkeys(_command_masks(adapter, commands, calls, shell) + _env_masks(step, job, doc)
                                   + event_masks))
        scan.masked += [f"{where}: {m}" for m in masks]
        never = _never_runs(job, step, acts, base_ctx)
        for _k, call in calls:
            found, gated, unresolved = _call_targets(adapter, doc, job, step, call, acts, rows, base_ctx,
                                                     step_events, path_events)
            scan.problems += [f"{where}: {problem}" for problem in sorted(unresolved)]
            for target, events in found.items():
                scan.refs.append(StepRun(rel, key, label, target.kind, target.id, target.shard,
                                         frozenset(events), seen, tuple(masks), never, filters,
                                         tuple(sorted(gated.get(target, ())))))


def events_needed(schedule: str) -> frozenset[str]:
    """Events under which a registered schedule counts as run."""
    return NIGHTLY_TRIGGERS if schedule == "nightly" else PER_COMMIT_TRIGGERS


def runs_for(refs: Iterable[StepRun], kind: str, target: str) -> list[StepRun]:
    return [r for r in refs if r.kind == kind and r.target == target]
