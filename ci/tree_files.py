"""Listing an audited tree's files without leaving it (SECURITY.md: the audited repository is untrusted).

``files_inside(root, rel_dir, pattern)`` lists the entries under ``root / rel_dir`` whose names match
``pattern`` (like ``Path.rglob``), in sorted order, and stays in the tree: nothing when ``rel_dir``
itself resolves outside ``root`` (a planted ``registered -> /``), and no descent into a symlinked
folder. The walk is an explicit stack (a tree nested thousands of folders deep costs no recursion)
capped at MAX_DEPTH folders below ``rel_dir``; a folder deeper than that, or one that cannot be
listed (a path past the system's limit, no permission), is skipped and named in one line appended to
``problems`` when the caller passes that list. A listed file may still be a link, a device or a
folder named ``x.py``: read it with ``ci.safe_files.read_inside``. Imports nothing from the project
but ci.safe_files.
"""
from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from ci.safe_files import is_inside

MAX_DEPTH = 64          # folders below the listed one; a test tree needs fewer than 10
MAX_SHOWN = 160         # characters of a folder's path in a message (a crafted one may be 4 KB)


def outside_note(root: Path | str, rel_dir: str) -> str | None:
    """One line when ``root / rel_dir`` is a folder that resolves outside ``root`` (its files are not listed)."""
    base = Path(root) / rel_dir
    if base.is_dir() and not is_inside(Path(root), base):
        return f"{rel_dir}: a symlink that resolves outside the audited tree (not read)"
    return None


def shown_path(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut in the middle to at most ``limit`` characters (a path in a one-line message)."""
    if len(text) <= limit:
        return text
    half = (limit - 3) // 2
    return f"{text[:half]}...{text[-half:]}"


def files_inside(root: Path | str, rel_dir: str, pattern: str = "*.py", *, recursive: bool = True,
                 problems: list[str] | None = None) -> list[Path]:
    """Entries under ``root / rel_dir`` matching ``pattern``, in sorted order, never outside ``root``;
    folders skipped (too deep, unlistable) are named in ``problems`` when given."""
    root = Path(root)
    base = root / rel_dir
    if not base.is_dir() or not is_inside(root, base):
        return []
    found: list[Path] = []
    stack: list[tuple[Path, int]] = [(base, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if problems is not None:
                problems.append(f"{shown_path(_rel(root, folder))}: a folder that cannot be listed "
                                f"({exc.strerror or type(exc).__name__}); its files are not read")
            continue
        for entry in entries:
            path = Path(entry.path)
            if fnmatch.fnmatchcase(entry.name, pattern):
                found.append(path)
            if not recursive:
                continue
            try:
                is_folder = entry.is_dir(follow_symlinks=False)   # a symlinked folder is never descended
            except OSError:
                is_folder = False
            if not is_folder:
                continue
            if depth + 1 > MAX_DEPTH:
                if problems is not None:
                    problems.append(f"{shown_path(_rel(root, path))}: a folder nested deeper than {MAX_DEPTH} "
                                    f"levels below {rel_dir}/; its files are not read")
                continue
            stack.append((path, depth + 1))
    return sorted(found)


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
