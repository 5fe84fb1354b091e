"""Suite names that are probably typos of each other (``kernles`` next to ``kernels``).

A suite is suspect when it is the smaller of two suites of the same hardware and schedule whose
names are within edit distance 2, and it is not declared as intended. Imports nothing from
``impl/``, torch or test code.
"""
from __future__ import annotations

from typing import Iterable, Mapping

MAX_DISTANCE = 2
MAX_COMPARISONS = 2_000_000   # name pairs compared in one audit; a crafted registry past it is reported, not run


class TooManyNames(ValueError):
    """The candidate pairs exceed MAX_COMPARISONS (the typo check is then skipped, and says so)."""


def edit_distance(a: str, b: str, limit: int = MAX_DISTANCE) -> int:
    """Levenshtein distance, or ``limit + 1`` once it is certainly above ``limit``. Only the band of
    cells within ``limit`` of the diagonal is computed (cells outside it are above ``limit``), so two
    long names cost O(length x limit), not O(length^2)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    over = limit + 1
    previous = {j: j for j in range(min(len(b), limit) + 1)}   # row 0, inside the band
    for i, ca in enumerate(a, 1):
        current = {i - limit - 1: over} if i - limit - 1 >= 0 else {}
        if i <= limit:
            current[0] = i
        for j in range(max(1, i - limit), min(len(b), i + limit) + 1):
            current[j] = min(previous.get(j, over) + 1, current.get(j - 1, over) + 1,
                             previous.get(j - 1, over) + (ca != b[j - 1]))
        if min(current.values()) > limit:
            return over
        previous = current
    return min(previous.get(len(b), over), over)


def near_names(sizes: Mapping[str, int], declared: Iterable[str] = ()) -> list[tuple[str, str, int]]:
    """(suspect, likely meant, distance) for job ids ``schedule/hardware/suite`` -> size: the suspect is a
    one-registration suite next to a bigger one (a typo makes a new one-test job); a name in ``declared``
    is never suspect. Only suspect x bigger pairs of one schedule and hardware whose lengths differ by at
    most MAX_DISTANCE are compared; more than MAX_COMPARISONS of them is :class:`TooManyNames`."""
    declared = set(declared)
    groups: dict[tuple[str, str], tuple[list[str], dict[int, list[str]]]] = {}
    for job_id, size in sizes.items():
        schedule, hardware, name = job_id.split("/", 2)
        single, bigger = groups.setdefault((schedule, hardware), ([], {}))
        if size == 1 and name not in declared:
            single.append(job_id)
        elif size >= 2:
            bigger.setdefault(len(name), []).append(job_id)
    pairs = []
    for single, bigger in groups.values():
        for suspect in single:
            n = len(suspect.split("/", 2)[2])
            pairs += [(suspect, meant) for length in range(n - MAX_DISTANCE, n + MAX_DISTANCE + 1)
                      for meant in bigger.get(length, ())]
            if len(pairs) > MAX_COMPARISONS:
                raise TooManyNames(f"more than {MAX_COMPARISONS} suite name pairs to compare")
    best: dict[str, tuple[str, str, int]] = {}
    for suspect, meant in pairs:   # one finding per suspect: its closest (then biggest, then first) neighbour
        na, nb = suspect.split("/", 2)[2], meant.split("/", 2)[2]
        if _numbered_siblings(na, nb):
            continue
        distance = edit_distance(na, nb)
        if distance > MAX_DISTANCE:
            continue
        rank = (distance, -sizes[meant], meant)
        if suspect not in best or rank < (best[suspect][2], -sizes[best[suspect][1]], best[suspect][1]):
            best[suspect] = (suspect, meant, distance)
    return [best[k] for k in sorted(best)]


def _numbered_siblings(a: str, b: str) -> bool:
    """``nightly-1-gpu`` / ``nightly-2-gpu``, ``mi325`` / ``mi355``: names that differ only in digits."""
    return len(a) == len(b) and all(x == y or (x.isdigit() and y.isdigit()) for x, y in zip(a, b))
