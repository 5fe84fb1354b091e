"""The repository's import graph, read from syntax trees: cycles and layer rules.

    python -m ci.tools.import_graph [--root DIR] [--edges]

Nodes are the modules of the local packages (``impl``, ``reference``, ``ci``, ``registered``;
the foreign-repository fixtures under ``registered/fixtures/`` are data, not modules). An edge
A -> B is any ``import B`` / ``from B import ...`` statement in A, at module level or inside a
function: a function-level import only postpones a cycle, it does not remove it. A
``from pkg import name`` where ``pkg.name`` is a module is an edge to that module; otherwise
to ``pkg``. Importing a module also runs its packages' ``__init__`` files, but those implicit
edges are not counted: a package importing its own submodules is not a cycle.

Rules (docs/contributing.md, "How the code is organised"): no import cycle; ``ci/`` never imports ``registered/``
(the CI reads tests as syntax trees, it does not run their module code); ``impl/`` never imports
``ci/`` or ``registered/``; ``reference/`` imports nothing of ``impl/``, ``ci/`` or
``registered/`` (an oracle that shares the implementation's code would share its bugs).
Exit 0 when every rule holds, 1 otherwise. Imports nothing from the packages it reads.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

PACKAGES = ("impl", "reference", "ci", "registered")
SKIP = ("registered/fixtures",)
# package -> the local packages it must never import
FORBIDDEN = {
    "ci": ("registered",),
    "impl": ("ci", "registered"),
    "reference": ("impl", "ci", "registered"),
}


# ci's rooms, lowest first: a room imports only rooms before it (and ci's shared top-level modules);
# a shared module imports no room (ci/__init__.py draws the map).
ROOM_ORDER = ("registry", "adapters", "github", "audit", "runner", "tools")


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Edges inside ci/ that point from a room to a later one, or from a shared module to a room."""
    def room(module: str) -> int | None:
        parts = module.split(".")
        if parts[0] != "ci" or len(parts) < 2:
            return None
        return ROOM_ORDER.index(parts[1]) if parts[1] in ROOM_ORDER else -1   # -1: shared

    out = []
    for source in sorted(graph):
        here = room(source)
        if here is None:
            continue
        for target in sorted(graph[source]):
            there = room(target)
            if there is not None and there > here and there >= 0:
                where = "a shared module" if here < 0 else f"room {ROOM_ORDER[here]}"
                out.append(f"{source} imports {target} ({where} must not import room {ROOM_ORDER[there]})")
    return out


def module_name(rel: str) -> str:
    parts = list(Path(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def local_modules(root: Path) -> dict[str, str]:
    """Module name -> repository-relative file, for every module of the local packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not any(rel.startswith(skip + "/") for skip in SKIP):
                found[module_name(rel)] = rel
    return found


def _resolve(name: str, modules: dict[str, str]) -> str | None:
    """The longest prefix of a dotted name that is a local module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def _imported_names(tree: ast.AST, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: climb level - 1 packages from this module's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            names.update(f"{base}.{alias.name}" for alias in node.names)  # submodule, or falls back to base
    return names


def import_edges(root: Path) -> dict[str, set[str]]:
    """Module -> the local modules it imports (no self edges)."""
    modules = local_modules(root)
    graph: dict[str, set[str]] = {}
    for name, rel in modules.items():
        tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=rel)
        package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
        targets = {_resolve(n, modules) for n in _imported_names(tree, package)}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for source in sorted(graph):
        banned = FORBIDDEN.get(source.split(".")[0], ())
        out += [f"{source} imports {target} ({source.split('.')[0]}/ must not import {target.split('.')[0]}/)"
                for target in sorted(graph[source]) if target.split(".")[0] in banned]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.tools.import_graph", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=".", help="repository root (default: the current folder)")
    parser.add_argument("--edges", action="store_true", help="also print every edge between packages")
    args = parser.parse_args(argv)
    root = Path(args.root)
    if not all((root / p).is_dir() for p in PACKAGES):
        parser.error(f"--root {args.root!r}: expected a folder holding {', '.join(p + '/' for p in PACKAGES)}")
    graph = import_edges(root)
    found, bad = cycles(graph), layer_violations(graph) + room_violations(graph)
    print(f"import graph: {len(graph)} modules, {sum(map(len, graph.values()))} edges")
    if args.edges:
        crossing: dict[tuple[str, str], int] = {}
        for source, targets in graph.items():
            for target in targets:
                key = (source.split(".")[0], target.split(".")[0])
                crossing[key] = crossing.get(key, 0) + 1
        for (a, b), n in sorted(crossing.items()):
            print(f"  {a}/ -> {b}/: {n}")
    print("cycles: " + ("none" if not found else f"{len(found)}"))
    for component in found:
        print("  " + " <-> ".join(component))
    print("layer rules: " + ("ok" if not bad else f"{len(bad)} violation(s)"))
    for line in bad:
        print("  " + line)
    return 1 if found or bad else 0


if __name__ == "__main__":
    sys.exit(main())
