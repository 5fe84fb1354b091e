"""Read any workflow file back into "this step runs target T (shard S) under event E, unmasked or not".

Works on generated and hand-written workflows alike. For every job and every step whose ``run:``
starts the suite runner (as the adapter recognizes it), per activation (ci/github/triggers.py,
ci/github/reusable.py) and matrix row (ci/github/matrix.py):

- the events under which the job and the step definitely run, and those under which they may
  (an ``if:`` known only at run time), with why (ci/github/masking.py);
- the targets: runner options resolved through the expression context (ci/github/option_values.py);
  a partition known only at run time leaves the target's shard unknown, an unresolvable suite
  leaves an :class:`UnresolvedStep`;
- what can mask its exit (ci/github/masking.py).

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from ci.adapters import Adapter, RunnerCall, Target, get_adapter
from ci.adapters.base import UNRESOLVED
from ci.github.fork_safety import fork_findings
from ci.safe_files import UnreadableFile, is_inside, read_inside
from ci.safe_yaml import YamlTooLarge, mapping, sequence, short
from ci.github.shell_eval import Reading, ShellEnv, StepBudget, read_runs, substitute
from ci.github.shell import StepShell, not_a_run, split_commands, step_shell
from ci.github.shell_syntax import MAX_SCRIPT
from ci.github.option_values import Resolver
from ci.github.masking import (PathEvent, StepEvents, command_masks, env_masks, github_env_masks, step_events,
                               writes_github_env)
from ci.github.matrix import matrix_rows, oversize_matrix
from ci.github.refusals import refusals
from ci.github.reusable import activations, called_file, expanded_steps
from ci.github.triggers import (MANUAL_TRIGGERS, NIGHTLY_TRIGGERS, PER_COMMIT_TRIGGERS, Activation,  # noqa: F401
                                  events_needed, load_yaml, paths_trigger, workflow_triggers)

WORKFLOW_DIR = ".github/workflows"
MAX_WORKFLOW_BYTES = 1024 * 1024   # no hand-written workflow comes near 1 MiB; a bigger file is not read
# characters of run: scripts read again for another matrix row or env, per scan (the first read of each
# script is not counted): rows x script size past this reads the script once with row values unknown
MAX_REREAD_CHARS = 2 * MAX_SCRIPT   # 512 KiB
# statements evaluated over every reading of one scan (each reading also stops at MAX_READ_STEPS): past
# it a script is read as written, every command a maybe (this project's own workflows take under 100)
MAX_SCAN_STEPS = 500_000
# distinct runner calls (line, words) one reading of a script may make: each is resolved again for every
# matrix row. A loop can unroll into thousands; past this the script is an unreadable-input finding.
MAX_RUNNER_CALLS = 256


@dataclass(frozen=True)
class StepRun:
    """One resolved runner call: workflow ``workflow``, job ``wf_job``, step ``step``."""
    workflow: str
    wf_job: str
    step: str
    kind: str                          # "job" | "group" | "suite" | "file"
    target: str
    shard: tuple[int, int] | None      # None: the whole target (or unknown, see shard_unknown)
    events: frozenset[str]             # events under which the job and this step definitely run
    seen_events: frozenset[str]        # every event that could start this workflow
    masks: tuple[str, ...] = ()        # why its exit could be masked (empty: it cannot)
    never_runs: bool = False           # job or step if: is false under every event
    filters: tuple[str, ...] = ()      # triggers that do not fire on every commit / night, and why
    path_events: tuple[PathEvent, ...] = ()
    maybe_events: frozenset[str] = frozenset()   # events under which it may run (an if: known at run time)
    why_maybe: tuple[str, ...] = ()    # what those hang on
    shard_unknown: str = ""            # why its partition is known only at run time ("" when known)
    line: int = 0                      # line of the step in the workflow file (0: unknown)
    runners: tuple[str, ...] = ()      # runs-on labels when this target runs (resolved per caller / row)
    never_why: str = ""                # the script can never reach the call (exit 0 before it, ...): why

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


@dataclass(frozen=True)
class UnresolvedStep:
    """A runner call whose target the scan cannot tell: ``known`` holds the options it could resolve."""
    where: str
    problem: str
    known: tuple[tuple[str, str], ...] = ()
    events: frozenset[str] = frozenset()
    line: int = 0


def describe_steps(refs: list[StepRun], files: list[str], *, undecided: str) -> str:
    """The steps that mention a target, each ``workflow:job on [events]`` with why it does not
    count (``if: false``; ``undecided`` when its ``if:`` is not definitely true on any event; trigger
    and path filters; masked), duplicates once, joined by "; ". ``files``: the target's test files."""
    seen = []
    for r in refs:
        text = f"{r.workflow}:{r.wf_job} on {sorted(r.seen_events) or 'nothing'}"
        notes = list(r.filters) + ([r.path_note(files)] if r.path_note(files) else [])
        if r.never_runs:
            text += f" ({r.never_why or 'if: false'})"
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
    problems: list[str] = field(default_factory=list)   # unreadable files, unresolvable references
    unresolved: list[UnresolvedStep] = field(default_factory=list)
    masked: list[str] = field(default_factory=list)     # "workflow:job:step: reason" per masked step
    masked_unproven: set[str] = field(default_factory=set)   # the masked entries that hang on a run-time value
    runs_on: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    job_lines: dict[tuple[str, str], int] = field(default_factory=dict)
    broken: dict[str, tuple[str, int]] = field(default_factory=dict)   # problem -> (file, line) of a broken workflow
    # (rule, message, path, line) about the input itself: unreadable-input, oversize-matrix, fork-on-self-hosted
    input_findings: list[tuple[str, str, str, int]] = field(default_factory=list)
    readings: dict[tuple[str, ShellEnv], Reading] = field(default_factory=dict)   # memo: script read per row
    reread_chars: int = 0   # characters of scripts read again for another row/env (bounded: MAX_REREAD_CHARS)
    steps: StepBudget = field(default_factory=lambda: StepBudget(MAX_SCAN_STEPS))   # shared by every reading
    read_templates: set[str] = field(default_factory=set)   # run: texts read once already
    env_writers: dict[str, bool] = field(default_factory=dict)   # memo: a step of the workflow writes $GITHUB_ENV


