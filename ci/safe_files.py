"""Reading untrusted trees and writing outputs safely (SECURITY.md).

Two promises, one module:

* ``read_inside(root, path, max_bytes)`` reads a *regular file inside root* and nothing else:
  a symlink whose target resolves outside ``root``, a special file (``/dev/zero``, a FIFO), a
  directory, a file over ``max_bytes`` or text that is not UTF-8 raises :class:`UnreadableFile`
  naming the path and the reason. The read itself is bounded (never more than ``max_bytes + 1``
  bytes leave the kernel), so a file that grows while it is read cannot exhaust memory.
* ``write_atomic(path, data)`` writes through a temporary file in the same folder, fsyncs it and
  ``os.replace``s it over ``path``: a reader sees the old content or the new one, never half.
  An output path that is a symlink is refused (:class:`UnsafeOutput`), so a link planted in a
  checkout cannot redirect the write to its target; with ``refuse_linked_folders`` (the audit's
  outputs) so is one whose folder has a symlink among its components (``linked_folder``: the
  working directory's own path above a relative output path excepted). Text that is not
  encodable (a lone surrogate) is written escaped, never a crash.

Imports nothing from the project (stdlib only): every room of ``ci`` and ``impl`` may use it.
"""
from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

DEFAULT_MAX_BYTES = 4 * 1024 * 1024   # a workflow or a test file larger than 4 MiB is not source
# Python the audit parses whole (test files, the noxfile): Python's syntax tree of 1 MiB of source peaks
# near 200 MB, so this cap is what bounds the audit's memory on a crafted file (no test file comes near)
MAX_SOURCE_BYTES = 1024 * 1024


class UnreadableFile(Exception):
    """A file the caller asked for cannot be read safely; ``str()`` is one line naming it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class UnsafeOutput(Exception):
    """An output path that must not be written (a symlink, a directory)."""


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path`` (after resolving every link) lies inside ``root`` (resolved)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def read_inside(root: Path | str, path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The UTF-8 text of ``path``, a regular file inside ``root``; else :class:`UnreadableFile`."""
    root, path = Path(root), Path(path)
    shown = _shown(root, path)
    real = os.path.realpath(path)   # an in-tree link is followed to what it names, here and only here
    if not is_inside(root, Path(real)):
        raise UnreadableFile(shown, "a symlink that resolves outside the audited tree (not read)")
    try:
        info = os.lstat(real)   # the resolved path: what it names, never a link
    except OSError as exc:
        raise UnreadableFile(shown, f"cannot be opened ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UnreadableFile(shown, "a directory, not a file")
    if not stat.S_ISREG(info.st_mode):   # a FIFO or a device is never opened
        raise UnreadableFile(shown, "not a regular file (device, FIFO or socket; not read)")
    if info.st_size > max_bytes:
        raise UnreadableFile(shown, f"{info.st_size} bytes, over the {max_bytes}-byte cap per file")
    try:   # the checked file itself: O_NOFOLLOW, and the opened file must be the one checked
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise UnreadableFile(shown, f"cannot be opened ({exc.strerror or exc})") from None
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino) or not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise UnreadableFile(shown, "changed while it was opened (not read)")
    try:
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 16, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total > max_bytes:
        raise UnreadableFile(shown, f"grew over the {max_bytes}-byte cap per file while read")
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(shown, f"not UTF-8 text (byte {exc.start})") from None


def _shown(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def write_atomic(path: Path | str, data: str | bytes, *, refuse_linked_folders: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically; refuse a symlink or a directory at ``path`` and, with
    ``refuse_linked_folders`` (outputs that an audited tree's links could redirect), a folder on its
    path that is a link (:func:`linked_folder`)."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafeOutput(f"{path}: is a symlink; refusing to write through it (remove it or choose another path)")
    if path.is_dir():
        raise UnsafeOutput(f"{path}: is a directory, expected a file path")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UnsafeOutput(f"{path}: its folder {folder} does not exist")
    linked = linked_folder(folder) if refuse_linked_folders else None
    if linked:
        raise UnsafeOutput(f"{path}: {linked}; refusing to write through it (choose a path without linked folders)")
    # text that cannot be UTF-8 (a lone surrogate from a file name) is written as its \udcNN escape, never a crash
    payload = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        if os.path.exists(path) and not path.is_symlink():
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def linked_folder(folder: Path | str) -> str | None:
    """Why writing into ``folder`` could land somewhere else, or None: a component of it that is a
    symlink (each prefix of the path as written; for a relative path, below the working directory),
    or a real path that differs from the lexical one (``a/../b`` through a linked ``a``)."""
    folder = Path(folder)
    base = Path(os.path.realpath(os.getcwd())) if not folder.is_absolute() else Path(folder.anchor)
    current = base
    for part in folder.parts[1:] if folder.is_absolute() else folder.parts:
        if part in ("", "."):
            continue
        current = current / part
        if part != ".." and os.path.islink(current):
            return f"its folder {current} is a symlink"
    lexical = os.path.normpath(base / folder)
    if os.path.realpath(folder) != lexical:
        return f"its folder {folder} resolves to {os.path.realpath(folder)}, not where its path says"
    return None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
