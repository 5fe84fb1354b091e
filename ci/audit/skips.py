"""Where registered tests use the registered skip reasons, read from syntax trees (no torch, no imports);
the reasons themselves are read by ``ci.registry.skip_reasons``, their one reader.

``registered/skips.py`` holds ``SKIP_REASONS = {key: {...}}``; each entry has
``text`` and ``skips_when``, a hardware condition the audit can evaluate against
the catalog: ``"gpus<1"``, ``"gpus<N"`` (N: the marker's first argument, e.g.
``requires_gpus(2)``), ``"vendor!=amd"`` / ``"vendor!=nvidia"``, or ``"always"``
(it can skip on any machine, for a reason outside the hardware). An entry that
can skip unconditionally needs ``owner`` and ``until`` like a disabled
registration. Helper functions in skips.py (``requires_gpu``...) are mapped to
the key they mention.

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ci.registry.pyast import dotted_name
from ci.registry.skip_reasons import SkipTable, keys_in, literal_assign
from ci.safe_files import MAX_SOURCE_BYTES, read_inside
from ci.safe_python import parse_source
from ci.safe_yaml import short

@dataclass(frozen=True)
class SkipUse:
    """One place a registered test can skip: a marker, or a skip call in its body."""
    node_id: str             # the test node it belongs to (file::name), or file for module level
    where: str               # file:line of the use
    key: str | None          # registered key (None: a plain pytest skip)
    how: str                 # "marker requires_gpu()", "registered_skip() in the body", ...
    arg: int | None = None   # the marker's first integer argument (requires_gpus(2))
    always: bool = False     # skips wherever it runs (a top-level skip call, pytest.mark.skip)
    unregistered: bool = False   # a skip whose reason is not a registered key (the runner fails the job on it)
    unknown_key: str | None = None   # the literal key it names that SKIP_REASONS lacks (registered_skip("typo"))


def condition_skips(when: str, gpus: int, vendor: str, arg: int | None = None) -> bool:
    """Does a skip condition hold on hardware with ``gpus`` GPUs of ``vendor``?"""
    if when == "always":
        return True
    if when.startswith("gpus<"):
        bound = when[5:]
        limit = arg if bound == "N" else int(bound)
        return limit is not None and gpus < limit
    if when.startswith("vendor!="):
        return vendor != when[8:]
    return True


def _callee(node: ast.AST) -> str | None:
    return dotted_name(node.func if isinstance(node, ast.Call) else node)


def _first_int(call: ast.AST) -> int | None:
    if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant) \
            and isinstance(call.args[0].value, int):
        return call.args[0].value
    return None


def _unknown_key(node: ast.AST, table: SkipTable) -> str | None:
    """The literal key that a registered_skip(...) / skip_message(...) call in ``node`` names and SKIP_REASONS lacks."""
    for sub in ast.walk(node):
        name = (_callee(sub) or "").rpartition(".")[2] if isinstance(sub, ast.Call) else ""
        if name in ("registered_skip", "skip_message") and sub.args and isinstance(sub.args[0], ast.Constant) \
                and isinstance(sub.args[0].value, str) and sub.args[0].value not in table.reasons:
            return sub.args[0].value
    return None


def _marker_uses(decorators: list[ast.AST], node_id: str, rel: str, table: SkipTable) -> list[SkipUse]:
    uses = []
    for dec in decorators:
        name = _callee(dec)
        if name is None:
            continue
        last = name.rpartition(".")[2]
        if last in table.helpers:
            uses.append(SkipUse(node_id, f"{rel}:{dec.lineno}", table.helpers[last], f"marker {last}()",
                                _first_int(dec)))
        elif name.endswith("mark.skip"):
            uses.append(SkipUse(node_id, f"{rel}:{dec.lineno}", None, "@pytest.mark.skip", always=True))
        elif name.endswith("mark.skipif") and isinstance(dec, ast.Call) and dec.args:
            try:
                cond = ast.literal_eval(dec.args[0])
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):   # {[]: 1}: TypeError
                cond = None
            keys = keys_in(dec, table.reasons)
            if cond is not None and bool(cond):
                uses.append(SkipUse(node_id, f"{rel}:{dec.lineno}", keys[0] if keys else None,
                                    f"@pytest.mark.skipif({short(cond)})", always=True))
            elif cond is None:
                uses.append(SkipUse(node_id, f"{rel}:{dec.lineno}", keys[0] if keys else None,
                                    "@pytest.mark.skipif(...)", unregistered=not keys,
                                    unknown_key=None if keys else _unknown_key(dec, table)))
        elif name.endswith("mark.xfail") and isinstance(dec, ast.Call) and any(
                kw.arg == "run" and isinstance(kw.value, ast.Constant) and kw.value.value is False
                for kw in dec.keywords):
            uses.append(SkipUse(node_id, f"{rel}:{dec.lineno}", None, "@pytest.mark.xfail(run=False)", always=True))
    return uses


def _body_uses(fn: ast.AST, node_id: str, rel: str, table: SkipTable) -> list[SkipUse]:
    uses = []
    top = set(id(s) for s in getattr(fn, "body", []))
    for stmt in getattr(fn, "body", []):
        for sub in ast.walk(stmt):
            if not isinstance(sub, ast.Call):
                continue
            dotted = _callee(sub) or ""
            name = dotted.rpartition(".")[2]
            if name not in ("registered_skip", "skip", "importorskip"):
                continue
            if name in ("skip", "importorskip") and not dotted.endswith("pytest." + name):
                continue
            keys = keys_in(sub, table.reasons)
            registered = bool(keys) or (name == "skip" and _registered_message(sub))
            always = id(stmt) in top and isinstance(stmt, ast.Expr) and stmt.value is sub
            uses.append(SkipUse(node_id, f"{rel}:{sub.lineno}", keys[0] if keys else None,
                                f"{name}() in the body", always=always and name != "importorskip",
                                unregistered=not registered,
                                unknown_key=None if registered else _unknown_key(sub, table)))
    return uses


def _registered_message(call: ast.Call) -> bool:
    """pytest.skip(<something that is not a literal>) may be a registered message; a literal must say so."""
    if not call.args:
        return False
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.startswith("[registered:")
    return True


def skip_uses(root: str | Path, test_files: Iterable[str], table: SkipTable) -> dict[str, list[SkipUse]]:
    """Skip uses per test node id (module-level ``pytestmark`` and helper calls attach to every test)."""
    out: dict[str, list[SkipUse]] = {}
    for rel in test_files:
        tree = parse_source(read_inside(root, Path(root) / rel, MAX_SOURCE_BYTES), rel)
        module_uses: list[SkipUse] = []
        found = literal_assign(tree, "pytestmark")
        if found is not None:
            value, _ = found
            decs = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
            module_uses += _marker_uses(decs, rel, rel, table)
        for node in tree.body:   # module-level skips: pytest.importorskip, pytest.skip(allow_module_level=True)
            call = node.value if isinstance(node, (ast.Expr, ast.Assign)) else None
            dotted = _callee(call) if isinstance(call, ast.Call) else None
            if dotted and dotted.endswith(("pytest.importorskip", "pytest.skip")):
                module_uses.append(SkipUse(rel, f"{rel}:{node.lineno}", None, f"module-level {dotted}()",
                                           always=dotted.endswith("pytest.skip"), unregistered=True))
        # module-level helpers (not tests) that skip: every test of the file may reach them
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("test"):
                module_uses += [SkipUse(rel, u.where, u.key, f"{u.how.split('(')[0]}() in helper {node.name}()",
                                        unregistered=u.unregistered, unknown_key=u.unknown_key)
                                for u in _body_uses(node, rel, rel, table)]
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                nid = f"{rel}::{node.name}"
                out[nid] = module_uses + _marker_uses(node.decorator_list, nid, rel, table) \
                    + _body_uses(node, nid, rel, table)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                cid = f"{rel}::{node.name}"
                class_uses = module_uses + _marker_uses(node.decorator_list, cid, rel, table)
                out[cid] = list(class_uses)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                        mid = f"{cid}::{item.name}"
                        own = _marker_uses(item.decorator_list, mid, rel, table) + _body_uses(item, mid, rel, table)
                        out[mid] = class_uses + own
                        out[cid] = out[cid] + own
    return out
