"""Run a test body on several threads at once and report every thread's failure (tests of thread safety)."""
from __future__ import annotations

import threading
from typing import Callable


def run_at_once(body: Callable[[int], None], count: int = 2, *, timeout: float = 600) -> None:
    """Start ``count`` threads that wait at one barrier, then run ``body(thread index)``; fail when a
    thread hangs past ``timeout`` seconds or any body raised (every thread's error is listed)."""
    start = threading.Barrier(count)
    failures: list[str] = []

    def work(tid: int) -> None:
        try:
            start.wait(timeout=60)
            body(tid)
        except Exception as exc:  # noqa: BLE001  (reported by the calling thread)
            failures.append(f"thread {tid}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not failures, failures
