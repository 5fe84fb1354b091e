"""Lazy package exports (PEP 562): a package lists ``name -> module`` in a literal ``_LAZY`` dict
(the CI audit reads it from the syntax tree) and imports the module only when the name is used."""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable, Mapping


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` (the names of ``table``, sorted) and a module ``__getattr__`` for ``package``
    that imports a name's module on first use: ``__all__, __getattr__ = lazy_exports(__name__, _LAZY)``,
    and keeps the value in the package so that later uses are plain attribute reads.

    It also gives the package a module ``__dir__`` listing the lazy names beside what the package
    already holds, so ``dir(impl)`` and tab completion show the public API before any of it is imported."""

    namespace = vars(sys.modules[package]) if package in sys.modules else None

    def _qualified(module: str) -> str:
        """``module`` as written in the table (``impl.kernels``), under whatever ``package`` is
        installed in (``dspark_suite.impl`` in the wheel: the table's names are repository names)."""
        parts, top = package.split("."), module.split(".")[0]
        return ".".join([*parts[:parts.index(top)], module]) if top in parts else module

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(_qualified(module)), name)
        if namespace is not None:  # kept: later uses (an engine's every step) skip this hook
            namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace or ()) | set(table))

    if namespace is not None:
        namespace.setdefault("__dir__", __dir__)
    return sorted(table), __getattr__
