"""What GitHub refuses before any job of a workflow starts: the whole file is then "not valid", so none of
its jobs run, whatever their steps say. Only refusals that are certain are listed (each one GitHub
documents or reports with a fixed message): keys a workflow, a job or a step cannot have
(``continue_on_error``, ``runs_on``), a step with both ``uses`` and ``run`` or neither, a job with
neither ``runs-on`` nor ``uses`` or without a list of ``steps``, ids that are not ids (``1build``) or
that repeat inside a job, ``needs`` naming a job the workflow does not have, ``needs`` that go round in
a cycle, and an expression whose grammar is wrong (``github.event_name = 'push'``, a ``${{`` never
closed). Only the grammar: an unknown function or context name is not a refusal here, and the expression
reader accepts every expression of the public workflows it was checked on (a false refusal would be an
error on a valid workflow). ``ci/github/scan.py`` drops a refused workflow before anything of it is
read, so its suites lose the runs it seemed to give them, and reports why (``unknown-suite``, keyed by
the file).
"""
from __future__ import annotations

import re
from typing import Any

from ci.github.expressions import embedded, syntax_error
from ci.safe_yaml import short

# the keys GitHub's workflow syntax allows (docs.github.com, "Workflow syntax for GitHub Actions")
WORKFLOW_KEYS = frozenset({"name", "run-name", "on", True, "permissions", "env", "defaults", "concurrency", "jobs"})
JOB_KEYS = frozenset({"name", "needs", "permissions", "runs-on", "environment", "concurrency", "outputs", "env",
                      "defaults", "if", "steps", "timeout-minutes", "strategy", "continue-on-error", "container",
                      "services", "snapshot"})
CALLER_KEYS = frozenset({"name", "uses", "with", "secrets", "needs", "if", "permissions", "concurrency", "strategy"})
STEP_KEYS = frozenset({"id", "if", "name", "uses", "run", "working-directory", "shell", "with", "env",
                       "continue-on-error", "timeout-minutes"})
ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}\Z")   # a job's or a step's id
MAX_SHOWN = 5   # refusals named per workflow (the first ones; one is enough to refuse it)


def refusals(doc: dict[Any, Any]) -> list[tuple[str, str]]:
    """Why GitHub refuses ``doc`` (a workflow whose ``jobs`` is a mapping), as (job key or "", reason);
    empty when nothing certain is wrong."""
    out: list[tuple[str, str]] = []
    for key in doc:
        if key not in WORKFLOW_KEYS:
            out.append(("", f"the workflow has a key {short(key)}, which GitHub does not know"))
    jobs = doc["jobs"]
    for key, job in jobs.items():
        out += [(str(key), why) for why in _job_refusals(key, job, jobs)]
    out += _expression_refusals(doc)
    cycle = _needs_cycle(jobs)
    if cycle:
        out.append((cycle[0], "its needs go round in a cycle: " + " -> ".join(short(k, 40) for k in cycle)))
    return out[:MAX_SHOWN]


def _job_refusals(key: Any, job: Any, jobs: dict[Any, Any]) -> list[str]:
    name = short(key, 80)
    if isinstance(key, str) and not ID.match(key):   # a YAML number or boolean: its text is not known here
        return [f"job id {name} is not an id (a letter or _, then letters, digits, _ or -)"]
    if not isinstance(job, dict):
        return [f"job {name} is {short(job)}, not a mapping"]
    out = []
    caller = "uses" in job
    allowed = CALLER_KEYS if caller else JOB_KEYS
    out += [f"job {name} has a key {short(k)}, which GitHub does not know"
            + (" in a job that calls a reusable workflow" if k in JOB_KEYS else "") for k in job if k not in allowed]
    if not caller and "runs-on" not in job:
        out.append(f"job {name} has neither runs-on nor uses")
    needs = job.get("needs", [])
    for need in [needs] if isinstance(needs, str) else needs if isinstance(needs, list) else [None]:
        if not isinstance(need, str) or need not in jobs:
            out.append(f"job {name} needs {short(need)}, which is not a job of this workflow")
    if caller:
        return out
    steps = job.get("steps")
    if not isinstance(steps, list):
        return out + [f"job {name} has no list of steps"]
    ids: set[str] = set()
    for index, step in enumerate(steps, 1):
        out += _step_refusals(name, index, step, ids)
    return out


