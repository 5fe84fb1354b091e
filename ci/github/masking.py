"""What can turn a runner's failure green, and under which events a job and a step run at all.

A step's exit is masked by ``continue-on-error`` (step or job), a step ``if:`` that is not
definitely true (it can skip the run while the job stays green), the shell around the command
(ci/github/shell.py), options on the runner's own command line (the adapter), and environment
variables that rewrite pytest's selection. Events are three-valued: a job or step ``if:`` that
is unknown for an event (change detection, a repository gate) makes that event a *maybe*.
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ci.adapters import Adapter, RunnerCall
from ci.github.expressions import ExpressionError, evaluate, is_truthy, truth
from ci.safe_yaml import short
from ci.github.shell import Command, FlatLooks, masking
from ci.github.triggers import Activation

# environment variables that change what pytest selects or how it reports, wherever a workflow sets them
MASKING_ENV = {"PYTEST_ADDOPTS": "adds pytest options (-k, --deselect, -p no:...) behind the runner's back",
               "PYTEST_PLUGINS": "loads extra pytest plugins that can rewrite outcomes",
               "BASH_ENV": "makes bash run that file before the script (it can exit 0 or turn errexit off)",
               "ENV": "makes sh run that file before the script (it can exit 0 or turn errexit off)",
               "SHELLOPTS": "sets shell options before the script starts (errexit may be off)",
               "BASHOPTS": "sets shell options before the script starts"}
SHELL_ENV_NAMES = ("BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS")
_NAMES_RE = re.compile(r"\b(" + "|".join(SHELL_ENV_NAMES) + r")\b")
_ENV_LITERAL_RE = re.compile(r"^\s*(echo|printf)\s+(-\w+\s+)*[\"']?([A-Za-z_]\w*)=")
STATUS_OVERRIDE_RE = re.compile(r"\b(always|failure|cancelled)\s*\(")
PathEvent = tuple[str, tuple[str, ...], tuple[str, ...]]   # (event, paths, paths-ignore)


def env_masks(step: dict[str, Any], job: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    out = []
    for scope, what in ((step, "step"), (job, "job"), (doc, "workflow")):
        env = scope.get("env") if isinstance(scope, dict) else None
        for name in env if isinstance(env, dict) else ():
            if name in MASKING_ENV:
                out.append(f"{what} env {name}={short(env[name])} {MASKING_ENV[name]}")
    return out


def without_comments(script: str) -> str:
    """``script`` without the lines that are whole bash comments: a line whose first non-blank character is
    ``#``, which starts outside any quote (quotes and backslashes tracked across lines) and does not continue
    the line before it (``\\`` at its end). From the first heredoc (``<<``) or ``$'`` on, whose bodies and
    escapes this does not track, nothing more is dropped, so a mistake can only keep a comment, never drop a
    command. What a comment says never runs."""
    lines, out = script.split("\n"), []
    quote, escaped, tracking = "", False, True
    for n, line in enumerate(lines):
        continued = n > 0 and lines[n - 1].endswith("\\")
        if tracking and not quote and not continued and line.lstrip().startswith("#"):
            continue
        out.append(line)
        for i, c in enumerate(line if tracking else ""):
            if escaped:
                escaped = False
            elif c == "\\" and quote != "'":
                escaped = True
            elif quote:
                quote = "" if c == quote else quote
            elif c == "#" and (i == 0 or line[i - 1] in " \t;&|()"):
                break  # the rest of the line is a comment (kept)
            elif c == "<" and line[i + 1:i + 2] == "<" or c == "$" and line[i + 1:i + 2] == "'":
                tracking = False
                break
            elif c in "'\"":
                quote = c
        escaped = False  # a backslash at a line's end joins lines; inside quotes it escapes the newline
    return "\n".join(out)


def writes_github_env(script: str) -> bool:
    """Whether ``script`` names ``GITHUB_ENV`` outside a comment (a write to it, or one it may make)."""
    return "GITHUB_ENV" in script and "GITHUB_ENV" in without_comments(script)


def github_env_masks(script: str, label: str) -> tuple[list[str], list[str]]:
    """(proven, unproven) masks from an earlier step of the job that writes ``$GITHUB_ENV``: every later
    step gets those variables. Naming BASH_ENV, ENV, SHELLOPTS or BASHOPTS is a mask; a write whose
    variable name is not written out (``echo "$LINE" >> $GITHUB_ENV``, a heredoc, ``cat f >>``) may be one.
    Comments are not read: a comment that mentions GITHUB_ENV writes nothing."""
    if not writes_github_env(script):
        return [], []
    script = without_comments(script)
    named = sorted(set(_NAMES_RE.findall(script)))
    if named:
        return [f"step {label} writes $GITHUB_ENV and names {', '.join(named)}: later steps' shells "
                "run with it (a file run first, or options such as errexit off)"], []
    for line in script.splitlines():
        if "GITHUB_ENV" in line and not _ENV_LITERAL_RE.match(line):
            return [], [f"step {label} writes $GITHUB_ENV with a variable name known only at run time: it may "
                        "set BASH_ENV or SHELLOPTS for later steps' shells"]
    return [], []


def truthy_flag(value: Any, ctx: Mapping[str, Any]) -> bool | None:
    """continue-on-error: a literal or an expression; None when unknown."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    try:
        return is_truthy(evaluate(value, ctx))
    except ExpressionError:
        return None


