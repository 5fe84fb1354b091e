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


class _RepeatedName(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: an object, unless it names a member twice."""
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise _RepeatedName(name)
        out[name] = value
    return out


def _shown(name: str, limit: int = 80) -> str:
    text = repr(name)   # escapes line breaks: the message stays one line
    return text if len(text) <= limit else text[:limit - 3] + "..."


def json_input(text: str | bytes, where: str, error: type[InputError] = InputError) -> Any:
    """``json.loads(text)`` of a file the command was given; anything it cannot decode is ``error``
    naming ``where``: malformed JSON, bytes that are not UTF-8, nesting deeper than the decoder's
    recursion (a crafted ``[[[[...`` would otherwise be a RecursionError, read as a defect), and an
    object that names a member twice, at any depth (``json.loads`` would keep the last one silently,
    so a reviewer reading the first and the tool reading the last would disagree about the file)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_names)
    except _RepeatedName as exc:
        raise error(f"{where}: an object names the member {_shown(exc.name)} twice (JSON would keep only the "
                    "last one): remove the repeated member") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}: not JSON (line {exc.lineno}: {exc.msg})") from None
    except (ValueError, RecursionError) as exc:   # UnicodeDecodeError; nesting past the recursion limit
        why = "nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
        raise error(f"{where}: not readable JSON ({why})") from None
