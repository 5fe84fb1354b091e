"""Local reusable workflows (``jobs.X.uses: ./.github/workflows/y.yml``) and composite actions.

A called workflow (``on: workflow_call``) starts whenever a caller job does: it inherits each
caller activation, with ``inputs.*`` set from the caller's ``with:`` (evaluated per caller matrix
row; a value known only at run time is UNKNOWN; a missing input takes the callee's default).
A local composite action's ``run:`` steps are scanned as steps of the calling job.
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from ci.github.expressions import UNKNOWN, ExpressionError, evaluate, strip_wrapper, truth
from ci.safe_files import DEFAULT_MAX_BYTES, UnreadableFile, is_inside, read_inside
from ci.safe_yaml import mapping, sequence, short
from ci.github.matrix import matrix_rows
from ci.github.triggers import Activation, call_input_defaults, load_yaml, own_activations

MAX_CALL_DEPTH = 4


def called_file(uses: Any, root: Path) -> str | None:
    """The repo-relative path of a local ``uses: ./...`` (None for a remote one)."""
    if isinstance(uses, str) and uses.startswith("./"):
        if (root / uses[2:]).exists() and is_inside(root, root / uses[2:]):
            return (root / uses[2:]).resolve().relative_to(root.resolve()).as_posix()
        return uses[2:]
    return None


def _with_values(with_: Mapping[str, Any], ctx: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    out = []
    for name, value in with_.items():
        if isinstance(value, str) and "${{" in value:
            try:
                value = evaluate(value, ctx)
            except ExpressionError:
                value = UNKNOWN
            if isinstance(value, float) and value.is_integer():
                value = str(int(value))
        out.append((str(name), value))
    return tuple(out)


def activations(docs: dict[str, dict[str, Any]], root: Path,
                base_ctx: Mapping[str, Any]) -> dict[str, list[Activation]]:
    """Own triggers of each workflow, plus (for reusable workflows) the activations of the jobs that call them."""
    branch = str(base_ctx.get("default_branch", "main"))
    acts = {rel: own_activations(doc, branch) for rel, doc in docs.items()}
    for _ in range(MAX_CALL_DEPTH):
        changed = False
        for rel, doc in docs.items():
            for key, job in doc["jobs"].items():
                callee = called_file(job.get("uses"), root) if isinstance(job, dict) else None
                if callee not in docs:
                    continue
                with_ = job.get("with") if isinstance(job.get("with"), dict) else {}
                defaults = call_input_defaults(docs[callee])
                for act in list(acts[rel]):
                    ctx = act.context(base_ctx)
                    gate = truth(job.get("if"), ctx)
                    if gate is False:
                        continue
                    unproven = act.unproven or (
                        "" if gate else f"{rel}:{key} if: {short(job.get('if'))} is known only at run time")
                    rows, _why = matrix_rows(job, ctx)
                    for row in rows:
                        row_ctx = dict(ctx)
                        row_ctx["matrix.*"] = UNKNOWN if row.get("*") is UNKNOWN else None
                        row_ctx.update({f"matrix.{k}": v for k, v in row.items() if k != "*"})
                        given = dict(_with_values(with_, row_ctx))
                        inputs = {**defaults, **given}
                        new = Activation(act.event, tuple(sorted(inputs.items(), key=lambda kv: kv[0])),
                                         f"{rel}:{key}", act.filtered, act.extra, act.paths, unproven)
                        if new not in acts[callee]:
                            acts[callee].append(new)
                            changed = True
        if not changed:
            break
    return acts


def _action(root: Path, path: Path) -> Any:
    """An action.yml inside ``root``, parsed once per version of the file (many steps use the same action);
    None when it cannot be read safely (ci/safe_files.py: a link out of the tree, a device, oversize)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return _parsed(root, path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _parsed(root: Path, path: Path, _mtime_ns: int, _size: int) -> Any:
    try:
        return load_yaml(read_inside(root, path, DEFAULT_MAX_BYTES))
    except (UnreadableFile, yaml.YAMLError):
        return None


def composite_steps(step: dict[str, Any], root: Path) -> list[dict[str, Any]] | None:
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
    action = _action(root, path)
    runs = action.get("runs") if isinstance(action, dict) else None
    if not isinstance(runs, dict) or runs.get("using") != "composite":
        return None
    with_ = step.get("with") if isinstance(step.get("with"), dict) else {}
    defaults = {k: v.get("default") for k, v in mapping(action.get("inputs")).items() if isinstance(v, dict)}
    values = {**{k: v for k, v in defaults.items() if v is not None}, **with_}
    out = []
    for inner in sequence(runs.get("steps")):
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
        merged["env"] = {**mapping(step.get("env")), **mapping(inner.get("env"))}   # env: [a] reads as empty
        out.append(merged)
    return out


def expanded_steps(steps: list[Any], root: Path) -> list[tuple[int, Any]]:
    """(index in the job, step) with each local composite action replaced by its run: steps."""
    out: list[tuple[int, Any]] = []
    for index, step in enumerate(steps):
        inner = composite_steps(step, root) if isinstance(step, dict) else None
        out += [(index, s) for s in inner] if inner is not None else [(index, step)]
    return out
