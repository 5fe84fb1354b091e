"""The conformance report: a table per engine (op, verdict, cases, where), the metadata builders and their
sync table per policy cell, and the details; or the same as JSON.

Core differences (in-contract cases) come first, each with its shrunk call; out-of-contract
differences are listed apart and never fail a run. A sync cell that elides where the policy keeps
the sync is a failure; one that keeps a sync the policy allows is a note. Imports the kit's runner
and metadata result types and impl.table.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from impl.table import format_table
from impl.testing.conformance.metadata import MetaResult
from impl.testing.conformance.runner import OpResult


@dataclass
class Report:
    engine: str
    root: str
    device: str
    ops: list[OpResult]
    metadata: list[MetaResult] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.ops) or any(m.failed for m in self.metadata)

    @property
    def compared(self) -> int:
        """Cases compared with the oracle (ops and metadata values); 0 is never a pass."""
        return sum(r.compared for r in self.ops) + sum(m.compared for m in self.metadata)

    def why_nothing_compared(self) -> str:
        parts = [f"{r.op}: {r.verdict}" for r in self.ops] + [f"{m.name}: {m.verdict}" for m in self.metadata]
        return "; ".join(parts) if parts else "no op or builder selected"


def _counts(result: OpResult) -> str:
    """Agreeing / run cases per kind (not-applicable ones left out), then core and out-of-contract differences."""
    parts = []
    for kind, label in (("sample", "samples"), ("error", "errors"), ("bad-value", "bad values")):
        ran = [c for c in result.cases if c.kind == kind and c.status != "not-applicable"]
        if ran:
            parts.append(f"{label} {sum(c.status == 'agree' for c in ran)}/{len(ran)}")
    return ", ".join(parts) + f"; core {len(result.core_failures)}, apart {len(result.out_of_contract)}"


def _metadata_text(metadata: list[MetaResult]) -> list[str]:
    lines = []
    rows = [(m.name, m.verdict, f"values {m.values_agree}/{m.compared}; cells "
             f"{sum(c.verdict == 'agree' for c in m.cells)} agree, {sum(c.failed for c in m.cells)} FAIL, "
             f"{sum(c.verdict == 'note' for c in m.cells)} note" if m.cells or m.compared else m.detail, m.where)
            for m in metadata]
    lines.append("\nmetadata builders:")
    lines.append(format_table(("builder", "verdict", "values agree/run; sync cells", "engine function"), rows))
    for m in metadata:
        if not m.cells:
            continue
        lines.append(f"\nsync contract per policy cell ({m.name}; expansion = repeat_interleave):")
        lines.append(format_table(("engine path", "platform", "algorithm", "policy path", "engine", "policy",
                                   "verdict"),
                                  [(c.path, c.platform, c.algorithm, c.layout, c.engine, c.policy, c.verdict)
                                   for c in m.cells]))
        for c in m.cells:
            if c.verdict in ("FAIL", "note"):
                lines.append(f"  {c.verdict} {c.platform}/{c.algorithm} {c.path}: {c.detail}")
        for case in m.smallest_failures:
            lines.append(f"  value difference, {case.path} ({case.platform}/{case.algorithm}), smallest sample "
                         f"{case.sample} [{case.call}]: {'; '.join(case.problems)}")
    return lines


def format_text(report: Report) -> str:
    results = report.ops
    lines = [f"conformance: engine {report.engine}, root {report.root}, device {report.device}"]
    if results:
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
    if report.metadata:
        lines += _metadata_text(report.metadata)
    failed = [r.op for r in results if r.failed] + [m.name for m in report.metadata if m.failed]
    verdict = "FAIL (" + ", ".join(failed) + ")" if failed else "pass" if report.compared else "NOTHING COMPARED"
    every = [r.verdict for r in results] + [m.verdict for m in report.metadata]
    lines.append(f"\nresult: {verdict}: {sum(v == 'agree' for v in every)} agree, "
                 f"{sum(v == 'not provided' for v in every)} not provided, {len(failed)} failing")
    return "\n".join(lines)


def as_json(report: Report) -> str:
    return json.dumps({
        "engine": report.engine, "root": report.root, "device": report.device,
        "failed": report.failed, "compared": report.compared,
        "ops": [{"op": r.op, "where": r.where, "verdict": r.verdict, "detail": r.detail, "stubs": r.stubs,
                 "files": r.files,
                 "cases": [{"kind": c.kind, "name": c.name, "status": c.status, "in_contract": c.in_contract,
                            "detail": c.detail, "shrunk": c.shrunk} for c in r.cases]} for r in report.ops],
        "metadata": [{"builder": m.name, "where": m.where, "verdict": m.verdict, "detail": m.detail,
                      "stubs": m.stubs, "values_agree": m.values_agree,
                      "value_failures": [asdict(v) for v in m.value_failures],
                      "sync_cells": [asdict(c) for c in m.cells]} for m in report.metadata],
    }, indent=2)
