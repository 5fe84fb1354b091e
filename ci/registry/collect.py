"""Collect ``@register(...)`` registrations from ``registered/`` by reading syntax trees.

Nothing under ``registered/`` is imported (no torch, no GPU). Every problem --
a computed argument, an unknown hardware label, schedule, gate variable or value,
a registration pytest would never run -- is reported as ``file:line: message``
in one :class:`CollectionError`. Unregistered tests are not errors here; they are
listed in :attr:`Collection.unregistered` for the audit.
"""
from __future__ import annotations

from ci.input_errors import InputError

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.registry.catalog import Catalog
from ci.registry.gatecheck import gate_env_problem
from ci.registry.pyast import dotted_name
from ci.registration import SCHEDULES
from ci.safe_files import MAX_SOURCE_BYTES, UnreadableFile, read_inside
from ci.safe_python import parse_quietly
from ci.tree_files import files_inside, outside_note

REGISTERED_DIR = "registered"
FIXTURES_DIR = "registered/fixtures"
REGISTER_MODULE = "ci.registration"
ARGS_REQUIRED = ("suite", "hardware", "schedule", "est_time")
ARGS_OPTIONAL = ("env", "disabled", "retries", "timeout")
SUITE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
VARIANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DISABLED_KEYS = ("reason", "until")


