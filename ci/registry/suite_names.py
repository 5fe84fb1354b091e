"""Suite names that are probably typos of each other (``kernles`` next to ``kernels``).

A suite is suspect when it is the smaller of two suites of the same hardware and schedule whose
names are within edit distance 2, and it is not declared as intended. Imports nothing from
``impl/``, torch or test code.
"""
from __future__ import annotations

from typing import Iterable, Mapping

MAX_DISTANCE = 2


def edit_distance(a: str, b: str, limit: int = MAX_DISTANCE) -> int:
    """Levenshtein distance, stopping early once it exceeds ``limit`` (then returns limit + 1)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def near_names(sizes: Mapping[str, int], declared: Iterable[str] = ()) -> list[tuple[str, str, int]]:
    """(suspect, likely meant, distance) for job ids ``schedule/hardware/suite`` -> size: the suspect is a
    one-registration suite next to a bigger one (a typo makes a new one-test job); a name in ``declared``
    is never suspect."""
    declared = set(declared)
    out = []
    ids = sorted(sizes)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            sa, ha, na = a.split("/", 2)
            sb, hb, nb = b.split("/", 2)
            if (sa, ha) != (sb, hb) or _numbered_siblings(na, nb):
                continue
            distance = edit_distance(na, nb)
            if distance > MAX_DISTANCE:
                continue
            suspect, meant = (a, b) if (sizes[a], a) < (sizes[b], b) else (b, a)
            if sizes[suspect] == 1 and sizes[meant] >= 2 and suspect.split("/", 2)[2] not in declared:
                out.append((suspect, meant, distance))
    best: dict[str, tuple[str, str, int]] = {}
    for item in out:   # one finding per suspect: its closest (then biggest) neighbour
        if item[0] not in best or (item[2], -sizes[item[1]]) < (best[item[0]][2], -sizes[best[item[0]][1]]):
            best[item[0]] = item
    return list(best.values())


def _numbered_siblings(a: str, b: str) -> bool:
    """``nightly-1-gpu`` / ``nightly-2-gpu``, ``mi325`` / ``mi355``: names that differ only in digits."""
    return len(a) == len(b) and all(x == y or (x.isdigit() and y.isdigit()) for x, y in zip(a, b))
