"""``dspark-audit``: the audit as a command for any repository (console script, pre-commit, Action).

    dspark-audit [--root DIR] [--adapter auto|dspark|sglang] [--repo OWNER/NAME] [--today YYYY-MM-DD]
                 [--format text|json|sarif] [--output FILE] [--pytest-collection]
                 [--baseline FILE [--strict-baseline] [--show-baselined] | --write-baseline FILE]
                 [--fail-on error|warning|note]

The one command line of the audit: ``python -m ci.audit`` and ``nox -s audit`` run this ``main``
(same flags, same JSON, SARIF from all; nox only passes its arguments). With a baseline, the
findings it suppresses are counted per rule (``baselined (N)``) and ``--show-baselined`` lists them.

Exit status (docs/audit-exit-codes.md): 0 clean; 1 when a finding at or above --fail-on (default
error) is not in the baseline, is worse than its entry, or is about a suite the baseline records
as run (a regression: docs/audit-baseline.md), when a baseline entry about a suite's run state
matches nothing because the suite runs now (rewrite the baseline: left in, the entry would hide the
suite's next regression), or, with --strict-baseline, when a baseline entry matches nothing any
more; 2 on a usage error or input that cannot be read (one line on stderr); 3 on an internal error
(one line; the traceback only with --debug). --write-baseline records every
current finding and exits 0. --output writes the --format output to FILE (atomically, never
through a symlink or a linked folder) and the text report to stdout (the Action's log), where no
line can start a workflow command (ci/log_escape.py; JSON and SARIF printed to stdout too). Needs
pyyaml only: no torch, nothing of the tests.
"""
from __future__ import annotations

from ci.input_errors import InputError

import argparse
import datetime as dt
import json
import re
import sys
import traceback
import warnings
from pathlib import Path
from typing import Callable, NoReturn

from ci.adapters import ADAPTER_NAMES
from ci.audit.json_report import findings_document
from ci.audit.sarif import sarif_log
from ci.audit.baseline import BaselineComparison, BaselineError, compare, load_baseline, write_baseline
from ci.audit.findings import SEVERITIES, Finding, Location
from ci.audit.rules import REGISTRY as RULES
from ci.log_escape import json_log_safe, json_printable, log_safe, printable
from ci.safe_files import UnreadableFile, UnsafeOutput, linked_folder, write_atomic
from ci.github.scan import workflow_files

PROG = "dspark-audit"
REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
SEVERITY_RANK = {s: len(SEVERITIES) - i for i, s in enumerate(SEVERITIES)}   # error 3, warning 2, note 1
EXIT_CODES = """exit status:
  0  clean: no finding at or above --fail-on outside the baseline
  1  findings at or above --fail-on, baseline entries for suites that run now (rewrite the
     baseline), or stale entries with --strict-baseline
  2  usage error, or input that cannot be read (one line on stderr)
  3  internal error (one line on stderr; --debug prints the traceback)"""


