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
``log_safe`` also writes C0/C1 control characters other than tab and the line breaks (an ANSI
escape ``\\x1b[2K`` that would erase or recolour the log) as ``\\xNN``, and a lone surrogate (a byte
of a file name that is not UTF-8, kept by Python as ``\\udcNN``) as ``\\xNN``, so the log shows them
and every line can be encoded. ``json_log_safe`` does the same for JSON or SARIF printed to the log:
``:`` of ``::`` as ``\\u003a`` and ``[`` of ``##[`` as ``\\u005b`` (JSON escapes, so the document
parses to the same strings and no line holds either command form), C1 controls as ``\\u00NN``
(JSON already escapes C0), a lone surrogate as the text ``\\xNN``. ``printable`` and
``json_printable`` are the surrogate part alone, for a file that must be valid UTF-8 (an
``--output`` of text, or of JSON or SARIF). Imports nothing from the project.
"""
from __future__ import annotations

import re

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_COMMAND_START = re.compile(r"^(\s*)::")
_LEGACY = "##["
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_C1 = re.compile(r"[\x7f-\x9f]")


def _byte(ch: str) -> str:
    """``\\xNN`` for a control character or a surrogate-escaped byte (``\\udcNN``), ``\\uNNNN`` for another
    lone surrogate."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        code -= 0xDC00
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with each lone surrogate written as text (``\\xe9``): encodable as UTF-8, whatever the locale."""
    return _SURROGATE.sub(lambda m: _byte(m.group(0)), text) if _SURROGATE.search(text) else text


def json_printable(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with each lone surrogate, which only appears
    inside its strings, written so that the string holds its ``\\xNN`` text: valid UTF-8, valid JSON."""
    return _SURROGATE.sub(lambda m: "\\" + _byte(m.group(0)), text) if _SURROGATE.search(text) else text


def json_log_safe(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) that no runner reads a command from, and that
    parses to the same strings (a lone surrogate: to its ``\\xNN`` text). ``:``, ``#``, ``[`` and C1
    characters appear only inside strings there, never inside an escape, so each replacement is a
    JSON escape of the same character."""
    text = text.replace("::", ":\\u003a").replace(_LEGACY, "##\\u005b")
    return json_printable(_C1.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text))


def escape_data(text: str) -> str:
    """One line: ``%``, ``\\r`` and ``\\n`` encoded as GitHub's toolkit does for a command's message."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def log_safe(text: str) -> str:
    """``text`` with no line that the Actions runner would read as a workflow command."""
    text = printable(_CONTROL.sub(lambda m: _byte(m.group(0)), text))
    lines = _LINE_BREAK.split(text)
    return "\n".join(_COMMAND_START.sub(r"\1%3A%3A", line).replace(_LEGACY, "##%5B") for line in lines)
