"""InputError: a refusal of what a command was given (its arguments, or the tree, registry or files it
reads), as opposed to a defect of the tool.

Every room raises it (or a subclass) for bad input; the command-line entry points map it to exit 2
("usage or unreadable input") and any other exception to exit 3 ("internal error"), so a bug is
never reported as the user's mistake. It subclasses ValueError: callers that catch ValueError keep
working.
"""
from __future__ import annotations


class InputError(ValueError):
    """Bad input, named in one line: the argument, file or entry and what was expected."""