@dataclass
class ScanContext:
    """Everything one workflow job's scan needs, instead of a dozen parameters."""
    scan: WorkflowScan
    adapter: Adapter
    root: Path
    rel: str
    doc: dict[str, Any]
    key: str
    job: dict[str, Any]
    acts: list[Activation]
    base_ctx: Mapping[str, Any]
    lines: dict[str, int] = field(default_factory=dict)   # step name -> line in the file
    shell: StepShell = StepShell(True, True, False)        # the step being read: its shell
    workdir: str = ""                                     # ... and its working-directory ("" the root)

    @property
    def seen(self) -> frozenset[str]:
        return frozenset(a.event for a in self.acts)

    def resolver(self, step: dict[str, Any], row: Mapping[str, Any], act: Activation) -> Resolver:
        return Resolver(self.doc, self.job, step, row, act, self.base_ctx)


def _load(path: Path, root: Path, scan: WorkflowScan) -> tuple[dict[str, Any], str] | None:
    """(document, text) of a workflow file; None, with an unreadable-input finding, when it cannot be read."""
    rel = path.relative_to(root).as_posix()
    try:
        text = read_inside(root, path, MAX_WORKFLOW_BYTES)
    except UnreadableFile as exc:
        scan.input_findings.append(("unreadable-input", f"{exc}: a workflow the audit cannot read may hide a run",
                                    rel, 0))
        return None
    try:
        doc = load_yaml(text)
    except YamlTooLarge as exc:
        scan.input_findings.append(("unreadable-input", f"{rel}: {exc}", rel, 0))
        return None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        what = " ".join(str(getattr(exc, "problem", None) or str(exc).splitlines()[0]).split())[:300]
        _broken(scan, rel, line, f"{rel}:{line}: not valid YAML: {what}")
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), dict):
        _broken(scan, rel, 1, f"{rel}:1: no jobs: mapping")
        return None
    return doc, text


