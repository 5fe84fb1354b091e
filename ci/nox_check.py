"""Is the nox ``suite`` session an honest pipe from the workflow step to the runner? (syntax tree only)

The session must call ``session.run(..., "ci.run_suite", *session.posargs)``
with no ``success_codes`` and no ``try`` around it; otherwise a failing run can
leave the step green. Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import ast
from pathlib import Path

NOXFILE = "noxfile.py"
RUNNER_MODULE = "ci.run_suite"


def _is_session_run(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("run", "run_always", "run_install"))


def suite_session_problems(root: str | Path, session: str = "suite") -> list[str]:
    path = Path(root) / NOXFILE
    if not path.is_file():
        return [f"{NOXFILE}: missing, but workflow steps run `nox -s {session}`"]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=NOXFILE)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == session), None)
    if fn is None:
        return [f"{NOXFILE}: no `{session}` session, but workflow steps run `nox -s {session}`"]
    where = f"{NOXFILE}:{fn.lineno}"
    problems = []
    honest = False
    for node in ast.walk(fn):
        if isinstance(node, ast.Try) and node.handlers:
            if any(_is_session_run(sub) for stmt in node.body for sub in ast.walk(stmt)):
                problems.append(f"{NOXFILE}:{node.lineno}: session {session}: session.run inside try/except "
                                "can swallow the runner's failure")
        if not _is_session_run(node):
            continue
        for kw in node.keywords:
            if kw.arg == "success_codes":
                problems.append(f"{NOXFILE}:{node.lineno}: session {session}: session.run(success_codes="
                                f"{ast.unparse(kw.value)}) turns a failing exit code into success")
        strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        posargs = any(isinstance(a, ast.Starred) and ast.unparse(a.value).endswith("posargs") for a in node.args)
        if RUNNER_MODULE in strings and posargs:
            honest = True
    if not honest:
        problems.append(f"{where}: session {session} never calls session.run(\"python\", \"-m\", "
                        f"\"{RUNNER_MODULE}\", *session.posargs): the step's options do not reach the runner")
    return problems
