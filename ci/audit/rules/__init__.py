"""The audit's rules, one module each, and the one list that registers them.

    python -m ci.audit.rules                # each rule's id, default severity and title
    python -m ci.audit.rules --markdown     # the rule table docs/rules.md carries (--write rewrites it)

A rule module (``dormant_suite.py`` for ``dormant-suite``) holds ``RULE`` (id, title, what it prevents,
an example and its output, the default severity) and the functions that report its findings:

- ``own(report)``: a check of this project's audit (``ci.audit.own``; ``report`` an ``AuditReport``);
- ``foreign(report)``: a check of another repository's audit (``ci.audit.foreign``; a ``ForeignReport``);
- where one shared pass reads the input for several rules, the function that turns the pass's result
  into this rule's findings, called by that pass: ``from_scan`` (the workflow scan's input findings,
  both audits, through :func:`add_scan_findings`), ``foreign_job`` / ``foreign_registrations`` (the
  foreign audit's per-suite pass). Each module's docstring says which.

``OWN_RULES`` and ``FOREIGN_RULES`` (the rules each audit checks and prints, in this list's order) are
derived from which of these functions a module defines. The same idea has the same id in both audits.
To add a rule: add one module here and its entry in ``RULES``; ``python -m ci.audit.rules --write``
regenerates docs/rules.md (a per-commit test fails on drift).

Rule modules may import ``ci.audit.findings``, ``ci.audit.keys``, the audit's readers (``ops``,
``skips``, ``parity``, ``nox_session``), ``ci.github``, ``ci.adapters``, ``ci.registry``, the shared
modules and ``impl.gates``; never ``ci.audit.own``, ``ci.audit.foreign``, ``ci.audit.report`` or the
command line (they import this package), torch or test code.
"""
from __future__ import annotations

import argparse
from types import ModuleType
from typing import Callable, Iterable

from ci.audit.findings import RuleRegistry
from ci.audit.rules import (collection_parity, disabled_without_reason, dormant_suite, empty_suite,
                            fork_on_self_hosted, impossible_test, masked_step, non_native_gpu_backend,
                            op_without_reference, oversize_matrix, runner_mismatch, skip_debt, suite_name_typo,
                            ungated_value, unknown_suite, unreadable_input, unreadable_registration,
                            unregistered_test, unresolved_step)

MODULES: tuple[ModuleType, ...] = (
    dormant_suite, unknown_suite, unresolved_step, runner_mismatch, masked_step, disabled_without_reason,
    empty_suite, unreadable_registration, suite_name_typo, ungated_value, non_native_gpu_backend,
    unregistered_test, op_without_reference, skip_debt, impossible_test, collection_parity,
    unreadable_input, oversize_matrix, fork_on_self_hosted,
)
RULES = [module.RULE for module in MODULES]     # the docs' order
REGISTRY = RuleRegistry.of(RULES)               # by id; refuses a duplicate id

# the functions a module defines for each audit (own/foreign: checks the audit runs in this order; the
# rest: called by a shared pass)
_OWN_PASSES, _FOREIGN_PASSES = ("from_scan",), ("from_scan", "foreign_job", "foreign_registrations")


def _defines(module: ModuleType, name: str) -> bool:
    return callable(getattr(module, name, None))


OWN_RULES = tuple(m.RULE.id for m in MODULES if any(_defines(m, n) for n in ("own", *_OWN_PASSES)))
FOREIGN_RULES = tuple(m.RULE.id for m in MODULES if any(_defines(m, n) for n in ("foreign", *_FOREIGN_PASSES)))
OWN_CHECKS: tuple[Callable, ...] = tuple(m.own for m in MODULES if _defines(m, "own"))
FOREIGN_CHECKS: tuple[Callable, ...] = tuple(m.foreign for m in MODULES if _defines(m, "foreign"))
SCAN_RULES: dict[str, Callable] = {m.RULE.id: m.from_scan for m in MODULES if _defines(m, "from_scan")}


def add_scan_findings(report, items: Iterable[tuple[str, str, str, int]], audit: str) -> None:
    """The workflow scan's findings about its input, ``(rule id, message, path, line)`` in the scan's order,
    each handed to its rule module's ``from_scan`` (``audit``: "own" or "foreign"). An id no module takes
    is a KeyError naming the known ones."""
    for rule, message, path, line in items:
        if rule not in SCAN_RULES:
            raise KeyError(f"the workflow scan reported rule {rule!r}, which no rule module takes; known: "
                           f"{sorted(SCAN_RULES)}")
        SCAN_RULES[rule](report, message, path, line, audit)


def markdown_table() -> str:
    """The rule table docs/rules.md carries (between the ``audit-rules`` markers)."""
    lines = ["| rule | what must hold | prevents | default | own audit | adapters |",
             "|---|---|---|---|---|---|"]
    for rule in RULES:
        own = "yes" if rule.id in OWN_RULES else "-"
        foreign = "yes" if rule.id in FOREIGN_RULES else "-"
        lines.append(f"| `{rule.id}` | {rule.title} | {rule.prevents} | {rule.default_severity} | {own} | {foreign} |")
    for rule in RULES:   # one section a rule: what it checks, why, an input that trips it and the output
        lines += ["", f"### `{rule.id}`", "",
                  f"**Must hold:** {rule.title}. **Prevents:** {rule.prevents}. "
                  f"**Default severity:** {rule.default_severity}.", "",
                  "Example:", "", "```text", rule.example, "```", "", "Output:", "", "```text", rule.output, "```"]
    return "\n".join(lines)


BEGIN, END = "<!-- audit-rules:begin (python -m ci.audit.rules --markdown) -->", "<!-- audit-rules:end -->"


def splice(text: str) -> str:
    """``text`` with the block between the markers replaced by the current table (unchanged if no markers)."""
    if BEGIN not in text or END not in text:
        return text
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{markdown_table()}\n{END}{tail}"


DOCS = ("docs/rules.md",)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ci.audit.rules", description="The audit's rule registry.")
    parser.add_argument("--markdown", action="store_true", help="print the rule table (markdown)")
    parser.add_argument("--write", action="store_true", help=f"rewrite the table in {' and '.join(DOCS)}")
    args = parser.parse_args(argv)
    if args.write:
        from pathlib import Path

        for rel in DOCS:
            path = Path(rel)
            path.write_text(splice(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if args.markdown:
        print(markdown_table())
        return 0
    for rule in RULES:
        print(f"{rule.id:26} {rule.default_severity:8} {rule.title}")
    return 0