def _broken(scan: WorkflowScan, rel: str, line: int, problem: str) -> None:
    """A workflow the scan cannot read: the problem names its file and line (its finding's location and key)."""
    scan.problems.append(problem)
    scan.broken[problem] = (rel, line)


def _key_lines(text: str) -> dict[str, int]:
    """Line of each ``name:``/``id:`` value and job key, for locations (first occurrence wins)."""
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip().removeprefix("- ")
        for prefix in ("name:", "id:"):
            if stripped.startswith(prefix):
                out.setdefault(stripped[len(prefix):].strip().strip("'\""), number)
        if line.startswith("  ") and not line.startswith("   ") and line.rstrip().endswith(":"):
            out.setdefault("job:" + line.strip()[:-1], number)
    return out


def workflow_files(root: Path, scan: WorkflowScan | None = None) -> list[Path]:
    """The ``*.yml``/``*.yaml`` entries of the workflow folder; none when the folder is a link out of the tree
    (an unreadable-input finding on ``scan``: even the names there are not the tree's to report)."""
    base = root / WORKFLOW_DIR
    if not base.is_dir():
        return []
    if not is_inside(root, base):
        if scan is not None:
            scan.input_findings.append(("unreadable-input", f"{WORKFLOW_DIR}: a symlink that resolves outside the "
                                        "audited tree (not read): its workflows cannot be audited", WORKFLOW_DIR, 0))
        return []
    # exactly these two suffixes: GitHub ignores ci.yxml, ci.yml.bak, and files in subfolders
    return sorted(p for p in base.glob("*.y*ml") if p.suffix in (".yml", ".yaml"))


def scan_workflows(root: str | Path, adapter: Adapter | str = "dspark") -> WorkflowScan:
    adapter = get_adapter(adapter) if isinstance(adapter, str) else adapter
    root = Path(root)
    scan = WorkflowScan()
    docs: dict[str, dict[str, Any]] = {}
    lines: dict[str, dict[str, int]] = {}
    broken: set[str] = set()   # workflows GitHub refuses: none of their jobs start
    for path in workflow_files(root, scan):
        rel = path.relative_to(root).as_posix()
        loaded = _load(path, root, scan)
        if loaded is not None:
            docs[rel] = loaded[0]
            lines[rel] = _key_lines(loaded[1])
        elif any(where == rel for where, _line in scan.broken.values()):
            broken.add(rel)
    _drop_refused(scan, root, docs, lines, broken)
    base_ctx = dict(adapter.context)
    acts = activations(docs, root, base_ctx)
    for rel, doc in docs.items():
        scan.triggers[rel] = workflow_triggers(doc)
        for key, job in doc["jobs"].items():
            oversize = oversize_matrix(job)
            if oversize:
                scan.input_findings.append(("oversize-matrix", f"{rel}:{str(key)[:80]}: {oversize}", rel,
                                            lines[rel].get(f"job:{key}", 0)))
            if isinstance(job, dict):
                scan.job_lines[(rel, str(key))] = lines[rel].get(f"job:{key}", 0)
                _scan_job(ScanContext(scan, adapter, root, rel, doc, str(key), job, acts[rel], base_ctx, lines[rel]))
    scan.input_findings += fork_findings(docs, scan.runs_on, lines, base_ctx, catalog_runner_labels(root))
    return scan


