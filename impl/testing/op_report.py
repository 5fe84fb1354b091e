"""``python -m impl.testing.op_report [--large] [--backend torch]``: every op on every sample.

Runs impl against the oracle for each sample of :data:`impl.testing.op_table.OPS`
(on CPU through the Triton interpreter, on a GPU compiled), counts host syncs,
and prints: op, cases, max abs error, syncs (seen/expected), verdict. Exits 1
on any mismatch or unexpected sync count. Imports impl and impl.testing only.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from impl.gates import GateError, gates_in_effect, resolve_gates
from impl.platform import default_device, kernel_backend
from impl.sync_detector import count_syncs
from impl.table import format_table
from impl.testing.op_table import OPS, clone_kwargs, expected_syncs, max_abs_error, mismatch, run_op, run_reference
from impl.validation import check_mode


def report(large: bool = False) -> tuple[list[tuple[str, ...]], list[str]]:
    device = default_device()
    rows, failures = [], []
    for op in OPS:
        worst, syncs_seen, syncs_want, bad = 0.0, set(), set(), 0
        samples = op.samples(large)
        for sample in samples:
            kwargs = sample.make(device)
            want = run_reference(op, kwargs)
            with check_mode(False), count_syncs() as log:
                got = run_op(op, op.impl, clone_kwargs(kwargs))
            syncs_seen.add(log.count)
            syncs_want.add(expected_syncs(op, sample))
            problems = [m for g, w in zip(got, want) if (m := mismatch(op.compare, g, w))]
            if len(got) != len(want):
                problems.append(f"{len(got)} outputs, oracle has {len(want)}")
            if log.count != expected_syncs(op, sample):
                problems.append(f"{log.count} syncs {log.kinds()}, expected {expected_syncs(op, sample)}")
            for g, w in zip(got, want):
                if g.shape == w.shape:
                    worst = max(worst, max_abs_error(g.cpu(), w))
            if problems:
                bad += 1
                failures.append(f"{op.name}[{sample.name}]: " + "; ".join(problems))
        fmt = lambda s: "/".join(str(x) for x in sorted(s))  # noqa: E731
        rows.append((op.name, str(len(samples)), f"{worst:.3g}", f"{fmt(syncs_seen)} (want {fmt(syncs_want)})",
                     "ok" if bad == 0 else f"FAIL ({bad})"))
    return rows, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="GPU-sized samples")
    parser.add_argument("--backend", choices=["triton", "triton-interpret", "torch"], help="kernel_backend gate")
    args = parser.parse_args(argv)
    try:  # the environment's gates, read once; --backend over its kernel_backend
        gates = resolve_gates(os.environ)
    except GateError as err:
        parser.error(str(err))
    if args.backend:
        gates = dataclasses.replace(gates, kernel_backend=args.backend)
    start = time.perf_counter()
    with gates_in_effect(gates):
        rows, failures = report(args.large)
        print(f"kernel backend: {kernel_backend()}, device: {default_device()}")
    print(format_table(("op", "cases", "max abs err", "syncs", "verdict"), rows))
    for f in failures:
        print("MISMATCH", f)
    print(f"{sum(int(r[1]) for r in rows)} cases in {time.perf_counter() - start:.1f}s: "
          f"{'all ok' if not failures else f'{len(failures)} failing'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
