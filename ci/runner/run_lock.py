"""One run at a time per job shard's results: an exclusive lock file that refuses a second holder.

``hold(path, what)`` takes an exclusive ``fcntl.flock`` on ``path`` *without waiting*, writes the
holder's pid into it and removes it on release. A second run that finds it held gets
:class:`LockRefused`, one line naming ``what`` and the pid that holds it: it refuses rather than
waits, because the first may run for an hour and the second would then overwrite its results anyway
(docs/design.md §8.6). A lock file that is a symlink is refused too (never followed).

The file is removed while still locked, and a taker checks that the file it locked is still the one at
``path`` (else it looks again): so removing it cannot let two runs hold "the" lock at once.
Imports nothing from the project (stdlib only, POSIX).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


class LockRefused(Exception):
    """Another run holds the lock (or the lock path is unsafe); ``str()`` is one line."""


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
    except OSError:
        return "unknown"


@contextlib.contextmanager
def hold(path: Path | str, what: str) -> Iterator[None]:
    """Hold ``path`` exclusively for the block, or raise :class:`LockRefused` at once."""
    path = Path(path)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise LockRefused(f"{what}: cannot open its lock file {path} ({exc.strerror or exc}; "
                              "a symlink is never followed)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LockRefused(f"{what} is in use by another run (pid {holder}); refusing to mix with or delete its "
                              "results: run again when it has ended") from None
        try:
            same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)     # the previous holder removed the file between our open and our lock: look again
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)
