"""The ``@register`` decorator that files a test into a suite (docs/design.md §8).

Use literal arguments only: ``ci/`` collects registrations by reading each
file's syntax tree (no import, no torch, no GPU), so a computed argument is a
collection error. At run time the decorator only records its arguments on the
test object; it never changes how pytest runs the test.

    @register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=40)
    @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900,
              env={"unified": {"DSPARK_KV_BACKEND": "unified"}, "paged": {"DSPARK_KV_BACKEND": "paged"}})
    @register(..., disabled={"reason": "flaky on ROCm 7.2, issue #12", "until": "2027-01-31"})
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence, TypeVar

SCHEDULES = ("per-commit", "nightly")
REGISTRATIONS_ATTR = "__dspark_registrations__"

T = TypeVar("T")


def register(
    *,
    suite: str,
    hardware: str | Sequence[str],
    schedule: str,
    est_time: float,
    env: Mapping[str, Mapping[str, str]] | None = None,
    disabled: Mapping[str, str] | None = None,
    retries: int = 0,
    timeout: float | None = None,
) -> Callable[[T], T]:
    """Record that the decorated test function or class belongs to ``suite``.

    hardware: one catalog label or a list of them (``ci/hardware.yaml``).
    schedule: ``per-commit`` or ``nightly``.
    est_time: estimated seconds for the whole test on that hardware.
    env: named variants, each a mapping of gate environment variables to values;
        every variant becomes its own job ``schedule/hardware/suite[variant]``.
    disabled: ``{"reason": ..., "until": "YYYY-MM-DD"}``; the audit fails when
        the reason is missing or the date has passed.
    retries: opt-in reruns (0-3) for a known-flaky test; a pass on a rerun is
        reported as *flaky*, never as a plain pass.
    timeout: per-test timeout in seconds; default derived from ``est_time``.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"register(schedule=...) must be one of {SCHEDULES}, got {schedule!r}")
    record: dict[str, Any] = {
        "suite": suite,
        "hardware": [hardware] if isinstance(hardware, str) else list(hardware),
        "schedule": schedule,
        "est_time": est_time,
        "env": {k: dict(v) for k, v in (env or {}).items()},
        "disabled": dict(disabled) if disabled else None,
        "retries": retries,
        "timeout": timeout,
    }

    def decorate(obj: T) -> T:
        existing = list(getattr(obj, REGISTRATIONS_ATTR, ()))
        setattr(obj, REGISTRATIONS_ATTR, existing + [record])
        return obj

    return decorate
