"""Listing an audited tree's files without leaving it (SECURITY.md: the audited repository is untrusted).

``files_inside(root, rel_dir, pattern)`` is ``sorted((root / rel_dir).rglob(pattern))`` that stays in
the tree: nothing when ``rel_dir`` itself resolves outside ``root`` (a planted ``registered -> /``),
and no descent into a symlinked folder (Path.rglob on Python 3.10+ does not follow them; the
function checks each folder anyway, so the promise does not hang on that detail). A listed
file may still be a link, a device or a folder named ``x.py``: read it with
``ci.safe_files.read_inside``. Imports nothing from the project but ci.safe_files.
"""
from __future__ import annotations

from pathlib import Path

from ci.safe_files import is_inside


def outside_note(root: Path | str, rel_dir: str) -> str | None:
    """One line when ``root / rel_dir`` is a folder that resolves outside ``root`` (its files are not listed)."""
    base = Path(root) / rel_dir
    if base.is_dir() and not is_inside(Path(root), base):
        return f"{rel_dir}: a symlink that resolves outside the audited tree (not read)"
    return None


def files_inside(root: Path | str, rel_dir: str, pattern: str = "*.py", *, recursive: bool = True) -> list[Path]:
    """Entries under ``root / rel_dir`` matching ``pattern``, in sorted order, never outside ``root``."""
    root = Path(root)
    base = root / rel_dir
    if not base.is_dir() or not is_inside(root, base):
        return []
    found = base.rglob(pattern) if recursive else base.glob(pattern)
    return sorted(p for p in found if is_inside(root, p.parent))