class UsageError(Exception):
    """A mistake in the command line or its files: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a YYYY-MM-DD date, got {text!r}") from None


def _repo(text: str) -> str:
    if not REPO_NAME.match(text):
        raise argparse.ArgumentTypeError(f"expected OWNER/NAME, got {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=EXIT_CODES,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=".", help="the repository to audit (default: .)")
    parser.add_argument("--adapter", default="auto", choices=("auto", *ADAPTER_NAMES),
                        help="how the repository registers tests (default auto: sglang when the root has "
                             "test/registered/ and no registered/, else dspark)")
    parser.add_argument("--repo", "--repository", dest="repository", type=_repo, default=None,
                        help="OWNER/NAME the workflows run in, for `github.repository` in if: (adapter default)")
    parser.add_argument("--today", type=_date, default=None, help="the date for expiry checks (default: today)")
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    parser.add_argument("--output", default=None, help="write the --format output here; the text report to stdout")
    parser.add_argument("--baseline", default=None, help="known findings (from --write-baseline): only new ones fail")
    parser.add_argument("--write-baseline", default=None, metavar="FILE",
                        help="record every current finding as the baseline and exit 0")
    parser.add_argument("--strict-baseline", action="store_true",
                        help="also fail when a baseline entry matches no finding any more")
    parser.add_argument("--show-baselined", action="store_true",
                        help="list the findings the baseline suppresses (default: a count per rule); SARIF: "
                             "add them as suppressed, unchanged results")
    parser.add_argument("--fail-on", choices=SEVERITIES, default="error",
                        help="the lowest severity that fails the run (default: error)")
    parser.add_argument("--pytest-collection", action="store_true",
                        help="also run pytest --collect-only on registered/ and compare (--adapter dspark only; "
                             "imports the tests)")
    parser.add_argument("--debug", action="store_true", help="on an internal error (exit 3), print the traceback")
    return parser


def detect_adapter(root: Path) -> str:
    """``--adapter auto``: sglang for a tree with test/registered/ and no registered/, else dspark."""
    if (root / "test" / "registered").is_dir() and not (root / "registered").is_dir():
        return "sglang"
    return "dspark"


def tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dspark-suite")
    except PackageNotFoundError:
        return "0+source"


def collect_findings(args: argparse.Namespace) -> tuple[object, list[Finding], Callable]:
    """(report, findings, format_text) from the adapter's audit; a tree it cannot audit is a usage error."""
    from ci.audit.foreign import check_target

    problem = check_target(args.root, args.adapter)
    if problem:
        raise UsageError(problem)
    if args.pytest_collection and args.adapter != "dspark":
        raise UsageError("--pytest-collection: only for this project's own registry (--adapter dspark)")
    if args.adapter == "dspark":
        from ci.audit.own import format_text, run_audit

        collected = None
        if args.pytest_collection:
            from ci.audit.parity import ParityError, pytest_collected

            try:
                collected = pytest_collected(args.root)
            except ParityError as exc:
                raise UsageError(f"--pytest-collection: {exc}") from None
        report = run_audit(args.root, today=args.today, collected=collected)
    else:
        from ci.audit.foreign import format_text, run_foreign_audit

        report = run_foreign_audit(args.root, args.adapter, repository=args.repository)
    return report, list(report.findings), format_text


def report_tables(report) -> dict:
    """The text report's tables (jobs, ...) for ``--format json``."""
    from ci.audit.own import AuditReport, report_tables as own_tables
    from ci.audit.foreign import foreign_tables

    return own_tables(report) if isinstance(report, AuditReport) else foreign_tables(report)


def rule_ids(adapter: str) -> tuple[str, ...]:
    from ci.audit.rules import FOREIGN_RULES, OWN_RULES

    return OWN_RULES if adapter == "dspark" else FOREIGN_RULES


def fallback_location(root: Path) -> Location:
    """Where SARIF points a finding that has no location: the first workflow file, line 1."""
    workflows = [p for p in workflow_files(root) if p.is_file()]   # never a folder linked out of the tree
    for candidate in [*workflows, root / "pyproject.toml", root / "README.md"]:
        if candidate.is_file():
            return Location(candidate.relative_to(root).as_posix(), 1)
    return Location(".", 1)


def repo_prefix(root: Path) -> str:
    """The audited root's path inside the git repository that holds it ("" at its top or outside git)."""
    root = root.resolve()
    for top in (root, *root.parents):
        if (top / ".git").exists():
            return root.relative_to(top).as_posix().removeprefix(".")
    return ""


