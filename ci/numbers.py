"""Whole numbers read from text nobody here controls: workflow files, command lines, API answers.

``str.isdigit()`` is true for ``²`` and ``int()`` refuses it; ``int()`` also refuses more than 4,300
decimal digits. Either would be a ValueError deep inside a reader, which the audit must report as
its own defect (exit 3). :func:`whole_number` reads only what needs no such care.
"""
from __future__ import annotations

MAX_DIGITS = 18   # below 2**63: every count, index, shard and exit code a real file holds


def whole_number(text: object) -> int | None:
    """``text`` as a non-negative int when it is 1 to MAX_DIGITS ASCII digits (``"007"`` is 7); None
    for anything else (a sign, a space, ``²``, 5,000 digits, a value that is not text)."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)
