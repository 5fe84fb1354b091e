"""Python source from an audited tree, parsed without printing any of it (SECURITY.md).

``ast.parse`` of a crafted file can emit a SyntaxWarning (an invalid escape such as ``"\\d"`` on Python
3.12+). The default warning filter prints it to stderr with the offending source line, which
``linecache`` reads from disk by the file name given to the parser: a raw line of the audited tree
(or of whatever file sits at that path relative to the working directory) in the CI log, where it
may start a workflow command (``::add-mask::...``). ``parse_quietly`` parses with every warning
silenced and a file name that is no path (``<registered/x.py>``), so nothing is printed and nothing
else is read. ``parse_source`` also turns every way the parser can refuse a file (a syntax error, a
NUL byte, nesting past the parser's stack) into :class:`ci.safe_files.UnreadableFile` naming it, one
line, never a traceback. Imports nothing from the project but ci.safe_files.
"""
from __future__ import annotations

import ast
import warnings

from ci.safe_files import UnreadableFile

# what ast.parse raises on text it cannot turn into a tree (a NUL byte is a ValueError; deep nesting a
# RecursionError or MemoryError, depending on the version)
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)


def parse_quietly(text: str, name: str, mode: str = "exec") -> ast.AST:
    """``ast.parse(text, mode=mode)`` with warnings silenced and ``<name>`` as the file name; raises what
    ast.parse raises (:data:`PARSE_ERRORS`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=f"<{name}>", mode=mode)


def unparsable_reason(exc: BaseException) -> str:
    """Why the parser refused a file, in a few words (for a message that names the file)."""
    if isinstance(exc, SyntaxError):
        return f"syntax error at line {exc.lineno or 1}: {exc.msg}"
    return f"not parsable Python ({type(exc).__name__})"


def parse_source(text: str, name: str) -> ast.Module:
    """The module tree of ``text`` (the file ``name``, relative to the audited root), quietly; a file the
    parser refuses is :class:`UnreadableFile` naming it."""
    try:
        return parse_quietly(text, name)
    except PARSE_ERRORS as exc:
        raise UnreadableFile(name, unparsable_reason(exc)) from None
