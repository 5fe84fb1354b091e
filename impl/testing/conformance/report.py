"""The conformance report: a table per engine (op, verdict, cases, where) and the details, or JSON.

Core differences (in-contract cases) come first, each with its shrunk call; out-of-contract
differences are listed apart and never fail a run. Imports the kit's runner types and impl.table.
"""
from __future__ import annotations

import json

from impl.table import format_table
from impl.testing.conformance.runner import OpResult


def _counts(result: OpResult) -> str:
    """Agreeing / run cases per kind (not-applicable ones left out), then core and out-of-contract differences."""
    parts = []
    for kind, label in (("sample", "samples"), ("error", "errors"), ("bad-value", "bad values")):
        ran = [c for c in result.cases if c.kind == kind and c.status != "not-applicable"]
        if ran:
            parts.append(f"{label} {sum(c.status == 'agree' for c in ran)}/{len(ran)}")
    return ", ".join(parts) + f"; core {len(result.core_failures)}, apart {len(result.out_of_contract)}"


def format_text(engine: str, root: str, device: str, results: list[OpResult]) -> str:
    lines = [f"conformance: engine {engine}, root {root}, device {device}"]
    rows = [(r.op, r.verdict, _counts(r) if r.cases else r.detail, r.where) for r in results]
    lines.append(format_table(("op", "verdict", "agree/run (core, apart: differences)", "engine function"), rows))
    for r in results:
        if r.stubs:
            lines.append(f"{r.op}: stubs used: {', '.join(r.stubs)}")
    core = [(r, c) for r in results for c in r.core_failures]
    if core:
        lines.append("\ncore differences (in-contract inputs):")
        for r, c in core:
            lines.append(f"  {r.op} [{c.kind} {c.name}] {c.status}: {c.detail}")
            if c.shrunk:
                lines.append(f"    smallest: {c.shrunk}")
    out = [(r, c) for r in results for c in r.out_of_contract]
    if out:
        lines.append("\nout-of-contract differences (listed apart; they do not fail the run):")
        for r, c in out:
            lines.append(f"  {r.op} [{c.kind} {c.name}] {c.status}: {c.detail}")
            if c.shrunk:
                lines.append(f"    smallest: {c.shrunk}")
    failed = [r.op for r in results if r.failed]
    lines.append(f"\nresult: {'FAIL (' + ', '.join(failed) + ')' if failed else 'pass'}: "
                 f"{sum(r.verdict == 'agree' for r in results)} agree, "
                 f"{sum(r.verdict == 'not provided' for r in results)} not provided, {len(failed)} failing")
    return "\n".join(lines)


def as_json(engine: str, root: str, device: str, results: list[OpResult]) -> str:
    return json.dumps({
        "engine": engine, "root": root, "device": device,
        "failed": any(r.failed for r in results),
        "ops": [{"op": r.op, "where": r.where, "verdict": r.verdict, "detail": r.detail, "stubs": r.stubs,
                 "files": r.files,
                 "cases": [{"kind": c.kind, "name": c.name, "status": c.status, "in_contract": c.in_contract,
                            "detail": c.detail, "shrunk": c.shrunk} for c in r.cases]} for r in results],
    }, indent=2)
