"""Time registry collection and the full audit (target: well under 2 s).

    python -m ci.tools.bench_registry [--root DIR] [--repeat N]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time

from ci.audit.own import format_report, registry_summary, run_audit
from ci.registry.jobs import load_registry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.tools.bench_registry")
    parser.add_argument("--root", default=".")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    registry = load_registry(args.root)
    first_collect = time.perf_counter() - start
    collect_times, audit_times = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        load_registry(args.root)
        collect_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            print(format_report(run_audit(args.root)))
        audit_times.append(time.perf_counter() - t0)
    print(f"registry: {registry_summary(registry)}")   # the audit's first line, same words
    print(f"first collection (cold imports): {first_collect * 1000:.0f} ms")
    print(f"collection: median {statistics.median(collect_times) * 1000:.0f} ms over {args.repeat}")
    print(f"collection + audit (incl. workflow scan): median {statistics.median(audit_times) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