def _drop_refused(scan: WorkflowScan, root: Path, docs: dict[str, dict[str, Any]], lines: dict[str, dict[str, int]],
                  broken: set[str]) -> None:
    """Remove from ``docs`` every workflow GitHub refuses as a whole (ci/github/refusals.py; a job calling a
    local workflow that is not a workflow file of the tree, or one that is refused or not valid YAML, up a
    chain of callers of any length, in linear time), each reported as broken (unknown-suite, keyed by the
    file): none of its jobs start, so none of its steps may count as a run."""
    refused = {rel: [(lines[rel].get(f"job:{key}", 1) if key else 1, why) for key, why in refusals(doc)]
               for rel, doc in docs.items()}
    callers: dict[str, list[tuple[str, str, Any]]] = {}   # callee -> (caller, job key, its uses)
    for rel, doc in docs.items():
        for key, job in doc["jobs"].items():
            uses = job.get("uses") if isinstance(job, dict) else None
            why, callee = _local_call(root, uses)
            if why:
                refused[rel].append((lines[rel].get(f"job:{key}", 1),
                                     f"job {str(key)[:80]} calls {short(uses)}, {why}"))
            elif callee is not None:
                callers.setdefault(callee, []).append((rel, str(key), uses))
    queue = [rel for rel, whys in refused.items() if whys] + sorted(broken)
    while queue:   # a caller of a refused workflow is refused: once, for the first such call found
        for rel, key, uses in callers.get(queue.pop(), ()):
            if rel in refused and not refused[rel]:
                refused[rel].append((lines[rel].get(f"job:{key}", 1),
                                     f"job {key[:80]} calls {short(uses)}, which GitHub refuses"))
                queue.append(rel)
    for rel, whys in refused.items():
        if whys:
            for line, why in whys:
                _broken(scan, rel, line or 1, f"{rel}:{line or 1}: {why}: GitHub refuses the whole workflow, none "
                        "of its jobs start")
            del docs[rel]
            broken.add(rel)


def _local_call(root: Path, uses: Any) -> tuple[str | None, str | None]:
    """(why GitHub refuses a workflow with a job ``uses: ./...``, None) or (None, the called workflow's path
    when it is a workflow file of the folder; None for a remote ``uses``). A callee that is in the folder
    but unreadable already has its unreadable-input finding."""
    if not isinstance(uses, str) or not uses.startswith("./"):
        return None, None
    target = uses[2:].split("@", 1)[0]
    parent, _, name = target.rpartition("/")
    path = root / target
    if ".." in target.split("/") or not is_inside(root, path.parent):
        return "a path out of the audited tree", None   # not looked at
    if parent == WORKFLOW_DIR and name.endswith((".yml", ".yaml")) and (path.is_file() or path.is_symlink()):
        return None, called_file(uses, root)   # a workflow of the folder: read (or reported unreadable)
    if not path.exists() and not path.is_symlink():
        return "not in the audited tree", None
    return f"not a workflow file directly in {WORKFLOW_DIR}/ (the only place GitHub calls one from)", None


def catalog_runner_labels(root: Path) -> tuple[str, ...]:
    """The ``runs_on`` labels of the GPU hardware in the tree's catalog (none when it has no readable one)."""
    from ci.registry.catalog import CATALOG_PATH, CatalogError, load_catalog

    if not (root / CATALOG_PATH).is_file():
        return ()
    try:
        catalog = load_catalog(root)
    except (CatalogError, UnreadableFile, yaml.YAMLError):
        return ()
    return tuple(dict.fromkeys(label for hw in catalog.hardware.values() if hw.is_gpu for label in hw.runs_on))


def _step_label(step: dict[str, Any], index: int) -> str:
    name = step.get("name") or step.get("id")
    return str(name) if name else f"step {index + 1}"


def _run_defaults(owner: dict[str, Any]) -> dict[str, Any]:
    """The ``defaults: run:`` mapping of a job or workflow ({} when it has none, or a crafted non-mapping)."""
    defaults = owner.get("defaults")
    run = defaults.get("run") if isinstance(defaults, dict) else None
    return run if isinstance(run, dict) else {}


def _shell_of(step: dict[str, Any], *defaults: dict[str, Any]) -> str | None:
    """The shell a step runs in: its own ``shell:``, else the job's, else the workflow's default (None:
    GitHub's unnamed default). A crafted non-string value is read as its text: a custom shell with no
    ``-e``, so a failure it could hide counts as hidden (never a crash, never a pass)."""
    shell = step.get("shell") or next((d.get("shell") for d in defaults if d.get("shell")), None)
    return None if shell is None else shell if isinstance(shell, str) else short(shell)


