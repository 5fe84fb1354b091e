"""Per-step component timing (docs/design.md §7.6): nested sections are charged exclusively, the
rest of the step is ``other``, and without an active timer a section costs nothing and records
nothing. A fake clock makes the numbers exact (no sleeps, nothing timed)."""
from __future__ import annotations

import pytest

from ci.registration import register
from impl import step_timing
from impl.step_timing import COMPONENTS, OTHER, StepTimer, format_summary, section


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, us: float) -> None:
        self.now += us * 1e-6


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_nested_sections_are_exclusive_and_the_rest_is_other(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(step_timing.time, "perf_counter", clock)
    timer = StepTimer("cpu")
    with timer.active():
        for writes_us in (30, 50):
            timer.begin_step()
            clock.advance(5)  # bookkeeping before any section
            with section("model"):
                clock.advance(20)
                with section("writes"):
                    clock.advance(writes_us)
                clock.advance(10)
            with section("metadata"):
                clock.advance(7)
            with section("metadata"):  # a component called twice in a step adds up
                clock.advance(3)
            timer.end_step()
    first, second = (s["host_us"] for s in timer.steps)
    assert first["model"] == pytest.approx(30) and first["writes"] == pytest.approx(30)
    assert first["metadata"] == pytest.approx(10) and first[OTHER] == pytest.approx(5)
    assert timer.steps[0]["wall_us"] == pytest.approx(75) and second["writes"] == pytest.approx(50)
    assert all(first[k] == 0 for k in ("draft", "renorm", "accept"))
    summary = timer.summary()
    assert summary["steps"] == 2 and summary["host_us"]["writes"] == pytest.approx(40)
    assert "host us: metadata 10, draft 0, model 30, writes 40" in format_summary(summary)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=1)
def test_without_an_active_timer_sections_record_nothing():
    timer = StepTimer("cpu")
    assert step_timing.active_timer() is None
    with section("model"), section("not-a-component"):  # no timer: not even the name is looked at
        pass
    assert timer.steps == [] and timer.summary() == {}
    with timer.active(), pytest.raises(ValueError, match="section name must be one of"):
        with section("bogus"):
            pass
    assert step_timing.active_timer() is None and set(COMPONENTS) >= {"metadata", "renorm", "writes", "model"}
