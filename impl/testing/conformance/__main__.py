"""``python -m impl.testing.conformance --engine sglang --root PATH [--ops a,b] [--format text|json]``.

Runs the op table (samples, error inputs, bad-value inputs) against an engine's own functions,
through the engine's adapter (``impl/testing/conformance/engines/``). On CPU the engine's Triton
kernels run in Triton's interpreter; on a GPU they are compiled. Exit 0: every in-contract case
agrees (ops not found at this commit are reported, not failed); 1: a core difference; 2: a bad
argument (one line on stderr).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m impl.testing.conformance", description=__doc__.split("\n\n")[1])
    parser.add_argument("--engine", required=True, help="adapter name (sglang, fixture, fixture-buggy)")
    parser.add_argument("--root", required=True, help="the engine's source root (sglang: its python/ directory)")
    parser.add_argument("--ops", default="", help="comma-separated op names (default: every op the adapter maps)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the JSON report to PATH")
    parser.add_argument("--large", action="store_true", help="GPU-sized samples")
    parser.add_argument("--no-isolate", action="store_true",
                        help="run every case in this process (faster; a kernel that segfaults or faults the GPU "
                             "then ends the run)")
    parser.add_argument("--kinds", default="sample,error,bad-value", help="case kinds to run")
    return parser.parse_args(argv)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from impl.testing.conformance.engines import get_engine
    try:
        engine = get_engine(args.engine)
    except ValueError as exc:
        return _fail(str(exc))
    root = Path(args.root)
    if not (root / engine.package).is_dir():
        return _fail(f"--root must hold the {engine.package} package ({engine.root_hint}); {root} does not")
    ops = [o for o in args.ops.split(",") if o]
    unknown = [o for o in ops if engine.op(o) is None]
    if unknown:
        return _fail(f"--ops: {', '.join(unknown)} not mapped by the {engine.name} adapter "
                     f"(mapped: {', '.join(a.op for a in engine.ops)})")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    bad_kinds = [k for k in kinds if k not in ("sample", "error", "bad-value")]
    if bad_kinds:
        return _fail(f"--kinds must be from sample,error,bad-value, got {','.join(bad_kinds)}")

    from impl.platform import default_device
    from impl.testing.conformance.report import as_json, format_text
    from impl.testing.conformance.runner import run_engine
    device = default_device()
    results = run_engine(engine, str(root), device, ops or None, kinds=kinds, large=args.large,
                         isolate=not args.no_isolate)
    render = as_json if args.format == "json" else format_text
    print(render(engine.name, str(root), str(device), results))
    if args.json:
        Path(args.json).write_text(as_json(engine.name, str(root), str(device), results) + "\n")
    return 1 if any(r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