def _runs_on(cx: ScanContext) -> tuple[str, ...]:
    """The job's runner labels, resolved through the expression context (``${{ inputs.runner }}``)."""
    raw = cx.job.get("runs-on")
    tokens = [str(x) for x in raw] if isinstance(raw, list) else [str(raw)] if raw else []
    if not any("${{" in t for t in tokens):
        return tuple(tokens)
    labels: list[str] = []
    for act in cx.acts or [Activation("none", ())]:
        rows, _why = matrix_rows(cx.job, act.context(cx.base_ctx))
        for row in rows:
            resolver = cx.resolver({}, row, act)
            for token in tokens:
                got = resolver.values(token)
                if got is None:
                    return tuple(tokens)
                labels += [g for g in got if g]
    return tuple(dict.fromkeys(labels)) or tuple(tokens)


def _row_runners(cx: ScanContext, resolver: Resolver) -> tuple[str, ...]:
    """runs-on labels for one activation and matrix row (the raw tokens when they do not resolve)."""
    raw = cx.job.get("runs-on")
    tokens = [str(x) for x in raw] if isinstance(raw, list) else [str(raw)] if raw else []
    labels: list[str] = []
    for token in tokens:
        got = resolver.values(token) if "${{" in token else [token]
        if got is None:
            return tuple(tokens)
        labels += [g for g in got if g]
    return tuple(labels)


Found = dict[Target, tuple[set[str], set[str], set[PathEvent], list[str], set[str], list[str]]]
# per target: (definite events, maybe events, path-gated events, why maybe, runner labels, why it never runs)


def _scan_job(cx: ScanContext) -> None:
    """Record the runs-on labels of one job and, for each step that starts the runner, its targets and masks."""
    scan = cx.scan
    scan.runs_on[(cx.rel, cx.key)] = _runs_on(cx)
    defaults, wf_defaults = _run_defaults(cx.job), _run_defaults(cx.doc)
    filters = tuple(sorted({a.filtered for a in cx.acts if a.filtered}))
    opened = _env_opened_by(cx)
    env_written: tuple[list[str], list[str]] = ([], [])   # earlier steps' $GITHUB_ENV writes of shell variables
    for index, step in expanded_steps(sequence(cx.job.get("steps")), cx.root):
        if not isinstance(step, dict):
            continue
        if not isinstance(step.get("run"), str):
            uses = str(step.get("uses") or "")
            if uses and not uses.startswith("actions/") and not opened:
                opened = f"step {_step_label(step, index)} (uses: {uses}) may export any variable"
            continue
        if not opened and writes_github_env(step["run"]):
            opened = f"step {_step_label(step, index)} writes $GITHUB_ENV"
        written = env_written
        proven, unproven = github_env_masks(step["run"], _step_label(step, index))
        env_written = (env_written[0] + proven, env_written[1] + unproven)
        if not cx.adapter.mentions_runner(step["run"]):
            continue
        label = _step_label(step, index)
        where = f"{cx.rel}:{cx.key}:{label}"
        line = cx.lines.get(label, scan.job_lines.get((cx.rel, cx.key), 0))
        if len(step["run"]) > MAX_SCRIPT and cx.adapter.mentions_runner(step["run"][MAX_SCRIPT - 256:]):
            # the reader stops at MAX_SCRIPT: a runner named past it (a run, a mask) would go unseen
            scan.input_findings.append((
                "unreadable-input", f"{where}: a run: script of {len(step['run'])} characters names the runner "
                f"past the first {MAX_SCRIPT} the audit reads: what runs there is not seen (split the script "
                "into a file the step calls)", cx.rel, line))
        events = step_events(cx.doc, cx.key, cx.job, step, cx.acts, cx.base_ctx)
        shell = _shell_of(step, defaults, wf_defaults)
        cx.shell = step_shell(shell)
        cx.workdir = _workdir(step, defaults, wf_defaults)
        found, call_lines, evaluated = _step_targets(cx, step, events, where, line, opened)
        if not found and not call_lines:
            continue
        commands = split_commands(step["run"])
        calls = [(k, call) for ln, call in call_lines for k in _command_at(cx.adapter, commands, ln)]
        judged = [f"if the runner fails: {why}" for why, _proven in evaluated]
        # a bash script the tree reading followed to the end on every path: its answer is the script's
        sure = cx.shell.bash and all(proven for _why, proven in evaluated)
        masks = list(dict.fromkeys(command_masks(cx.adapter, commands, calls, shell, judged, sure)
                                   + env_masks(step, cx.job, cx.doc) + written[0] + written[1] + events.masks))
        scan.masked += [f"{where}: {m}" for m in masks]
        scan.masked_unproven |= {f"{where}: {m}" for m in events.unproven_masks + written[1]}
        scan.masked_unproven |= {f"{where}: if the runner fails: {why}" for why, proven in evaluated if not proven}
        for target, (evs, maybe, gated, why, runners, never) in found.items():
            never_runs = events.never or (bool(never) and not (evs or maybe or gated))
            scan.refs.append(StepRun(
                cx.rel, cx.key, label, target.kind, target.id, target.shard, frozenset(evs), cx.seen,
                tuple(masks), never_runs, filters, tuple(sorted(gated)), frozenset(maybe),
                tuple(why), target.shard_unknown, line, tuple(sorted(runners)),
                never[0] if never_runs and never and not events.never else ""))


