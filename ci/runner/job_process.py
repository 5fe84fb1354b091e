"""One pytest process of a job, in its own process group, and how the runner stops it (docs/design.md §8.6).

``run_process`` starts pytest in a new session; on a stop of the runner (SIGTERM/SIGINT, through
:class:`StopFlag`) or a job timeout it sends SIGINT to the group (pytest then writes its JUnit), SIGKILL
after a grace period, and once pytest ended SIGKILLs whatever is left in its group (xdist workers, a
test's spawned ranks). ``stop_on_signals`` turns SIGTERM/SIGINT into a :class:`StopFlag` for a whole run.
Imports nothing from the project and no torch.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TextIO

KILL_GRACE_S = 20.0      # default: after SIGINT (pytest then writes its JUnit), wait this long before SIGKILL
RUNNER_SIGNALLED = "the runner received"


class StopFlag:
    """Set once when the runner is told to stop (SIGTERM/SIGINT); every job in flight then stops its pytest."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""
        self.signum = 0

    def set(self, signum: int) -> None:
        if not self._event.is_set():
            self.reason = f"{RUNNER_SIGNALLED} {signal.Signals(signum).name}"
            self.signum = signum
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    @property
    def exit_code(self) -> int:
        """The shell's code for death by the first signal received: 128 + its number (130 SIGINT, 143 SIGTERM)."""
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals(stop: StopFlag | None = None):
    """For the whole block, SIGTERM and SIGINT set ``stop`` instead of ending the runner (a second signal
    changes nothing), so the summaries are written whatever arrives when; in the main thread only."""
    stop = stop or StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {s: signal.signal(s, lambda signum, _frame: stop.set(signum)) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


POLL_S = 0.1


def _reap(proc: subprocess.Popen, *, block: bool) -> tuple[int, float] | None:
    """(exit code, CPU seconds of its process tree) once ``proc`` ended, else None. ``wait4`` gives the
    rusage of this one child and the descendants it reaped (xdist workers), so concurrent jobs do not
    count each other's time."""
    pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    _sweep(proc.pid)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def _sweep(pgid: int) -> None:
    """SIGKILL whatever is left in pytest's process group once pytest itself ended (xdist workers, a test's
    spawned ranks): nothing the job started outlives it. The group id cannot be reused while a member lives."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_process(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float | None,
                 grace: float = KILL_GRACE_S, log: TextIO | None = None,
                 stop: StopFlag | None = None) -> tuple[int, str | None, float]:
    """Run pytest (its output to ``log`` when given); on a stop of the runner (SIGTERM/SIGINT in the main
    thread, or ``stop`` set by the thread that owns the signals) or a job timeout, SIGINT it (it writes its
    JUnit), then SIGKILL after a grace period. Returns (exit code, what stopped it or None, CPU seconds)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=True, stdout=log,
                            stderr=subprocess.STDOUT if log is not None else None)
    own_signals = stop is None and threading.current_thread() is threading.main_thread()
    flag = stop or StopFlag()
    previous = {}
    if own_signals:
        previous = {s: signal.signal(s, lambda signum, _frame: flag.set(signum))
                    for s in (signal.SIGTERM, signal.SIGINT)}
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        stopped = None
        while stopped is None:
            done = _reap(proc, block=False)
            if done is not None:
                return done[0], None, done[1]
            if flag.is_set():
                stopped = flag.reason
            elif deadline is not None and time.monotonic() >= deadline:
                stopped = f"the job exceeded its {timeout:.0f}s time limit"
            else:
                time.sleep(POLL_S)
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:
            pass
        grace_end = time.monotonic() + grace
        while time.monotonic() < grace_end:
            done = _reap(proc, block=False)
            if done is not None:
                return done[0], stopped, done[1]
            time.sleep(POLL_S)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        rc, cpu = _reap(proc, block=True)
        return rc, stopped, cpu
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
