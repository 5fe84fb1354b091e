"""What every adapter provides (plain data + a small interface); no I/O here.

Imports nothing from ``impl/``, torch or test code.
"""
from __future__ import annotations

from ci.input_errors import InputError
from ci.numbers import whole_number
from ci.registry.partition import MAX_SHARDS
from ci.safe_yaml import short

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping


@dataclass(frozen=True)
class RunnerCall:
    """One command in a ``run:`` script that starts the repository's suite runner."""
    options: Mapping[str, str | None]   # option name -> raw token ("" for a bare flag)
    text: str                           # the command as written (for messages)
    rest: tuple[str, ...] = ()          # every word after the runner (for options that mask)


UNRESOLVED = "\x00unresolved"   # an option value the scan could not resolve (known only at run time)


@dataclass(frozen=True)
class Target:
    """What a resolved runner call runs: ``kind`` is "job", "group", "suite" or "file" (a test run by path)."""
    kind: str
    id: str
    shard: tuple[int, int] | None = None   # (index 1-based, count); None: all of it (or unknown)
    shard_unknown: str = ""                # why the shard is known only at run time ("" when known)


class Adapter:
    name: str = ""
    has_gates: bool = False
    runner_hint: str = ""                 # how a step should run a suite (for messages)
    context: Mapping[str, Any] = {}       # expression context the adapter knows (github.repository)
    partial_targets: bool = False         # targets() accepts UNRESOLVED option values (else: unresolved step)

    def collect(self, root: Path) -> Any:
        """The repository's registrations, read from syntax trees (never by importing a file)."""
        raise NotImplementedError

    def find_call(self, words: tuple[str, ...]) -> RunnerCall | None:
        """The runner call in one shell command's words, or None."""
        raise NotImplementedError

    def mentions_runner(self, script: str) -> bool:
        """Whether a ``run:`` script could start the runner at all (a cheap text check before reading it)."""
        return True

    def call_masks(self, call: RunnerCall) -> list[str]:
        """Options on the runner's own command line that make a green step prove nothing."""
        return []

    def targets(self, options: Mapping[str, str | None]) -> tuple[list[Target], str | None]:
        """Targets of a call whose option tokens are resolved to plain strings; or a problem."""
        raise NotImplementedError


def parse_options(words: tuple[str, ...], start: int, names: Mapping[str, bool]) -> dict[str, str | None]:
    """``--name value`` / ``--name=value`` / bare flags from ``words[start:]``.

    ``names`` maps each option to whether it takes a value; other words are ignored.
    """
    out: dict[str, str | None] = {}
    i = start
    while i < len(words):
        word = words[i]
        name, eq, value = word.partition("=")
        if name in names:
            if not names[name]:
                out[name] = ""
            elif eq:
                out[name] = value
            elif i + 1 < len(words):
                out[name] = words[i + 1]
                i += 1
            else:
                out[name] = None
        i += 1
    return out


def parse_shard_text(text: str) -> tuple[int, int]:
    """``"I/N"`` -> (I, N) with 1 <= I <= N; a ValueError says what a shard looks like."""
    index_text, slash, count_text = text.strip().partition("/")
    index, count = whole_number(index_text), whole_number(count_text)
    if not slash or index is None or count is None or not 1 <= index <= count:
        raise InputError(f"--shard {short(text)}: expected I/N with 1 <= I <= N, e.g. 2/3")
    if count > MAX_SHARDS:   # a crafted 1/10**20 would make the partition checks loop for ever
        raise InputError(f"--shard {short(text)}: at most {MAX_SHARDS} shards (a GitHub matrix holds 256 jobs)")
    return index, count