class CollectionError(InputError):
    """One or more registrations are invalid; ``problems`` holds ``file:line: msg`` lines."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__(
            f"{len(problems)} registration problem(s):\n" + "\n".join(f"  {p}" for p in problems)
        )


@dataclass(frozen=True)
class Registration:
    file: str              # posix path relative to the repository root
    line: int              # line of the @register decorator
    node_id: str           # pytest node id: file::test_fn, file::TestClass, file::TestClass::test_m
    suite: str
    hardware: tuple[str, ...]
    schedule: str
    est_time: float
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    disabled: dict[str, str] | None = None
    retries: int = 0               # reruns allowed before a failure counts (a pass on rerun is "flaky")
    timeout: float | None = None   # per-test timeout in seconds; None: derived from est_time

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class TestDef:
    file: str
    line: int
    node_id: str


@dataclass
class Collection:
    registrations: list[Registration]
    unregistered: list[TestDef]
    test_files: list[str]
    # per file: the module-level names / attributes / strings it mentions (for the op audit)
    mentions: dict[str, frozenset[str]] = field(default_factory=dict)


def is_test_file(path: Path) -> bool:
    name = path.name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


class _Resolver:
    """Which names in one module refer to ``ci.registration.register``."""

    def __init__(self, nodes: list[ast.AST]):
        self.names: set[str] = set()
        self.modules: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == REGISTER_MODULE:
                        self.modules.add(alias.asname or REGISTER_MODULE)
                    elif alias.name == "ci":
                        self.modules.add((alias.asname or "ci") + ".registration")
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                for alias in node.names:
                    if node.module == REGISTER_MODULE and alias.name in ("register", "*"):
                        self.names.add(alias.asname or "register")
                    elif node.module == "ci" and alias.name == "registration":
                        self.modules.add(alias.asname or "registration")

    def is_register(self, dotted: str | None) -> bool:
        if dotted is None:
            return False
        if dotted in self.names:
            return True
        prefix, _, last = dotted.rpartition(".")
        return last == "register" and prefix in self.modules

    def looks_like_register(self, dotted: str | None) -> bool:
        return dotted is not None and dotted.rpartition(".")[2] == "register"


def _duplicate_keys(node: ast.AST) -> list[str]:
    dups: list[str] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            seen: set[Any] = set()
            for key in sub.keys:
                if isinstance(key, ast.Constant):
                    if key.value in seen:
                        dups.append(repr(key.value))
                    seen.add(key.value)
    return dups


class _FileCollector:
    def __init__(self, rel: str, tree: ast.Module, catalog: Catalog, is_test: bool, nodes: list[ast.AST]):
        self.rel = rel
        self.tree = tree
        self.nodes = nodes  # every node of the tree (one ast.walk per file)
        self.catalog = catalog
        self.is_test = is_test
        self.resolver = _Resolver(nodes)
        self.problems: list[str] = []
        self.registrations: list[Registration] = []
        self.unregistered: list[TestDef] = []

    def err(self, line: int, msg: str) -> None:
        self.problems.append(f"{self.rel}:{line}: {msg}")

    # -- walking -------------------------------------------------------------
    def _shadowed(self, body: list[ast.stmt], prefix: str) -> None:
        """Two definitions of one name: pytest keeps the last, so both map to one node id."""
        first: dict[str, ast.AST] = {}
        for node in body:
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Import, ast.ImportFrom)):
                names = ([t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                          if isinstance(t, ast.Name)] if isinstance(node, (ast.Assign, ast.AnnAssign))
                         else [a.asname or a.name.rpartition(".")[2] for a in node.names])
                for name in names:
                    earlier = first.get(name)
                    if earlier is not None and any(self._decorator_is_register(d)
                                                   for d in getattr(earlier, "decorator_list", [])):
                        self.err(node.lineno, f"{prefix}{name} is rebound here (defined at line {earlier.lineno}): "
                                              "pytest collects what the name holds last, not the registered test")
                continue
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            earlier = first.get(node.name)
            if earlier is not None and (earlier.decorator_list or node.decorator_list) and \
                    any(self._decorator_is_register(d) for d in earlier.decorator_list + node.decorator_list):
                self.err(node.lineno, f"{prefix}{node.name} is defined again here (first at line {earlier.lineno}): "
                                      "both end up as one pytest node id and only this one runs; rename one")
            first.setdefault(node.name, node)

    def run(self) -> None:
        handled: set[int] = set()
        self._shadowed(self.tree.body, f"{self.rel}::")
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                self._shadowed(node.body, f"{self.rel}::{node.name}::")
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                handled.add(id(node))
                regs = self._registrations_of(node, f"{self.rel}::{node.name}", kind="function")
                if self.is_test and node.name.startswith("test") and not regs:
                    self.unregistered.append(TestDef(self.rel, node.lineno, f"{self.rel}::{node.name}"))
            elif isinstance(node, ast.ClassDef):
                handled.add(id(node))
                handled.update(id(item) for item in node.body
                               if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
                self._class(node)
        # a register() anywhere else (nested function, inside an if) would never be seen by pytest
        for node in self.nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and id(node) not in handled:
                for dec in node.decorator_list:
                    if self._decorator_is_register(dec):
                        self.err(dec.lineno, f"@register on {node.name!r}: only module-level test functions, "
                                             "test classes and their methods are collected")

    def _class(self, node: ast.ClassDef) -> None:
        class_id = f"{self.rel}::{node.name}"
        class_regs = self._registrations_of(node, class_id, kind="class")
        test_methods = []
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                method_id = f"{class_id}::{item.name}"
                regs = self._registrations_of(item, method_id, kind="method", owner=node.name)
                if item.name.startswith("test"):
                    test_methods.append((item, bool(regs)))
        if not self.is_test or class_regs or not node.name.startswith("Test"):
            return
        if not test_methods or not any(registered for _, registered in test_methods):
            self.unregistered.append(TestDef(self.rel, node.lineno, class_id))
            return
        for item, registered in test_methods:
            if not registered:
                self.unregistered.append(TestDef(self.rel, item.lineno, f"{class_id}::{item.name}"))

    def _decorator_is_register(self, dec: ast.AST) -> bool:
        target = dec.func if isinstance(dec, ast.Call) else dec
        dotted = dotted_name(target)
        return self.resolver.is_register(dotted) or self.resolver.looks_like_register(dotted)

    def _registrations_of(self, node, node_id: str, *, kind: str, owner: str | None = None) -> list[Registration]:
        regs: list[Registration] = []
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            dotted = dotted_name(target)
            if not self.resolver.is_register(dotted):
                if self.resolver.looks_like_register(dotted):
                    self.err(dec.lineno, f"decorator {dotted!r} is not ci.registration.register "
                                         "(import it: from ci.registration import register)")
                continue
            if not isinstance(dec, ast.Call):
                self.err(dec.lineno, f"@{dotted} must be called with arguments: @{dotted}(suite=..., ...)")
                continue
            if not self._collectible(node, kind, owner, dec.lineno):
                continue
            reg = self._parse_call(dec, node_id)
            if reg is not None:
                regs.append(reg)
        return regs

    def _collectible(self, node, kind: str, owner: str | None, line: int) -> bool:
        if not self.is_test:
            self.err(line, f"@register in {self.rel}, which pytest does not collect "
                           "(test files are named test_*.py or *_test.py)")
            return False
        if kind == "class" and not node.name.startswith("Test"):
            self.err(line, f"@register on class {node.name!r}: pytest only collects classes named Test*")
            return False
        if kind in ("function", "method") and not node.name.startswith("test"):
            self.err(line, f"@register on {node.name!r}: pytest only collects functions named test*")
            return False
        if kind == "method" and owner is not None and not owner.startswith("Test"):
            self.err(line, f"@register on {owner}.{node.name}: pytest only collects classes named Test*")
            return False
        return True

    # -- one register(...) call ---------------------------------------------
    def _parse_call(self, call: ast.Call, node_id: str) -> Registration | None:
        line = call.lineno
        ok = True
        if call.args:
            self.err(line, "register() takes keyword arguments only (suite=, hardware=, schedule=, est_time=, ...)")
            ok = False
        values: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg is None:
                self.err(line, "register(**...) is not allowed: write every argument literally")
                ok = False
                continue
            if kw.arg not in ARGS_REQUIRED + ARGS_OPTIONAL:
                self.err(line, f"register(): unknown argument {kw.arg!r}; "
                               f"expected {list(ARGS_REQUIRED + ARGS_OPTIONAL)}")
                ok = False
                continue
            try:
                values[kw.arg] = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError):
                shown = ast.unparse(kw.value)
                self.err(kw.value.lineno, f"register({kw.arg}=...) must be a literal, got {shown!r} "
                                          "(CI reads the syntax tree; computed values are invisible to it)")
                ok = False
                continue
            for dup in _duplicate_keys(kw.value):
                self.err(kw.value.lineno, f"register({kw.arg}=...): duplicate key {dup}")
                ok = False
        missing = [a for a in ARGS_REQUIRED if a not in values and a not in _seen_args(call)]
        if missing and ok:
            self.err(line, f"register(): missing required argument(s) {missing}")
            ok = False
        if not ok:
            return None
        return self._validate(line, node_id, values)

    def _validate(self, line: int, node_id: str, v: dict[str, Any]) -> Registration | None:
        start = len(self.problems)
        suite = v["suite"]
        if not isinstance(suite, str) or not SUITE_RE.match(suite):
            self.err(line, f"register(suite={suite!r}): lower-case letters, digits, '_', '.', '-'")
        hw_list = self._hardware(line, v["hardware"])
        schedule = v["schedule"]
        if schedule not in SCHEDULES:
            self.err(line, f"register(schedule={schedule!r}): unknown schedule; expected one of {list(SCHEDULES)}")
        est = v["est_time"]
        if isinstance(est, bool) or not isinstance(est, (int, float)) or not est > 0:
            self.err(line, f"register(est_time={est!r}): a positive number of seconds")
        env_out = self._env(line, v.get("env"))
        disabled = v.get("disabled")
        self._check_disabled(line, disabled)
        retries = v.get("retries", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 3:
            self.err(line, f"register(retries={retries!r}): an int from 0 to 3 (opt-in reruns for a known-flaky test)")
        timeout = v.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            self.err(line, f"register(timeout={timeout!r}): a positive number of seconds, or leave it out")
        if len(self.problems) != start:
            return None
        reg = Registration(
            file=self.rel, line=line, node_id=node_id, suite=suite, hardware=tuple(hw_list),
            schedule=schedule, est_time=float(est), env=env_out,
            disabled=dict(disabled) if disabled is not None else None,
            retries=int(retries) if isinstance(retries, int) else 0,
            timeout=float(timeout) if timeout is not None else None,
        )
        self.registrations.append(reg)
        return reg

    def _hardware(self, line: int, hardware: Any) -> list[str]:
        """``hardware=``: one catalog label or a non-empty list of distinct ones (``[]`` if not a list of str)."""
        hw_list = [hardware] if isinstance(hardware, str) else hardware
        if not isinstance(hw_list, (list, tuple)) or not hw_list or not all(isinstance(h, str) for h in hw_list):
            self.err(line, f"register(hardware={hardware!r}): a label or a non-empty list of labels")
            hw_list = []
        for label in hw_list:
            if label not in self.catalog.hardware:
                self.err(line, f"register(hardware=...): unknown hardware label {label!r}; "
                               f"{self.catalog.path} defines {self.catalog.labels}")
        if len(set(hw_list)) != len(hw_list):
            self.err(line, f"register(hardware={hardware!r}): a label is listed twice")
        return hw_list

    def _env(self, line: int, env: Any) -> dict[str, dict[str, str]]:
        """``env=``: ``{variant: {GATE_ENV_VAR: value}}`` with known gates and values; the variants kept."""
        env_out: dict[str, dict[str, str]] = {}
        if env is None:
            return env_out
        if not isinstance(env, dict) or not env:
            self.err(line, "register(env=...): a non-empty mapping {variant: {GATE_ENV_VAR: value}}")
            return env_out
        for name, settings in env.items():
            if not isinstance(name, str) or not VARIANT_RE.match(name):
                self.err(line, f"register(env=...): variant name {name!r} must be letters, digits, '_', '.', '-'")
                continue
            if not isinstance(settings, dict):
                self.err(line, f"register(env={{{name!r}: ...}}): variant must map gate env vars to values")
                continue
            for var, value in settings.items():
                if not isinstance(var, str) or not isinstance(value, str):
                    self.err(line, f"register(env={{{name!r}: ...}}): {var!r}: names and values must be strings")
                    continue
                problem = gate_env_problem(var, value, gates_only=True)
                if problem:
                    self.err(line, f"register(env={{{name!r}: ...}}): {problem}")
            env_out[name] = dict(settings)
        return env_out

    def _check_disabled(self, line: int, disabled: Any) -> None:
        """``disabled=``: ``{'reason': str, 'until': 'YYYY-MM-DD'}`` (keys from DISABLED_KEYS), or absent."""
        if disabled is None:
            return
        if not isinstance(disabled, dict) or not all(isinstance(x, str) for x in disabled.values()):
            self.err(line, "register(disabled=...): a mapping {'reason': str, 'until': 'YYYY-MM-DD'}")
        elif set(disabled) - set(DISABLED_KEYS):
            self.err(line, f"register(disabled=...): unknown key(s) {sorted(set(disabled) - set(DISABLED_KEYS))}; "
                           f"expected {list(DISABLED_KEYS)}")


def _seen_args(call: ast.Call) -> set[str]:
    return {kw.arg for kw in call.keywords if kw.arg}


def names_mentioned(tree: ast.Module, nodes: list[ast.AST] | None = None) -> frozenset[str]:
    """Every Name, Attribute name, imported name and identifier-like string in a module."""
    found: set[str] = set()
    for node in ast.walk(tree) if nodes is None else nodes:
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name.rpartition(".")[2])
            found.add(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            found.add(node.value)
    return frozenset(found)


def collect(root: str | Path, catalog: Catalog) -> Collection:
    """Read every ``registered/**/*.py`` and return its registrations (raises CollectionError)."""
    root = Path(root)
    problems: list[str] = []
    registrations: list[Registration] = []
    unregistered: list[TestDef] = []
    test_files: list[str] = []
    mentions: dict[str, frozenset[str]] = {}
    note = outside_note(root, REGISTERED_DIR)
    if note:
        problems.append(f"{note}: its registrations cannot be read")
    for path in files_inside(root, REGISTERED_DIR, problems=problems):   # too deep, unlistable: named
        rel = path.relative_to(root).as_posix()
        if rel.startswith(FIXTURES_DIR + "/"):
            continue   # data for the ci tests (e.g. an sglang-shaped tree), not tests of ours
        is_test = is_test_file(path)
        try:
            text = read_inside(root, path, MAX_SOURCE_BYTES)
        except UnreadableFile as exc:
            problems.append(f"{exc}: its registrations cannot be read")
            continue
        if not is_test and "register" not in text:
            continue
        try:
            tree = parse_quietly(text, rel)   # no SyntaxWarning (with a raw source line) reaches the log
        except SyntaxError as exc:
            problems.append(f"{rel}:{exc.lineno or 1}: syntax error: {exc.msg}")
            continue
        except (ValueError, RecursionError, MemoryError) as exc:   # a NUL byte; nesting past the parser's stack
            problems.append(f"{rel}: not parsable Python ({type(exc).__name__}): its registrations cannot be read")
            continue
        nodes = list(ast.walk(tree))
        collector = _FileCollector(rel, tree, catalog, is_test, nodes)
        collector.run()
        problems += collector.problems
        registrations += collector.registrations
        unregistered += collector.unregistered
        if is_test:
            test_files.append(rel)
        mentions[rel] = names_mentioned(tree, nodes)
    problems += _module_name_clashes(root, test_files)
    if problems:
        raise CollectionError(problems)
    return Collection(registrations, unregistered, test_files, mentions)


def _module_name_clashes(root: Path, test_files: list[str]) -> list[str]:
    """Test files pytest would import under one module name (a folder without __init__.py)."""
    names: dict[str, str] = {}
    problems = []
    for rel in test_files:
        path = root / rel
        parts = [path.stem]
        folder = path.parent
        while (folder / "__init__.py").is_file() and folder != root:
            parts.insert(0, folder.name)
            folder = folder.parent
        module = ".".join(parts)
        if module in names:
            problems.append(f"{rel}:1: pytest imports it as module {module!r}, like {names[module]}: "
                            "their tests collide (add __init__.py to the folder or rename the file)")
        else:
            names[module] = rel
    return problems
