"""The engine adapters the kit knows, by name (``--engine NAME``). Each module holds data only."""
from __future__ import annotations

from pathlib import Path

from impl.testing.conformance.adapter import EngineAdapter


def engines() -> dict[str, EngineAdapter]:
    from impl.testing.conformance.engines import fixture, sglang
    return {a.name: a for a in (sglang.ADAPTER, fixture.ADAPTER, fixture.BUGGY)}


def get_engine(name: str) -> EngineAdapter:
    known = engines()
    if name not in known:
        raise ValueError(f"--engine must be one of {', '.join(sorted(known))}, got {name!r}")
    return known[name]


def resolve_root(root: Path, package: str) -> Path | None:
    """The folder holding ``package``: ``root`` itself, or its ``python/`` folder (an engine's repository root)."""
    for candidate in (root, root / "python"):
        if (candidate / package).is_dir():
            return candidate
    return None