def failing(comparison: BaselineComparison, fail_on: str, strict: bool) -> list[str]:
    """Why the run fails (empty: it passes)."""
    level = SEVERITY_RANK[fail_on]
    blocking = [f for f in comparison.new if SEVERITY_RANK[f.severity] >= level]
    why = []
    if blocking:
        worse = sum(1 for f, _was in comparison.worse if SEVERITY_RANK[f.severity] >= level)
        why.append(f"{len(blocking)} new finding(s) at or above {fail_on}"
                   + (f" ({worse} worse than the baseline)" if worse else ""))
    if comparison.outdated:   # whatever --fail-on: left in, the entry would hide the suite's next regression
        why.append(f"{len(comparison.outdated)} baseline entr(ies) for suite(s) that run now "
                   "(rewrite the baseline: --write-baseline FILE)")
    if strict and comparison.stale:
        why.append(f"{len(comparison.stale)} stale baseline entr(ies) (--strict-baseline)")
    return why


def _counts(findings) -> str:
    return ", ".join(f"{sum(1 for f in findings if f.severity == s)} {s}" for s in SEVERITIES)


def key_text(key: tuple[str, str, str, str]) -> str:
    rule, hardware, suite, schedule = key
    return f"[{rule}] " + "/".join(part for part in (schedule, hardware, suite) if part)


def text_report(report, comparison: BaselineComparison, format_text, args: argparse.Namespace,
                why: list[str], written: int | None) -> str:
    every = [*comparison.new, *comparison.suppressed]
    head = f"{PROG}: {args.adapter} adapter, {args.root}: {len(every)} finding(s) ({_counts(every)})"
    if args.baseline:
        head += f"; {len(comparison.new)} not in the baseline ({_counts(comparison.new)})"
    lines = [head]
    baselined = list(comparison.suppressed) if args.baseline else []
    body = format_text(report, list(comparison.new), baselined=baselined, show_baselined=args.show_baselined,
                       fail_on=args.fail_on)
    if body:
        lines.append(body)
    if written is not None:
        lines.append(f"baseline {args.write_baseline}: wrote {written} entr(ies)")
    elif args.baseline:
        lines.append(f"baseline {args.baseline}: {len(comparison.suppressed)} known finding(s) suppressed, "
                     f"{len(comparison.stale)} stale entr(ies)")
        lines += [f"  worse {key_text(f.key)}: the baseline knows it as {was}, now "
                  f"{' '.join(filter(None, (f.severity, f.state)))}" for f, was in comparison.worse]
        lines += [f"  outdated {key_text(key)}: the baseline knows it as {was}, and it runs now: rewrite the "
                  "baseline with --write-baseline FILE, so that it records the suite as run (left in, the entry "
                  "would hide the suite if it stopped running again)" for key, was in comparison.outdated]
        outdated = {key for key, _was in comparison.outdated}
        lines += [f"  stale {key_text(key)} (nothing finds it any more: delete the entry)" for key in comparison.stale
                  if key not in outdated]
        lines += [f"  grown {key_text(key)}: {now} finding(s), the baseline knows {known}; all {now} are shown"
                  for key, known, now in comparison.grown]
    known = f" ({len(baselined)} baselined)" if baselined else ""
    lines.append(f"{PROG}: FAILED: {'; '.join(why)}{known}" if why else f"{PROG}: OK{known}")
    return "\n".join(lines)


def _baseline_name(baseline: str | None, root: Path) -> str:
    """The baseline as a SARIF log names it: its path inside the audited root, else its file name (an
    uploaded log carries no path of the machine that ran the audit)."""
    if not baseline:
        return ""
    path = Path(baseline).resolve()
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.name


def render(fmt: str, report, comparison: BaselineComparison, format_text, args: argparse.Namespace,
           why: list[str], written: int | None) -> str:
    shown = list(comparison.new)
    if fmt == "json":
        doc = findings_document(shown, adapter=args.adapter, tool_version=tool_version(), fail_on=args.fail_on,
                                ok=not why, comparison=comparison, baseline_path=args.baseline,
                                rules=rule_ids(args.adapter), skipped=getattr(report, "skipped_rules", {}),
                                tables=report_tables(report))
        return json.dumps(doc, indent=2, ensure_ascii=False)
    if fmt == "sarif":
        root = Path(args.root)
        log = sarif_log(shown, RULES, tool_version=tool_version(), fallback=fallback_location(root),
                        baseline_state="new" if args.baseline else None, prefix=repo_prefix(root),
                        baselined=comparison.suppressed if args.show_baselined else (),
                        baseline_path=_baseline_name(args.baseline, root))
        return json.dumps(log, indent=2, ensure_ascii=False)
    return text_report(report, comparison, format_text, args, why, written)


