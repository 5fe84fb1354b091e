"""Load one module of an engine's tree by file path, without its package ``__init__`` files.

An engine's kernels are plain modules inside a large package whose ``__init__`` (and the
modules around it) start a server stack. :func:`load_module` executes only the file asked
for and, transitively, the engine modules *it* imports, each by path; parent packages
become empty placeholders, so no ``__init__.py`` runs. Imports named in ``stubs`` get a
placeholder module instead (:class:`StubModule`): every attribute is a permissive class,
enough for type annotations, base classes and decorators of code the kit does not call.
A stub of a third-party module is used only when that module is not installed.

Nothing is left in ``sys.modules`` afterwards: the loaded modules live in a private cache
keyed by (root, name), so two trees (two commits) load side by side. Imports torch only
through the engine's own code.
"""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path


class NotFound(Exception):
    """The module or function is not in this tree (reported "not found at this commit")."""


class _Permissive:
    """Stands in for any class or function of a stubbed module: takes any arguments, keeps keywords."""

    def __init_subclass__(cls, **kwargs):  # msgspec.Struct-style class keywords (frozen=True, ...)
        super().__init_subclass__()

    def __init__(self, *args, **kwargs):
        for key, value in kwargs.items():
            object.__setattr__(self, key, value)

    def __class_getitem__(cls, item):
        return cls

    def __call__(self, *args, **kwargs):
        return self


class StubModule(types.ModuleType):
    """A placeholder module: each attribute is a fresh permissive class named after it."""

    def __init__(self, name: str):
        super().__init__(name, f"conformance stub for {name}")
        self.__path__: list[str] = []  # a package too, so `from stub.sub import x` works

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = type(attr, (_Permissive,), {"__module__": self.__name__})
        setattr(self, attr, value)
        return value


@dataclass
class LoadLog:
    """What loading touched: engine files executed and stubs used (the report prints both)."""

    files: list[str] = field(default_factory=list)
    stubs: list[str] = field(default_factory=list)


def _stub_for(name: str, stubs: tuple[str, ...]) -> str | None:
    """The entry of ``stubs`` that covers module ``name`` (itself or a parent), or None."""
    for stub in stubs:
        if name == stub or name.startswith(stub + "."):
            return stub
    return None


def _installed(name: str) -> bool:
    top = name.split(".")[0]  # asked of the path finder directly, never of the meta path (our finder is on it)
    return top in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(top) is not None


class _TreeFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves the engine's own package by path (no __init__), stubs, and leaves the rest to Python."""

    def __init__(self, root: Path, package: str, stubs: tuple[str, ...], log: LoadLog, exempt: str = "",
                 values: dict[str, object] | None = None):
        self.root, self.package, self.stubs, self.log = root, package, stubs, log
        self.exempt = exempt  # the module asked for: its own file runs even inside a stubbed package
        self.values = values or {}  # "module.attribute" of a stub -> the object it holds (instead of a placeholder)

    def in_tree(self, name: str) -> bool:
        return name == self.package or name.startswith(self.package + ".")

    def stubbed(self, name: str) -> bool:
        """A stub replaces ``name``: always inside the engine's tree, outside it only when not installed;
        never the module asked for, nor a package on its way."""
        if self.exempt and (name == self.exempt or self.exempt.startswith(name + ".")):
            return False
        return _stub_for(name, self.stubs) is not None and (self.in_tree(name) or not _installed(name))

    def find_spec(self, name, path=None, target=None):
        stub = _stub_for(name, self.stubs)
        in_tree = self.in_tree(name)
        if self.stubbed(name):
            if stub not in self.log.stubs:
                self.log.stubs.append(stub)
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if not in_tree:
            return None
        rel = Path(*name.split("."))
        file = self.root / rel.with_suffix(".py")
        if file.is_file():
            return importlib.util.spec_from_file_location(name, file)
        if (self.root / rel).is_dir():  # a parent package: an empty placeholder, its __init__ never runs
            spec = importlib.machinery.ModuleSpec(name, self, is_package=True)
            spec.submodule_search_locations = [str(self.root / rel)]
            return spec
        return None

    def create_module(self, spec):
        if self.stubbed(spec.name):
            stub = StubModule(spec.name)
            for key, value in self.values.items():
                owner, _, attr = key.rpartition(".")
                if owner == spec.name:
                    setattr(stub, attr, value)
            return stub
        module = types.ModuleType(spec.name, "conformance placeholder package (its __init__ was not run)")
        module.__path__ = list(spec.submodule_search_locations or [])
        return module

    def exec_module(self, module):
        """A placeholder package runs no code: its ``__init__`` is exactly what the kit must not execute."""


_LOCK = threading.Lock()
_CACHE: dict[tuple[str, str], tuple[types.ModuleType, LoadLog]] = {}


def load_module(root: str | Path, module: str, stubs: tuple[str, ...] = (),
                values: dict[str, object] | None = None) -> tuple[types.ModuleType, LoadLog]:
    """Execute ``root/<module as path>.py`` (and the engine modules it imports) and return it.

    Raises :class:`NotFound` when the file is not in the tree, or when it imports an engine
    module that is not there either (a moved dependency); any other import failure propagates
    (the report shows it as the load error it is).
    """
    root = Path(root).resolve()
    key = (str(root), module)
    with _LOCK:
        if key in _CACHE and not values:
            return _CACHE[key]
        file = root / Path(*module.split(".")).with_suffix(".py")
        if not file.is_file():
            raise NotFound(f"{file.relative_to(root)} is not in this tree")
        package = module.split(".")[0]
        log = LoadLog()
        finder = _TreeFinder(root, package, stubs, log, exempt=module, values=values)
        ours = [name for name in sys.modules if finder.in_tree(name) or finder.stubbed(name)]
        saved = {name: sys.modules[name] for name in ours}
        for name in saved:
            del sys.modules[name]
        before = set(sys.modules)
        sys.meta_path.insert(0, finder)
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing == package or missing.startswith(package + "."):
                raise NotFound(f"{module} imports {missing}, which is not in this tree") from None
            raise
        finally:
            sys.meta_path.remove(finder)
            for name in set(sys.modules) - before:
                mod = sys.modules[name]
                origin = getattr(mod, "__file__", None)
                if origin and Path(origin).is_relative_to(root):
                    log.files.append(str(Path(origin).relative_to(root)))
                if finder.in_tree(name) or finder.stubbed(name):
                    del sys.modules[name]
            sys.modules.update(saved)
        log.files.sort()
        if not values:
            _CACHE[key] = (loaded, log)
        return loaded, log


@contextlib.contextmanager
def tree_imports(root: str | Path, package: str, stubs: tuple[str, ...] = (),
                 values: dict[str, object] | None = None):
    """While inside, the engine's package imports by path with the same stubs (for an engine function that
    imports inside its body, at call time); every module imported meanwhile is dropped on the way out."""
    finder = _TreeFinder(Path(root).resolve(), package, stubs, LoadLog(), values=values)
    before = set(sys.modules)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:
            if finder.in_tree(name) or finder.stubbed(name):
                del sys.modules[name]


def load_function(root: str | Path, module: str, name: str, stubs: tuple[str, ...] = (),
                  values: dict[str, object] | None = None):
    """``module.name`` (dotted names reach into classes); :class:`NotFound` when absent."""
    mod, log = load_module(root, module, stubs, values)
    obj = mod
    for part in name.split("."):
        if not hasattr(obj, part):
            raise NotFound(f"{module} has no {name}")
        obj = getattr(obj, part)
    return obj, log
