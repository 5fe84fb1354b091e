"""Lazy package exports (PEP 562): a package lists ``name -> module`` in a literal ``_LAZY`` dict
(the CI audit reads it from the syntax tree) and imports the module only when the name is used."""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping


def lazy_exports(package: str, table: Mapping[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` (the names of ``table``, sorted) and a module ``__getattr__`` for ``package``
    that imports a name's module on first use: ``__all__, __getattr__ = lazy_exports(__name__, _LAZY)``."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return sorted(table), __getattr__