def run(args: argparse.Namespace) -> int:
    if args.adapter == "auto":
        args.adapter = detect_adapter(Path(args.root))
    if args.write_baseline and args.baseline:
        raise UsageError("--write-baseline: cannot be combined with --baseline (it records every current finding)")
    if args.strict_baseline and not args.baseline:
        raise UsageError("--strict-baseline: needs --baseline FILE")
    baseline = None
    if args.baseline:
        try:
            baseline = load_baseline(args.baseline)
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
        if baseline.adapter != args.adapter:
            raise UsageError(f"--baseline {args.baseline}: written for --adapter {baseline.adapter}, "
                             f"not {args.adapter}")
    if args.show_baselined and not args.baseline:
        raise UsageError("--show-baselined: needs --baseline FILE")
    for flag, target in (("--output", args.output), ("--write-baseline", args.write_baseline)):
        linked = linked_folder(Path(target).parent) if target and Path(target).parent.is_dir() else None
        if linked:   # a folder link committed in the audited tree must not redirect the write
            raise UsageError(f"{flag} {target}: {linked}; refusing to write through it "
                             "(choose a path without linked folders)")
    report, findings, format_text = collect_findings(args)
    written = None
    if args.write_baseline:
        try:
            written = write_baseline(args.write_baseline, findings, args.adapter, getattr(report, "run_suites", ()))
        except BaselineError as exc:
            raise UsageError(str(exc)) from None
        comparison = BaselineComparison((), tuple(findings), ())
    else:
        comparison = compare(findings, baseline, getattr(report, "run_suites", ()))
    why = failing(comparison, args.fail_on, args.strict_baseline)
    out = render(args.format, report, comparison, format_text, args, why, written)
    if args.output:
        try:   # a lone surrogate (a file name that is not UTF-8) is written as its \xNN text: valid UTF-8
            write_atomic(args.output, (printable(out) if args.format == "text" else json_printable(out)) + "\n",
                         refuse_linked_folders=True)
        except UnsafeOutput as exc:
            raise UsageError(f"--output {exc}") from None
        except OSError as exc:
            raise UsageError(f"--output {args.output}: cannot write: {exc.strerror or exc}") from None
        if args.format != "text":
            out = render("text", report, comparison, format_text, args, why, written)
    print(log_safe(out) if args.format == "text" or args.output else json_log_safe(out))
    return 1 if why else 0


def _one_line(exc: BaseException) -> str:
    return log_safe(" ".join(str(exc).split()))[:500]


def _quietly(argv: list[str]) -> int:
    """``_main`` with every Python warning silenced: a warning's default print quotes a source line
    read from disk (a SyntaxWarning about the audited tree's code on 3.12+), text no log_safe saw."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _main(argv)


def main(argv: list[str] | None = None) -> int:
    """The exit codes of EXIT_CODES, whatever happens: an exception no handler expects is 3, never 1."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _quietly(argv)
    except Exception as exc:   # noqa: BLE001 - the one place an unexpected error becomes exit 3
        if "--debug" in argv:
            traceback.print_exc()
        print(f"{PROG}: internal error: {type(exc).__name__}: {_one_line(exc)} "
              "(exit 3; --debug prints the traceback)", file=sys.stderr)
        return 3


def _main(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
        return run(args)
    except UsageError as exc:
        print(f"{PROG}: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (InputError, UnreadableFile) as exc:   # the audits' own refusals (bad root, unreadable registry)
        print(f"{PROG}: {_one_line(exc)}", file=sys.stderr)
        return 2
    # any other ValueError is a defect of the audit, not the input: main() reports it as exit 3


if __name__ == "__main__":
    sys.exit(main())
