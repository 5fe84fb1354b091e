"""Text from an audited repository, made safe to print into a GitHub Actions log.

The runner reads every output line (a line ends at ``\\n``, ``\\r`` or ``\\r\\n``) and, after
stripping leading whitespace, treats one that starts with ``::`` as a workflow command
(``::add-mask::``, ``::warning::``, ``::stop-commands::``...); the older ``##[command]`` form is
still recognised too. A step name or a suite name from the audited tree that contains
``"ok\\n::add-mask::x"`` would then issue commands in the caller's job. ``log_safe(text)``
is applied once, where the text report is printed: every line that could start a command has
its ``::`` (or ``##[``) encoded the way GitHub's toolkit encodes command data (``:`` as ``%3A``,
``[`` as ``%5B``), and a bare ``\\r`` becomes a line break, so what the runner sees as a line is
what the report shows as one. ``escape_data`` is the toolkit's own escaping of a message
(``%``, ``\\r``, ``\\n`` as ``%25``, ``%0D``, ``%0A``), for a value that must stay on one line.
Imports nothing from the project.
"""
from __future__ import annotations

import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_COMMAND_START = re.compile(r"^(\s*)::")
_LEGACY = "##["


def escape_data(text: str) -> str:
    """One line: ``%``, ``\\r`` and ``\\n`` encoded as GitHub's toolkit does for a command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def log_safe(text: str) -> str:
    """``text`` with no line that the Actions runner would read as a workflow command."""
    lines = _LINE_BREAK.split(text)
    return "\n".join(_COMMAND_START.sub(r"\1%3A%3A", line).replace(_LEGACY, "##%5B") for line in lines)
