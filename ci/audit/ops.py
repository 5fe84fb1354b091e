"""Which impl ops exist, which the reference exports, read from syntax trees (no torch).

Ops are the names that ``impl/__init__.py`` exports lazily from ``impl.kernels``
(its ``_LAZY`` dict), plus any names in a literal ``AUDITED_OPS`` list/tuple in
``impl/__init__.py``. The reference side is every public name that
``reference/__init__.py`` defines, imports, lists in ``__all__``/``_LAZY``, or
re-exports with ``from .x import *``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from ci.safe_files import read_inside

OPS_MODULE_PREFIX = "impl.kernels"
EXPLICIT_OPS = "AUDITED_OPS"
OP_TABLE = "impl/testing/op_table.py"
# where the op table lives (it moved from registered/ to impl/testing/; either counts)
OP_TABLE_PATHS = ("impl/testing/op_table.py", "registered/op_table.py")


def _parse(path: Path) -> ast.Module | None:
    if not path.is_file():
        return None
    return ast.parse(read_inside(path.parent, path), filename=str(path))


def _literal_assign(tree: ast.Module, name: str):
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def impl_ops(root: str | Path) -> list[str]:
    tree = _parse(Path(root) / "impl" / "__init__.py")
    if tree is None:
        return []
    lazy = _literal_assign(tree, "_LAZY") or {}
    ops = {name for name, module in lazy.items()
           if isinstance(module, str) and (module == OPS_MODULE_PREFIX or module.startswith(OPS_MODULE_PREFIX + "."))}
    explicit = _literal_assign(tree, EXPLICIT_OPS) or ()
    ops.update(str(x) for x in explicit)
    return sorted(ops)


def _module_file(package_dir: Path, module: str) -> Path | None:
    base = package_dir.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def exported_names(path: Path, package_dir: Path, _seen: set[Path] | None = None) -> set[str]:
    """Public names a module makes available (following relative star imports)."""
    seen = _seen if _seen is not None else set()
    if path in seen:
        return set()
    seen.add(path)
    tree = _parse(path)
    if tree is None:
        return set()
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
                            names |= {n for n in exported_names(target, package_dir, seen) if not n.startswith("_")}
                else:
                    names.add(alias.asname or alias.name)
    for listed in ("__all__", "_LAZY"):
        value = _literal_assign(tree, listed)
        if isinstance(value, (list, tuple, dict)):
            names.update(str(x) for x in value)
    return names


def reference_names(root: str | Path) -> set[str]:
    package = Path(root) / "reference"
    return exported_names(package / "__init__.py", package)