def _step_refusals(job: str, index: int, step: Any, ids: set[str]) -> list[str]:
    where = f"job {job}, step {index}"
    if not isinstance(step, dict):
        return [f"{where} is {short(step)}, not a mapping"]
    out = [f"{where} has a key {short(k)}, which GitHub does not know" for k in step if k not in STEP_KEYS]
    if "uses" in step and "run" in step:
        out.append(f"{where} has both uses and run")
    elif "uses" not in step and "run" not in step:
        out.append(f"{where} has neither uses nor run")
    if "id" in step:
        got = step["id"]
        if isinstance(got, str) and not ID.match(got):
            out.append(f"{where} has id {short(got)}, which is not an id")
        elif got in ids:
            out.append(f"{where} repeats the id {short(got)} of an earlier step")
        else:
            ids.add(got)
    return out


def _expression_refusals(doc: dict[Any, Any]) -> list[tuple[str, str]]:
    """Expressions GitHub cannot parse: each ``${{ }}`` anywhere but ``on:``, and each job's and step's
    ``if:`` (an expression with or without the wrapper)."""
    out: list[tuple[str, str]] = []
    for key, value in doc.items():
        if key in ("on", True):
            continue
        if key != "jobs" or not isinstance(value, dict):
            out += [("", why) for why in _unparsable(value, f"the workflow's {short(key)}")]
            continue
        for job_key, job in value.items():
            name = f"job {short(job_key, 80)}"
            if isinstance(job, dict) and isinstance(job.get("if"), str) and "${{" not in job["if"]:
                out += [(str(job_key), why) for why in _unparsable("${{" + job["if"] + "}}", f"{name}'s if")]
            steps = job.get("steps") if isinstance(job, dict) else None
            for index, step in enumerate(steps if isinstance(steps, list) else [], 1):
                if isinstance(step, dict) and isinstance(step.get("if"), str) and "${{" not in step["if"]:
                    out += [(str(job_key), why) for why in _unparsable("${{" + step["if"] + "}}",
                                                                      f"{name}, step {index}'s if")]
            out += [(str(job_key), why) for why in _unparsable(job, name)]
    return out


def _unparsable(value: Any, where: str) -> list[str]:
    """Why GitHub cannot parse an expression inside ``value`` (strings at any depth; iterative)."""
    out, stack = [], [value]
    while stack and len(out) < MAX_SHOWN:
        item = stack.pop()
        if isinstance(item, dict):
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and "${{" in item:
            bodies, unclosed = embedded(item)
            if unclosed:
                out.append(f"{where} has a ${{{{ that is never closed")
            for body in bodies:
                why = syntax_error(body)
                if why:
                    out.append(f"{where} has an expression GitHub cannot parse: {why[:200]}")
    return out


def _needs_cycle(jobs: dict[Any, Any]) -> list[str] | None:
    """One cycle of ``needs`` (its job keys, the first repeated at the end), or None; iterative."""
    graph = {}
    for key, job in jobs.items():
        needs = job.get("needs", []) if isinstance(job, dict) else []
        needs = [needs] if isinstance(needs, str) else needs if isinstance(needs, list) else []
        graph[key] = [n for n in needs if isinstance(n, str) and n in jobs]
    state: dict[Any, int] = {}   # 1: on the current path, 2: done
    for start in graph:
        if start in state:
            continue
        path, stack = [start], [iter(graph[start])]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [str(k) for k in path[path.index(nxt):]] + [str(nxt)]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph[nxt]))
    return None
