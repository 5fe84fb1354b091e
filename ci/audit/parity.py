"""Collection parity: what pytest collects from ``registered/`` versus what the registry knows.

:func:`compare` is pure (node ids in, ``file:line: message`` lines out); a
pytest item is known when a registration names it, its class, or (for a
parametrization ``test[x]``) its function. :func:`pytest_collected` runs
pytest's own collection in a subprocess (that imports the test modules, so
torch) -- the per-commit ``ci`` job does it; the audit never imports tests.

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

_PARAMS_RE = re.compile(r"\[.*\]$", re.S)
CPU_ENV = {"TRITON_INTERPRET": "1", "DSPARK_KERNEL_BACKEND": "triton-interpret"}


class ParityError(RuntimeError):
    """pytest's collection itself failed (import error, bad conftest)."""


def base_id(item: str) -> str:
    """``file::Class::test[param]`` -> ``file::Class::test``."""
    return _PARAMS_RE.sub("", item)


def _known(item: str, registered: set[str]) -> bool:
    parts = base_id(item).split("::")
    return any("::".join(parts[:i]) in registered for i in range(len(parts), 1, -1))


def _line_of(root: Path, node_id: str) -> int:
    """Line where a node id's name is defined, assigned or imported in its file (1 when unknown)."""
    rel, _, rest = node_id.partition("::")
    names = base_id(rest).split("::") if rest else []
    tree = _parse(root / rel)
    if tree is None or not names:
        return 1
    body: list[ast.stmt] = tree.body
    line = 1
    for name in names:
        hit = None
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                hit = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    hit = node
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if any((a.asname or a.name.rpartition(".")[2]) == name for a in node.names):
                    hit = node
        if hit is None:
            return line
        line = hit.lineno
        body = getattr(hit, "body", [])
    return line


@lru_cache(maxsize=256)
def _parse_cached(path: str, mtime: float) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None


def _parse(path: Path) -> ast.Module | None:
    if not path.is_file():
        return None
    return _parse_cached(str(path), path.stat().st_mtime)


def compare(collected: Iterable[str], registered: Mapping[str, str], root: str | Path = ".") -> list[str]:
    """Differences between pytest's items and the registry, both ways, each as ``file:line: message``.

    ``registered`` maps each registered node id to its ``file:line`` (the decorator).
    """
    collected = list(dict.fromkeys(collected))
    reg_ids = set(registered)
    root = Path(root)
    problems = []
    for item in collected:
        if not _known(item, reg_ids):
            rel = item.partition("::")[0]
            problems.append(f"{rel}:{_line_of(root, item)}: pytest collects {item}, which no registration "
                            "covers (imported, generated or inherited tests run unregistered)")
    bases = {base_id(i) for i in collected}
    for node_id, where in sorted(registered.items()):
        covered = any(b == node_id or b.startswith(node_id + "::") for b in bases)
        if not covered:
            problems.append(f"{where}: {node_id} is registered, but pytest collects no test from it "
                            "(not collectable: __init__, __test__ = False, a name pytest ignores...)")
    return problems


def parse_collect_output(text: str) -> list[str]:
    """Node ids from ``pytest --collect-only -q`` output (stops at the first blank line)."""
    ids = []
    for line in text.splitlines():
        if not line.strip():
            break
        if "::" in line:
            ids.append(line.strip())
    return ids


def pytest_collected(root: str | Path, target: str = "registered", env: Mapping[str, str] | None = None,
                     timeout: float = 600) -> list[str]:
    """Node ids pytest collects under ``root/target`` (a subprocess, with the cpu job's env)."""
    run_env = dict(os.environ)
    run_env.pop("PYTEST_ADDOPTS", None)
    run_env.update(CPU_ENV if env is None else env)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-o", "addopts=", target],
                          cwd=root, env=run_env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 5):
        raise ParityError(f"pytest --collect-only {target} failed (exit {proc.returncode}):\n"
                          + (proc.stdout + proc.stderr)[-4000:])
    return parse_collect_output(proc.stdout)
