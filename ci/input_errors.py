"""InputError: a refusal of what a command was given (its arguments, or the tree, registry or files it
reads), as opposed to a defect of the tool.

Every room raises it (or a subclass) for bad input; the command-line entry points map it to exit 2
("usage or unreadable input") and any other exception to exit 3 ("internal error"), so a bug is
never reported as the user's mistake. It subclasses ValueError: callers that catch ValueError keep
working.
"""
from __future__ import annotations

import json
from typing import Any


class InputError(ValueError):
    """Bad input, named in one line: the argument, file or entry and what was expected."""


def json_input(text: str | bytes, where: str, error: type[InputError] = InputError) -> Any:
    """``json.loads(text)`` of a file the command was given; anything it cannot decode is ``error``
    naming ``where``: malformed JSON, bytes that are not UTF-8, and nesting deeper than the decoder's
    recursion (a crafted ``[[[[...`` would otherwise be a RecursionError, read as a defect)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:   # UnicodeDecodeError; nesting past the recursion limit
        why = "nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
        raise error(f"{where}: not readable JSON ({why})") from None
