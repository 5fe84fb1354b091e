"""Build step: the installed distribution lives under one import name, ``dspark_suite``.

The repository keeps the folders it was designed with (``ci/``, ``impl/``, ``reference/``) and
imports them by those names (``from ci.audit.own import ...``), which is what a contributor runs from
the repository root. Installed into somebody else's environment, names such as ``ci`` and ``impl``
would shadow their own folders, so the wheel puts the packages under ``dspark_suite`` and this
``build_py`` rewrites the copies it builds:

* ``import ci.x`` / ``from ci.x import y`` / ``from ci import y`` -> the same under
  ``dspark_suite.`` (also for ``impl`` and ``reference``; ``import ci.x as z`` keeps ``z``, and
  ``import ci.x`` binds ``ci`` again with ``from dspark_suite import ci``).

String literals are left alone: ``"ci.registration"`` in the audit names what an *audited*
repository imports, not a module of ours. Run-time imports by name qualify themselves instead
(``impl/lazy_exports.py`` resolves ``"impl.kernels"`` against the package it serves).

Source files are never modified (the rewrite works on the copies in the build folder), and the
tokenizer keeps every other byte as it was. ``registered/`` (the tests) is not part of the wheel.

Loaded by setuptools from pyproject.toml (``[tool.setuptools.cmdclass]``) as a file, before the
project is importable: it imports only the standard library and setuptools.
"""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

from setuptools.command.build_py import build_py

NAMESPACE = "dspark_suite"
PACKAGES = ("ci", "impl", "reference")


def rewrite_source(text: str) -> str:
    """``text`` with the project's absolute imports moved under NAMESPACE, every other byte kept."""
    lines = text.splitlines(keepends=True)
    edits: list[tuple[tuple[int, int], str]] = []   # (row, column) -> text inserted there
    statement: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or (tok.type == tokenize.OP and tok.string == ";"):
            edits += _import_edits(statement)
            statement = []
        elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            statement.append(tok)
    for (row, col), inserted in sorted(edits, reverse=True):   # from the end: positions stay valid
        lines[row - 1] = lines[row - 1][:col] + inserted + lines[row - 1][col:]
    return "".join(lines)


def _import_edits(statement: list[tokenize.TokenInfo]) -> list[tuple[tuple[int, int], str]]:
    """Edits for one logical statement if it imports one of PACKAGES by absolute name."""
    if not statement or statement[0].string not in ("import", "from"):
        return []
    edits = []
    if statement[0].string == "from":
        first = statement[1]
        if first.type == tokenize.NAME and first.string in PACKAGES:
            edits.append((first.start, f"{NAMESPACE}."))
        return edits
    # `import a.b as c, d.e` : split the names at the commas (outside parentheses there are none)
    names, current = [], []
    for tok in statement[1:]:
        if tok.string == ",":
            names.append(current)
            current = []
        else:
            current.append(tok)
    names.append(current)
    bound = []
    for name in names:
        if name and name[0].type == tokenize.NAME and name[0].string in PACKAGES:
            edits.append((name[0].start, f"{NAMESPACE}."))
            if not any(t.string == "as" for t in name):
                bound.append(name[0].string)   # `import ci.x` binds `ci`: bind it again below
    if bound:
        end = statement[-1].end
        edits.append((end, "".join(f"; from {NAMESPACE} import {b}" for b in dict.fromkeys(bound))))
    return edits


class NamespacedBuildPy(build_py):
    """setuptools' build_py, then the rewrite above on every built module of the namespace."""

    def run(self) -> None:
        super().run()
        root = Path(self.build_lib) / NAMESPACE
        for path in sorted(root.rglob("*.py")) if root.is_dir() else ():
            text = path.read_text(encoding="utf-8")
            new = rewrite_source(text)
            if new != text:
                path.write_text(new, encoding="utf-8")
