"""The tests the conformance pytest plugin collects (one per mapped op and metadata builder); see pytest_plugin.py."""
from __future__ import annotations

import pytest

from impl.platform import default_device
from impl.testing.conformance.metadata import run_builder
from impl.testing.conformance.report import Report, format_text
from impl.testing.conformance.runner import run_op


def test_conformance(conformance_engine, conformance_op):
    engine, root, isolate = conformance_engine
    device = default_device()
    adapter = engine.op(conformance_op)
    if adapter is not None:
        result = run_op(engine, adapter, root, device, isolate=isolate)
        report = format_text(Report(engine.name, root, str(device), [result]))
    else:  # a metadata builder: values and the sync table per policy cell
        builder = next(m for m in engine.metadata if m.name == conformance_op)
        result = run_builder(engine, builder, root, str(device), isolate=isolate)
        report = format_text(Report(engine.name, root, str(device), [], [result]))
    if result.verdict == "not provided":
        pytest.skip(f"{conformance_op}: {result.detail}")
    print(report)
    assert not result.failed, report
