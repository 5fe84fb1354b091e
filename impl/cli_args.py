"""Argument handling shared by the impl CLIs: one line on stderr and exit 2 for a mistake.

``CliParser`` is an ``argparse.ArgumentParser`` whose errors are one line
(``prog: error: ...``, no usage dump, no traceback); ``bounded_int`` /
``bounded_float`` / ``int_list`` give every numeric flag sane bounds, checked while parsing;
``fail`` reports a mistake found after parsing the same way. Progress lines go
to stderr through ``Progress`` (no dependency). This module must never import
torch: the CLIs validate everything with it before the heavy imports.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import NoReturn


class CliParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)


def fail(prog: str, message: str) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(2)


def bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low}, {high}], got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}], got {value}")
        return value

    parse.__name__ = "int"
    return parse


def _number_list(convert, low, high, kind: str):
    """Comma-separated values of ``convert``, each in [low, high] (NaN is in no interval)."""
    def parse(text: str) -> tuple:
        try:
            values = tuple(convert(part) for part in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {kind} in [{low}, {high}], "
                                             f"got {text[:80]!r}") from None
        bad = [v for v in values if not low <= v <= high]
        if bad:
            raise argparse.ArgumentTypeError(f"every value must be in [{low}, {high}], got {bad[0]}")
        return values

    parse.__name__ = f"list of {kind}"
    return parse


def int_list(low: int, high: int):
    """Comma-separated integers, each in [low, high] (e.g. ``--batches 1,64,256``)."""
    return _number_list(int, low, high, "integers")


def float_list(low: float, high: float):
    """Comma-separated numbers, each in [low, high] (e.g. ``--p 0.9,0.95``)."""
    return _number_list(float, low, high, "numbers")


def bounded_float(low: float, high: float, *, low_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        too_low = value <= low if low_open else value < low
        if too_low or value > high or value != value:
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
            raise argparse.ArgumentTypeError(f"must be in {interval} seconds, got {text}")
        return value

    parse.__name__ = "float"
    return parse


class Progress:
    """At most one line every ``every_s`` seconds on stderr (``force`` prints anyway)."""

    def __init__(self, prog: str, every_s: float = 3.0):
        self.prog, self.every_s = prog, every_s
        self.start = time.monotonic()
        self.last = float("-inf")

    def __call__(self, message: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= self.every_s:
            self.last = now
            print(f"[{self.prog} {now - self.start:6.1f} s] {message}", file=sys.stderr, flush=True)