def _env_opened_by(cx: ScanContext) -> str:
    """Why a name the workflow never sets may still hold a value in this job ("" when nothing can set it)."""
    if cx.job.get("container"):
        return "the job runs in a container, whose image sets its own environment"
    if cx.rel not in cx.scan.env_writers:   # once per workflow, not once per job (a file may hold thousands)
        cx.scan.env_writers[cx.rel] = any(
            isinstance(step, dict) and writes_github_env(str(step.get("run") or ""))
            for other in mapping(cx.doc.get("jobs")).values() if isinstance(other, dict)
            for step in sequence(other.get("steps")))
    return "a step of this workflow writes $GITHUB_ENV" if cx.scan.env_writers[cx.rel] else ""


def _workdir(step: dict[str, Any], *defaults: dict[str, Any]) -> str:
    """The step's ``working-directory`` relative to the tree ("" the root); None-like text when unknown."""
    wd = step.get("working-directory") or next((d.get("working-directory") for d in defaults
                                                if d.get("working-directory")), "")
    return wd if isinstance(wd, str) else "${unknown}"


def _source_reader(root: Path):
    """Reads a file a script sources, when it is a regular file inside the tree (never outside it)."""
    def read(rel: str) -> str | None:
        if not rel or rel == ".." or rel.startswith("../") or "$" in rel:
            return None
        try:
            return read_inside(root, root / rel, MAX_SCRIPT)
        except UnreadableFile:
            return None
    return read


def _command_at(adapter: Adapter, commands: list, line: int) -> list[int]:
    """Index of the command of the flat reading (ci/github/shell.py) that starts at ``line`` and starts the
    runner (else the first command there), for the checks of what masks its exit."""
    here = [k for k, c in enumerate(commands) if c.line == line and c.words and not not_a_run(c.words)]
    return [k for k in here if adapter.find_call(commands[k].words) is not None][:1] or here[:1]


def _shell_env(cx: ScanContext, step: dict[str, Any], resolver: Resolver, opened: str) -> ShellEnv:
    known, unknown = [], set()
    shell = cx.shell
    for scope in (step, cx.job, cx.doc, cx.job.get("container") if isinstance(cx.job.get("container"), dict) else {}):
        env = scope.get("env") if isinstance(scope, dict) else None
        for name, raw in env.items() if isinstance(env, dict) else ():
            name = str(name)
            if name in unknown or any(k == name for k, _v in known):
                continue
            got = resolver.values("" if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw))
            if got is not None and len(got) == 1:
                known.append((name, got[0]))
            else:
                unknown.add(name)
    return ShellEnv(tuple(known), frozenset(unknown), not opened, opened, shell.errexit, shell.pipefail,
                    "" if shell.errexit else "the step's shell runs the script without `-e`", cx.workdir)


