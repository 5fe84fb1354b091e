"""``python -m impl.testing.conformance --engine sglang --root PATH [--ops a,b] [--format text|json]``.

Runs the op table (samples, error inputs, bad-value inputs) and the metadata builders (values
against reference/, and the sync contract per cell of the sync policy, docs/design.md §4.3)
against an engine's own functions, through the engine's adapter
(``impl/testing/conformance/engines/``). On CPU the engine's Triton kernels run in Triton's
interpreter; on a GPU they are compiled. docs/conformance.md explains the report.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from impl.testing.conformance.engines import resolve_root

TRUST = ("The kit executes the engine's code (the modules the adapter names and the engine modules they "
         "import): --root must be a tree you trust. By default that code runs only in spawned child "
         "processes, never in the kit's own process (--in-process changes that).")
EXIT_CODES = """exit status:
  0  every compared case agrees and every sync cell keeps what the policy requires
  1  a core difference, a sync-policy failure (a cell elides a sync the policy keeps), a load error,
     or a case that crashed or hung (isolated runs stop a child silent for --case-timeout seconds)
  2  a bad argument (one line on stderr, before anything runs)
  5  nothing was compared (every op and builder not provided, or every case not applicable)"""
NOTHING_COMPARED = 5


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m impl.testing.conformance",
                                     description=__doc__.split("\n\n")[1] + "\n\n" + TRUST,
                                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", required=True, help="adapter name (sglang, fixture, fixture-buggy)")
    parser.add_argument("--root", required=True,
                        help="the engine's source root, trusted (sglang: its repository root or its python/ folder)")
    parser.add_argument("--ops", default="", help="comma-separated op or metadata builder names (default: all mapped)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--json", default=None, metavar="PATH",
                        help="also write the JSON report to PATH (its folder must exist)")
    parser.add_argument("--large", action="store_true", help="GPU-sized samples")
    parser.add_argument("--in-process", "--no-isolate", dest="in_process", action="store_true",
                        help="load and run the engine's code in this process (faster; a kernel that segfaults or "
                             "faults the GPU then ends the run, and the engine's imports stay in this process)")
    parser.add_argument("--kinds", default="sample,error,bad-value", help="case kinds to run")
    parser.add_argument("--case-timeout", type=float, default=600.0, metavar="SECONDS",
                        help="isolated runs: a child that sends nothing for this long (loading the engine's "
                             "module, one case, one metadata builder) is stopped and that case reported as "
                             "hung, a failure (default 600)")
    return parser.parse_args(argv)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.case_timeout > 0:  # NaN too
        return _fail(f"--case-timeout must be a positive number of seconds, got {args.case_timeout}")
    from impl.testing.conformance.engines import get_engine
    try:
        engine = get_engine(args.engine)
    except ValueError as exc:
        return _fail(str(exc))
    root = resolve_root(Path(args.root), engine.package)
    if root is None:
        return _fail(f"--root must hold the {engine.package} package ({engine.root_hint}); {args.root} does not")
    names = [o for o in args.ops.split(",") if o]
    mapped = [a.op for a in engine.ops] + [m.name for m in engine.metadata]
    unknown = [o for o in names if o not in mapped]
    if unknown:
        return _fail(f"--ops: {', '.join(unknown)} not mapped by the {engine.name} adapter "
                     f"(mapped: {', '.join(mapped)})")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    bad_kinds = [k for k in kinds if k not in ("sample", "error", "bad-value")]
    if bad_kinds:
        return _fail(f"--kinds must be from sample,error,bad-value, got {','.join(bad_kinds)}")
    if args.json is not None and not Path(args.json).resolve().parent.is_dir():
        return _fail(f"--json: the folder of {args.json} does not exist (create it first)")

    from impl.platform import default_device
    from impl.testing.conformance.metadata import run_metadata
    from impl.testing.conformance.report import Report, as_json, format_text
    from impl.testing.conformance.runner import run_engine
    device = default_device()
    isolate = not args.in_process
    ops = [o for o in names if engine.op(o) is not None]
    builders = [o for o in names if o not in ops]
    results = run_engine(engine, str(root), device, ops, kinds=kinds, large=args.large, isolate=isolate,
                         case_timeout=args.case_timeout) if ops or not names else []
    metadata = run_metadata(engine, str(root), str(device), builders, isolate=isolate,
                            case_timeout=args.case_timeout) if builders or not names else []
    report = Report(engine.name, str(root), str(device), results, metadata)
    print(as_json(report) if args.format == "json" else format_text(report))
    if args.json:
        Path(args.json).write_text(as_json(report) + "\n")
    if report.failed:
        return 1
    if report.compared == 0:
        print(f"error: nothing was compared ({report.why_nothing_compared()}); a run that compares nothing "
              "is not a pass", file=sys.stderr)
        return NOTHING_COMPARED
    return 0


if __name__ == "__main__":
    sys.exit(main())
