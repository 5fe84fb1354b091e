"""The tests the conformance pytest plugin collects (one per mapped op); see pytest_plugin.py."""
from __future__ import annotations

import pytest

from impl.platform import default_device
from impl.testing.conformance.report import Report, format_text
from impl.testing.conformance.runner import run_op


def test_conformance(conformance_engine, conformance_op):
    engine, root, isolate = conformance_engine
    result = run_op(engine, engine.op(conformance_op), root, default_device(), isolate=isolate)
    report = format_text(Report(engine.name, root, str(default_device()), [result]))
    if result.verdict == "not provided":
        pytest.skip(f"{conformance_op}: {result.detail}")
    print(report)
    assert not result.failed, report