def _reading(cx: ScanContext, step: dict[str, Any], resolver: Resolver, opened: str) -> Reading:
    """The step's script read for one activation and matrix row (``${{ }}`` substituted first).

    Each row whose values change the script (or its env) is a fresh read, so rows x script size
    (256 rows of a 42 KB script: 93 s) is bounded: the first read of each run: text is free, reads of
    it again for other rows count against MAX_REREAD_CHARS per scan. Past that, a new row reads the
    script once with every ``${{ }}`` and env value unknown (memoized per step): the runner's
    options are still resolved per row, but what depends on a row's values inside the script is a
    maybe (unproven), never a guess. Within the budget every answer is the per-row one."""
    def value(body: str) -> str | None:
        got = resolver.expression(body)
        return got[0] if got is not None and len(got) == 1 else None
    template = step["run"]
    script = substitute(template, value)
    env = _shell_env(cx, step, resolver, opened)
    key = (script, env)
    scan = cx.scan
    adapter = cx.adapter

    def is_call(words: tuple[str, ...]) -> bool:
        return not not_a_run(words) and adapter.find_call(words) is not None

    def read(script_and_env: tuple[str, ShellEnv]) -> Reading:
        """The reading, keeping only the runner calls (at most MAX_RUNNER_CALLS; ``calls_cut`` counts the rest)."""
        got = read_runs(*script_and_env, runner=is_call, source=_source_reader(cx.root), budget=scan.steps)
        calls = tuple(run for run in got.runs if is_call(run.words))
        return replace(got, runs=calls[:MAX_RUNNER_CALLS], calls_cut=max(0, len(calls) - MAX_RUNNER_CALLS))

    if key not in scan.readings:
        first = template not in scan.read_templates
        if not first and scan.reread_chars + len(script) > MAX_REREAD_CHARS:
            key = _row_free_key(cx, step, template, value, env)
            if key not in scan.readings:
                scan.readings[key] = read(key)
            return scan.readings[key]
        if not first:
            scan.reread_chars += len(script)
        scan.read_templates.add(template)
        scan.readings[key] = read(key)
    return scan.readings[key]


_ROW_WORDS = ("matrix", "strategy", "env.")   # an expression naming one may differ between matrix rows


def _row_free_key(cx: ScanContext, step: dict[str, Any], template: str, value, env: ShellEnv) -> tuple[str, ShellEnv]:
    """(script, env) of a step read past the re-read budget: the same for every matrix row, because every
    ``${{ }}`` and env value that may differ between rows is left unknown (the rest is substituted)."""
    script = substitute(template, lambda body: None if any(w in body for w in _ROW_WORDS) else value(body))
    per_row = {str(name) for scope in (step, cx.job, cx.doc, cx.job.get("container"))
               for name, raw in mapping(scope.get("env") if isinstance(scope, dict) else None).items()
               if "${{" in str(raw) and any(w in str(raw) for w in _ROW_WORDS)}
    known = tuple((name, got) for name, got in env.known if name not in per_row)
    return script, ShellEnv(known, env.unknown_names | per_row, env.unset_is_empty, env.why_open)


