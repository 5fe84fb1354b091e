"""Which per-commit GPU groups a pull request touches: path sets derived from what suites import.

    python -m ci.tools.changed_paths --event pull_request --base SHA [--head REV]   # key=true/false lines
    python -m ci.tools.changed_paths --list                                        # each group's path set

A group's path set is every test file its jobs run, the repository modules those files
import (transitively, read from syntax trees: ``import``/``from`` statements, relative
imports, and string literals naming a local module such as ``impl``'s lazy export table
or ``importlib.import_module("...")``), the package ``__init__`` files on the way, the
runner's own modules, and the declared extras below. On any event other than
``pull_request`` every group is ``true``: pushes to main and schedules run everything.
The ``per-commit`` workflow's ``changes`` job appends the output to ``$GITHUB_OUTPUT``.
Never imports torch, ``impl`` or test code.
"""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

from ci.registry.catalog import CatalogError
from ci.registry.collect import CollectionError
from ci.registry.group_plan import GroupView, by_schedule
from ci.registry.jobs import load_registry

LOCAL_PACKAGES = ("impl", "reference", "ci", "registered")
RUNNER_ENTRY = ("ci/runner/run_suite.py", "conftest.py", "registered/conftest.py")
EXTRAS = ("ci/hardware.yaml", "ci/durations.json", "noxfile.py", "pyproject.toml",
          ".github/workflows/per-commit.yml")


def module_path(root: Path, name: str) -> str | None:
    """Repository-relative file of a local module or package (None when not local / absent)."""
    if name.split(".")[0] not in LOCAL_PACKAGES:
        return None
    base = Path(*name.split("."))
    for rel in (base.with_suffix(".py"), base / "__init__.py"):
        if (root / rel).is_file():
            return rel.as_posix()
    return None


def _module_name(rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _with_parents(root: Path, name: str) -> list[str]:
    """The module's file plus every package ``__init__`` on the way (importing runs them)."""
    parts = name.split(".")
    out = []
    for i in range(1, len(parts) + 1):
        rel = module_path(root, ".".join(parts[:i]))
        if rel:
            out.append(rel)
    return out


def imported_modules(root: Path, rel: str) -> set[str]:
    """Local module names one file imports (statically or through a literal module name)."""
    tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=rel)
    package = _module_name(rel) if rel.endswith("__init__.py") else _module_name(rel).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)   # `from pkg import submodule`
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.split(".")[0] in LOCAL_PACKAGES and all(p.isidentifier() for p in text.split(".")):
                names.add(text)
    return {n for n in names if n and module_path(root, n.split(".")[0])}


def import_closure(root: Path, start: list[str]) -> set[str]:
    """Every repository file reachable from ``start`` (relative paths) through local imports."""
    seen: set[str] = set()
    todo = [rel for rel in start if (root / rel).is_file()]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        if not rel.endswith(".py"):
            continue
        for name in imported_modules(root, rel):
            todo.extend(p for p in _with_parents(root, name) if p not in seen)
    return seen


def test_files(group: GroupView) -> list[str]:
    return sorted({t.node_id.split("::")[0] for job in group.jobs for t in job.tests})


def group_paths(root: Path, group: GroupView) -> set[str]:
    files = import_closure(root, test_files(group) + list(RUNNER_ENTRY))
    return files | set(EXTRAS)


def gated_groups(registry) -> list[GroupView]:
    """The per-commit groups that need a GPU: the ones a pull request may skip."""
    return [g for g in by_schedule(registry, "per-commit") if g.hardware.is_gpu]


def changed_files(root: Path, base: str, head: str) -> list[str]:
    proc = subprocess.run(["git", "diff", "--name-only", "--no-renames", f"{base}...{head}"],
                          cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"--base {base!r}: git diff {base}...{head} failed: {proc.stderr.strip()}")
    return [line for line in proc.stdout.splitlines() if line]


def decide(root: Path, groups: list[GroupView], changed: list[str] | None) -> dict[str, tuple[bool, list[str]]]:
    """group key -> (run?, the changed files that made it run). ``changed=None`` means run all."""
    out = {}
    for group in groups:
        if changed is None:
            out[group.key] = (True, [])
            continue
        hits = sorted(set(changed) & group_paths(root, group))
        out[group.key] = (bool(hits), hits)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.tools.changed_paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--event", default="pull_request", help="GitHub event name (non-PR events run everything)")
    parser.add_argument("--base", help="base commit of the pull request (required for --event pull_request)")
    parser.add_argument("--head", default="HEAD", help="head revision (default HEAD)")
    parser.add_argument("--root", default=".")
    parser.add_argument("--list", action="store_true", help="print each gated group's path set and exit")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    if not args.list and args.event == "pull_request" and not (args.base or "").strip():
        parser.error("--base: a pull_request needs the base commit (github.event.pull_request.base.sha)")
    try:
        groups = gated_groups(load_registry(root))
    except (CollectionError, CatalogError) as exc:
        print(f"changed_paths: registry cannot be collected:\n{exc}", file=sys.stderr)
        return 2
    if args.list:
        for group in groups:
            paths = sorted(group_paths(root, group))
            print(f"{group.key} ({group.id}): {len(paths)} path(s)")
            print("\n".join(f"  {p}" for p in paths))
        return 0
    try:
        changed = changed_files(root, args.base, args.head) if args.event == "pull_request" else None
    except ValueError as exc:
        print(f"changed_paths: {exc}", file=sys.stderr)
        return 2
    for key, (run, hits) in decide(root, groups, changed).items():
        print(f"{key}={'true' if run else 'false'}")
        why = ("event " + args.event + ": everything runs" if changed is None
               else f"touched: {', '.join(hits[:5])}{' ...' if len(hits) > 5 else ''}" if hits
               else f"none of the {len(changed)} changed file(s) is in its path set")
        print(f"{key}: {'run' if run else 'skip'} ({why})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