def command_masks(adapter: Adapter, commands: list[Command], calls: list[tuple[int, RunnerCall]],
                  shell: str | None, evaluated: list[str] = (), judged: bool = False) -> list[str]:
    """What in the script around each runner call (and in the call itself) can mask its exit.

    ``judged``: the script is bash and the syntax-tree reading followed every runner call of every row to
    the end of every path (ci/github/shell_eval.py ``judge_call``; nothing in ``evaluated`` is unproven:
    no code known only at run time, no reading it gave up on): its answer, ``evaluated`` (the paths on
    which a failing runner reaches a green end), is the script's. It follows what the flat reader only
    matches, so ``run || exit 1``, ``|| (echo failed; exit 1)`` and ``rc=$?; if [ $rc -ne 0 ]; then exit
    $rc; fi`` are not masks there. Otherwise the flat reader's patterns (``|| true``, a pipe without
    pipefail, ...) and, when it finds none, ``evaluated``."""
    own = [m for _k, call in calls for m in adapter.call_masks(call)]
    if judged:
        return own + list(evaluated)
    looks = FlatLooks()   # shared by the calls: a place two calls reach is judged once
    flat = [m for k, _call in calls for m in masking(commands, k, shell, looks=looks)]
    return flat + own + ([] if flat else list(evaluated))


def job_state(doc: dict[str, Any], key: str, ctx: Mapping[str, Any], memo: dict[str, bool | None],
              depth: int = 0) -> bool | None:
    """Job ``key`` runs: True (definitely), False (never), None (known only at run time). Its ``if:`` and,
    unless the if: overrides the status check with always()/failure()/cancelled(), every job it ``needs``."""
    if key in memo:
        return memo[key]
    memo[key] = False   # a cycle never runs
    job = doc["jobs"].get(key)
    if not isinstance(job, dict) or depth > 20:
        return False
    cond = job.get("if")
    state = truth(cond, ctx)
    if state is not False and not (isinstance(cond, str) and STATUS_OVERRIDE_RE.search(cond)):
        needs = job.get("needs") or []
        needs = [needs] if isinstance(needs, str) else needs
        states = [job_state(doc, str(n), ctx, memo, depth + 1) for n in needs]
        if any(s is False for s in states):
            state = False
        elif state is True and any(s is None for s in states):
            state = None
    memo[key] = state
    return state


@dataclass
class StepEvents:
    """Under which events a step runs: definitely, through a path filter, maybe (and why), and its masks."""
    definite: set[str] = field(default_factory=set)
    path_gated: set[PathEvent] = field(default_factory=set)
    maybe: set[str] = field(default_factory=set)
    why: list[str] = field(default_factory=list)
    masks: list[str] = field(default_factory=list)
    unproven_masks: list[str] = field(default_factory=list)   # masks that hang on a run-time value
    never: bool = False                                       # job or step if: false under every activation
    status: list[str | None] = field(default_factory=list)    # per activation: "definite", "path", "maybe", None
    why_by_act: list[list[str]] = field(default_factory=list)


def step_events(doc: dict[str, Any], key: str, job: dict[str, Any], step: dict[str, Any],
                acts: list[Activation], base_ctx: Mapping[str, Any]) -> StepEvents:
    out = StepEvents()
    states = []
    for act in acts:
        ctx = act.context(base_ctx)
        j = job_state(doc, key, ctx, {})
        s = truth(step.get("if"), ctx)
        states.append(j is False or s is False)
        status, why = None, []
        if j is not False and j and s is True and not act.filtered and not act.unproven:
            status = "definite" if act.paths is None else "path"
            if act.paths is None:
                out.definite.add(act.event)
            else:
                out.path_gated.add((act.event, *act.paths))
        elif j is not False and s is not False and not act.filtered:
            status = "maybe"
            out.maybe.add(act.event)
            if act.unproven:
                why.append(act.unproven)
            if j is None:
                why.append(f"job {key} if: {short(job.get('if'))} (or a job it needs) is known only at run time")
            if s is None:
                why.append(f"step if: {short(step.get('if'))} is known only at run time")
        out.status.append(status)
        out.why_by_act.append(why)
        out.why += why
        if j is False:
            continue
        if "if" in step and s is not True:
            text = (f"step if: {short(step.get('if'))} is not definitely true on {act.event}: "
                    "it can skip the run while the job stays green")
            out.masks.append(text)
            if s is None:
                out.unproven_masks.append(text)
        for scope, what in ((step, "step"), (job, "job")):
            flag = truthy_flag(scope.get("continue-on-error"), ctx)
            if flag is not False:
                shown = short(scope.get("continue-on-error"))
                text = f"{what} continue-on-error: {shown}: a failure is reported as success"
                out.masks.append(text)
                if flag is None:
                    out.unproven_masks.append(text)
    out.never = bool(acts) and all(states)
    out.why = list(dict.fromkeys(out.why))
    return out
