"""Is the nox ``suite`` session an honest pipe from the workflow step to the runner? (syntax tree only)

The session must hand ``ci.runner.run_suite`` its posargs -- ``session.run("python",
"-m", "ci.runner.run_suite", *session.posargs)`` or through a helper of the noxfile
(``run_in(session, envs, "-m", "ci.runner.run_suite", *args)`` with ``args`` derived
from the posargs, the helper passing its ``*cmd`` on to ``session.run``) --
with no ``success_codes`` and no ``try``/``except`` around the call, in the
session or in the helper; otherwise a failing run can leave the step green.
Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import ast
from pathlib import Path

from ci.safe_files import MAX_SOURCE_BYTES, read_inside
from ci.safe_python import parse_source

NOXFILE = "noxfile.py"
RUNNER_MODULE = "ci.runner.run_suite"
SESSION_RUNS = ("run", "run_always", "run_install")


def _is_session_run(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in SESSION_RUNS)


def _from_posargs(expr: ast.AST, fn: ast.FunctionDef, module_fns: dict[str, ast.FunctionDef], depth: int = 0) -> bool:
    """Does ``expr`` carry the session's posargs (directly, via a local name, or via a helper's return)?"""
    text = ast.unparse(expr)
    if "posargs" in text:
        return True
    if depth > 3:
        return False
    if isinstance(expr, ast.Name):
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets):
                if _from_posargs(node.value, fn, module_fns, depth + 1):
                    return True
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in module_fns:
        helper = module_fns[expr.func.id]
        return any("posargs" in ast.unparse(n) for n in ast.walk(helper) if isinstance(n, ast.Return))
    return False


def _call_problems(call: ast.Call, where_fn: str) -> list[str]:
    out = []
    for kw in call.keywords:
        if kw.arg == "success_codes":
            out.append(f"{NOXFILE}:{call.lineno}: {where_fn}: session.run(success_codes={ast.unparse(kw.value)}) "
                       "turns a failing exit code into success")
    return out


def _try_problems(fn: ast.FunctionDef, where_fn: str, targets: list[ast.Call]) -> list[str]:
    out = []
    ids = {id(t) for t in targets}
    for node in ast.walk(fn):
        if isinstance(node, ast.Try) and node.handlers:
            if any(id(sub) in ids for stmt in node.body for sub in ast.walk(stmt)):
                out.append(f"{NOXFILE}:{node.lineno}: {where_fn}: the runner call is inside try/except, "
                           "which can swallow its failure")
    return out


def _session_name(fn: ast.FunctionDef) -> str | None:
    """The nox session a function defines (``@nox.session(name=...)`` wins over the function name)."""
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if ast.unparse(target).endswith("session"):
            if isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                        return str(kw.value.value)
            return fn.name
    return None


def _session_function(tree: ast.Module, session: str) -> ast.FunctionDef | None:
    found = None
    for node in tree.body:   # the last definition wins, as when nox imports the file
        if isinstance(node, ast.FunctionDef) and _session_name(node) == session:
            found = node
    return found


def _literal_masks(call: ast.Call) -> list[str]:
    from ci.adapters.dspark import MASKING_OPTIONS

    words = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    words = words[words.index(RUNNER_MODULE) + 1:] if RUNNER_MODULE in words else []
    return [f"{NOXFILE}:{call.lineno}: the session passes `{w}` to the runner, which "
            f"{MASKING_OPTIONS[w.partition('=')[0]]}" for w in words if w.partition("=")[0] in MASKING_OPTIONS]


def suite_session_problems(root: str | Path, session: str = "suite") -> list[str]:
    path = Path(root) / NOXFILE
    if not path.is_file():
        return [f"{NOXFILE}: missing, but workflow steps run `nox -s {session}`"]
    tree = parse_source(read_inside(root, path, MAX_SOURCE_BYTES), NOXFILE)
    module_fns = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    fn = _session_function(tree, session)
    if fn is None:
        return [f"{NOXFILE}: no `{session}` session, but workflow steps run `nox -s {session}`"]
    label = f"session {session}"
    problems: list[str] = []
    honest = False
    runner_calls: list[ast.Call] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if RUNNER_MODULE not in strings:
            continue
        runner_calls.append(node)
        problems += _literal_masks(node)
        passes = any(isinstance(a, ast.Starred) and _from_posargs(a.value, fn, module_fns) for a in node.args)
        if _is_session_run(node):
            problems += _call_problems(node, label)
            honest = honest or passes
        elif isinstance(node.func, ast.Name) and node.func.id in module_fns:
            helper = module_fns[node.func.id]
            vararg = helper.args.vararg.arg if helper.args.vararg else None
            inner = [c for c in ast.walk(helper) if _is_session_run(c)]
            forwarded = [c for c in inner if vararg and any(
                isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and a.value.id == vararg for a in c.args)]
            hl = f"helper {helper.name}() called by {label}"
            for c in forwarded:
                problems += _call_problems(c, hl)
            problems += _try_problems(helper, hl, forwarded)
            if not forwarded:
                problems.append(f"{NOXFILE}:{helper.lineno}: {hl} does not pass its *{vararg or 'args'} "
                                "on to session.run: the runner command may never run")
            honest = honest or (passes and bool(forwarded))
    problems += _try_problems(fn, label, runner_calls)
    if not honest:
        problems.append(f"{NOXFILE}:{fn.lineno}: {label} never hands ci.runner.run_suite the posargs "
                        f"(session.run(\"python\", \"-m\", \"{RUNNER_MODULE}\", *session.posargs)): "
                        "the step's --group/--shard do not reach the runner")
    return problems
