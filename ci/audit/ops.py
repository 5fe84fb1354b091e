"""Which impl ops exist, which the reference exports, read from syntax trees (no torch).

Ops are the names that ``impl/__init__.py`` exports lazily from ``impl.kernels``
(its ``_LAZY`` dict), plus any names in a literal ``AUDITED_OPS`` list/tuple in
``impl/__init__.py``. The reference side is every public name that
``reference/__init__.py`` defines, imports, lists in ``__all__``/``_LAZY``, or
re-exports with ``from .x import *``.

Every file is read through ``read_inside(root, ...)`` against the audited root (a linked ``impl/``
or ``reference/`` that leaves it is refused, never followed) and capped at MAX_SOURCE_BYTES, like
every Python file the audit parses whole. A file it cannot read or parse, and an ``_LAZY`` or
``AUDITED_OPS`` that is not a literal of its type, is :class:`ci.safe_files.UnreadableFile` naming
the file (exit 2, one line): without them the rule would see no op and pass.
"""
from __future__ import annotations

import ast
from pathlib import Path

from ci.safe_files import MAX_SOURCE_BYTES, UnreadableFile, read_inside
from ci.safe_python import parse_source

OPS_MODULE_PREFIX = "impl.kernels"
EXPLICIT_OPS = "AUDITED_OPS"
OP_TABLE = "impl/testing/op_table.py"
# where the op table lives (it moved from registered/ to impl/testing/; either counts)
OP_TABLE_PATHS = ("impl/testing/op_table.py", "registered/op_table.py")
# what ast.literal_eval raises on a crafted value: not a literal (ValueError), an unhashable key
# ({[]: 1}: TypeError), nesting past the stack, a huge number
LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, RecursionError, MemoryError, OverflowError)
_MISSING = object()


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _parse(root: Path, path: Path) -> ast.Module | None:
    """The tree of ``path`` (None when it is no file), read inside ``root``, never a file's own folder."""
    if not path.is_file():
        return None
    rel = _rel(root, path)
    return parse_source(read_inside(root, path, MAX_SOURCE_BYTES), rel)


def _assigned(tree: ast.Module, name: str) -> ast.AST | None:
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            return node.value
    return None


def _literal_assign(tree: ast.Module, name: str, default=None):
    """The literal value assigned to ``name`` at module level; ``default`` when absent; _MISSING when
    it is assigned but cannot be evaluated as a literal."""
    value = _assigned(tree, name)
    if value is None:
        return default
    try:
        return ast.literal_eval(value)
    except LITERAL_ERRORS:
        return _MISSING


def impl_ops(root: str | Path) -> list[str]:
    root = Path(root)
    path = root / "impl" / "__init__.py"
    tree = _parse(root, path)
    if tree is None:
        return []
    rel = _rel(root, path)
    lazy = _literal_assign(tree, "_LAZY", {})
    lazy = {} if lazy is None else lazy
    if not isinstance(lazy, dict):
        line = _assigned(tree, "_LAZY").lineno
        raise UnreadableFile(f"{rel}:{line}", "_LAZY must be a literal dict of names to module paths")
    explicit = _literal_assign(tree, EXPLICIT_OPS, ())
    explicit = () if explicit is None else explicit
    if not isinstance(explicit, (list, tuple)):
        line = _assigned(tree, EXPLICIT_OPS).lineno
        raise UnreadableFile(f"{rel}:{line}", f"{EXPLICIT_OPS} must be a literal list or tuple of op names")
    ops = {str(name) for name, module in lazy.items()
           if isinstance(module, str) and (module == OPS_MODULE_PREFIX or module.startswith(OPS_MODULE_PREFIX + "."))}
    ops.update(str(x) for x in explicit)
    return sorted(ops)


def _module_file(package_dir: Path, module: str) -> Path | None:
    base = package_dir.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _own_names(tree: ast.Module, package_dir: Path, imports: list[Path]) -> set[str]:
    """The names one module defines, imports or lists; the modules it star-imports go to ``imports``."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name.partition(".")[0]) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    if node.level and node.module:
                        target = _module_file(package_dir, node.module)
                        if target is not None:
                            imports.append(target)
                else:
                    names.add(alias.asname or alias.name)
    for listed in ("__all__", "_LAZY"):
        value = _literal_assign(tree, listed)   # unreadable: its names are not counted (the rule then says so)
        if isinstance(value, (list, tuple, dict)):
            names.update(str(x) for x in value)
    return names


def exported_names(path: Path, package_dir: Path, root: Path | None = None) -> set[str]:
    """Public names a module makes available, following relative star imports (a work-list, so a chain
    of any length costs no recursion; each module is read once). Every file is read inside ``root``
    (default: the folder above ``package_dir``, the audited root)."""
    root = Path(root) if root is not None else package_dir.parent
    names: set[str] = set()
    seen: set[Path] = set()
    work = [path]
    while work:
        current = work.pop()
        if current in seen:
            continue
        seen.add(current)
        tree = _parse(root, current)
        if tree is None:
            continue
        imports: list[Path] = []
        found = _own_names(tree, package_dir, imports)
        names |= found if current == path else {n for n in found if not n.startswith("_")}
        work += reversed(imports)
    return names


def reference_names(root: str | Path) -> set[str]:
    root = Path(root)
    package = root / "reference"
    return exported_names(package / "__init__.py", package, root)