def _step_targets(cx: ScanContext, step: dict[str, Any], events: StepEvents, where: str, line: int,
                  opened: str) -> tuple[Found, list[tuple[int, RunnerCall]], list[tuple[str, bool]]]:
    """Targets the step's script runs over every activation and matrix row, read by ci/github/shell_eval.py:
    per target its events (a run reached only past a run-time condition is a *maybe*, with the construct
    as why; one never reached is recorded with why); unresolvable calls go to ``scan.unresolved``."""
    found: Found = {}
    evaluated: dict[tuple[str, bool], None] = {}   # what can swallow a call's failure (why, proven)
    call_lines: dict[tuple[int, str], RunnerCall] = {}
    unresolved: dict[str, UnresolvedStep] = {}
    cut: set[str] = set()
    acts = cx.acts or [Activation("none", ())]
    for index, act in enumerate(acts):
        status = events.status[index] if index < len(events.status) else None
        act_why = events.why_by_act[index] if index < len(events.why_by_act) else []
        ctx = act.context(cx.base_ctx)
        rows, matrix_why = matrix_rows(cx.job, ctx)
        for row in rows:
            resolver = cx.resolver(step, row, act)
            reading = _reading(cx, step, resolver, opened)
            runners = _row_runners(cx, resolver)
            per_target: dict[Target, list] = {}
            if reading.calls_cut and where not in cut:
                cut.add(where)
                cx.scan.input_findings.append((
                    "unreadable-input", f"{where}: its run: script makes more than {MAX_RUNNER_CALLS} distinct "
                    f"runner calls ({reading.calls_cut} more were not followed): what they run is not seen "
                    "(loop over the suites in a file the step calls)", cx.rel, line))
            for run in reading.runs:   # runner calls only (_reading): echo/printf/grep naming it are not runs
                call = cx.adapter.find_call(run.words)
                if call is None:
                    continue
                if not run.never:
                    call_lines.setdefault((run.line, call.text), call)
                    evaluated.update(dict.fromkeys(reading.masks.get((run.line, run.words), ())))
                for target in _targets_of(cx, call, resolver, act, matrix_why, unresolved, where, line,
                                          report=not run.never):
                    per_target.setdefault(target, []).append(run)
            for target, runs in per_target.items():
                state, shell_why = reading.state(runs)
                if state == "run" and not cx.shell.bash:   # read as bash, which it is not: unproven
                    state, shell_why = "maybe", f"{cx.shell.why}, and the audit reads the script as bash"
                evs, maybe, gated, why, labels, never = found.setdefault(target, (set(), set(), set(), [], set(), []))
                if state == "never":
                    never.append(f"never reached: {shell_why}")
                    continue
                labels |= set(runners)
                if state == "maybe" and status in ("definite", "path"):
                    status_here, whys = "maybe", [f"the script runs it only if {shell_why}"]
                else:
                    status_here = status
                    whys = act_why + ([f"the script runs it only if {shell_why}"] if state == "maybe" else [])
                if status_here == "definite":
                    evs.add(act.event)
                elif status_here == "path":
                    gated.add((act.event, *act.paths))
                elif status_here == "maybe":
                    maybe.add(act.event)
                    why += [w for w in act_why + whys if w not in why]
    cx.scan.unresolved += list(unresolved.values())
    cx.scan.problems += [f"{where}: {u.problem}" for u in unresolved.values()]
    return found, [(ln, call) for (ln, _text), call in call_lines.items()], list(evaluated)


def _targets_of(cx: ScanContext, call: RunnerCall, resolver: Resolver, act: Activation, matrix_why: str | None,
                unresolved: dict[str, UnresolvedStep], where: str, line: int, *, report: bool) -> list[Target]:
    """The targets of one runner call for one row; a call that cannot be resolved is recorded (``report``)."""
    option_values: dict[str, list[str]] = {}
    for name, token in call.options.items():
        got = resolver.values(token) if token is not None else None
        if got is None and not cx.adapter.partial_targets:
            bad = f"{name} has no value" if token is None else f"cannot resolve {name} {token}"
            if report:
                unresolved.setdefault(bad, UnresolvedStep(where, bad, (), frozenset({act.event}), line))
            return []
        option_values[name] = got if got is not None else [UNRESOLVED]
    out: list[Target] = []
    names = list(option_values)
    for combo in itertools.product(*(option_values[n] for n in names)):
        options = dict(zip(names, combo))
        targets, problem = cx.adapter.targets(options)
        if problem and act.event != "none" and report:   # a workflow nothing starts reports nothing unresolved
            known = tuple(sorted((k, v) for k, v in options.items() if v != UNRESOLVED))
            if matrix_why and UNRESOLVED in combo:
                problem += f" ({matrix_why})"
            old = unresolved.setdefault(problem, UnresolvedStep(where, problem, known, frozenset(), line))
            unresolved[problem] = UnresolvedStep(where, problem, known, old.events | {act.event}, line)
        for target in targets:
            if target.shard_unknown and matrix_why:
                target = Target(target.kind, target.id, target.shard, matrix_why)
            out.append(target)
    return out


def runs_for(refs: Iterable[StepRun], kind: str, target: str) -> list[StepRun]:
    return [r for r in refs if r.kind == kind and r.target == target]
