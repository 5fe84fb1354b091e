"""The one place each audit rule is declared: id, title, what it prevents, an example and its output.

    python -m ci.audit.rules --markdown     # the rule table docs/rules.md carries (--write rewrites it)

The project's own audit (ci/audit/own.py) and the adapter audit (ci/audit/foreign.py) report findings
under these ids; the same idea has the same id in both. A test fails when the docs drift.
Imports nothing from ``impl/``, torch or test code.
"""
from __future__ import annotations

import argparse
import sys

from ci.audit.findings import RULES, Rule

R = RULES.register
R(Rule("dormant-suite", "every registered suite (job) is run, unmasked, by a triggered workflow step, every partition",
       "a suite registered with no job: its tests never run and nothing turns red (sglang #30964, the DSpark suite)",
       'register_amd_ci(est_time=60, suite="nightly-x", nightly=True) and no workflow step runs --suite nightly-x',
       "error   [dormant-suite] DORMANT nightly/amd/nightly-x: ... no workflow step runs it"))
R(Rule("unknown-suite", "every suite, job, group or shard a workflow step names is registered and planned",
       "a workflow that runs a renamed suite: the runner finds nothing and the step passes",
       "run_suite.py --hw cuda --suite nightly-8-gpu-h20 --nightly where nothing registers it",
       "error   [unknown-suite] UNKNOWN ...: runs --hw cuda --suite nightly-8-gpu-h20 --nightly, "
       "which nothing registers"))
R(Rule("unresolved-step", "every runner call's target can be read from the workflow",
       "a step the audit cannot read hides whether a suite runs",
       "python3 run_suite.py --hw npu --suite ${{ needs.plan.outputs.suite }}",
       "warning [unresolved-step] ...: run_suite.py --suite known only at run time", "warning"))
R(Rule("runner-mismatch", "every suite runs on the runner its name / catalog entry asks for",
       "an 8-GPU suite sent to a 1-GPU runner fails or skips on every run",
       "runs-on: ${{ inputs.runner }} with runner: linux-mi325-gpu-1 for suite stage-c-test-8-gpu-amd",
       "error   [runner-mismatch] HARDWARE ...: the suite needs 8 GPU(s), runner linux-mi325-gpu-1 has 1"))
R(Rule("masked-step", "nothing between a workflow step and the runner can turn a failure green",
       "continue-on-error, `|| true`, a pipe without pipefail: a red suite reported green",
       "continue-on-error: true on the step that runs the suite",
       "error   [masked-step] MASKED ...: step continue-on-error: True: a failure is reported as success"))
R(Rule("disabled-without-reason", "every disabled registration says why (and, here, until when)",
       "a test switched off and forgotten",
       'register_cuda_ci(est_time=60, suite="s", disabled=True)',
       "error   [disabled-without-reason] test/registered/x.py:3: disabled=True in suite s: "
       "give the reason as a string"))
R(Rule("empty-suite", "no workflow runs a suite whose registrations are all disabled",
       "a step that runs nothing and passes",
       "every file of suite s carries disabled='flaky' and a workflow runs --suite s",
       "error   [empty-suite] EMPTY per-commit/cuda/s: ... runs it, but all 2 registration(s) are disabled"))
R(Rule("unreadable-registration", "every registration is readable by the repository's own runner",
       "a registration call inside a function or with a computed argument: the runner never sees it",
       "if FAST: register_cuda_ci(est_time=60, suite='s')",
       "error   [unreadable-registration] test/registered/x.py:4: register_cuda_ci(...) "
       "is not a module-level statement"))
R(Rule("suite-name-typo", "a new suite name is not within edit distance 2 of an existing one unless declared",
       "suite='kernles' silently creates a new one-test job instead of joining 'kernels'",
       '@register(suite="kernles", ...) next to suite "kernels"',
       "warning [suite-name-typo] registered/test_x.py:9: suite 'kernles' is 2 edit(s) from 'kernels' ...",
       "warning"))
R(Rule("ungated-value", "every gate value is exercised by a per-commit job",
       "a code path (a backend, a platform) only nightly or never tested",
       "no per-commit job runs with DSPARK_KERNEL_BACKEND=torch",
       "error   [ungated-value] gate kernel_backend=torch is exercised by no job"))
R(Rule("non-native-gpu-backend", "a GPU label's jobs run the native compiled backend unless a variant says otherwise",
       "a GPU runner testing the torch fallback (or the interpreter) while attestation says OK",
       "ci/hardware.yaml: h200: env: {DSPARK_KERNEL_BACKEND: torch}",
       "error   [non-native-gpu-backend] ci/hardware.yaml: h200 (a GPU label) sets DSPARK_KERNEL_BACKEND=torch ..."))
R(Rule("unregistered-test", "every test in registered/ belongs to a suite",
       "a test no job runs",
       "def test_x(): ... without @register(...)",
       "error   [unregistered-test] registered/test_x.py:3: ...::test_x belongs to no suite"))
R(Rule("op-without-reference", "every impl op has a pure-torch reference and a per-commit test",
       "a kernel with no oracle, or tested only nightly",
       "impl exports foo, reference/ does not",
       "error   [op-without-reference] op foo: reference/__init__.py exports no 'foo'"))
R(Rule("skip-debt", "every skip reason that can skip unconditionally has an owner and an unexpired `until`",
       "a skip that outlives its reason",
       "SkipReason('x', skips_when='always') with no owner",
       "error   [skip-debt] registered/skips.py:12: skip reason 'x' can skip on any machine: no `owner`"))
R(Rule("impossible-test", "every registered test can run on some hardware it is registered for, "
       "and skips only for registered reasons",
       "a test registered for cpu that skips below 2 GPUs: green forever, never run",
       "@register(hardware='cpu') with registered_skip('needs_2_gpus')",
       "error   [impossible-test] ...: is registered only for ['cpu'], where ... always skips it"))
R(Rule("collection-parity", "pytest collects exactly the tests the registry knows (both directions)",
       "a test the registry counts that pytest never collects, or the reverse",
       "a test module that fails to import under pytest",
       "error   [collection-parity] ...: registered but not collected by pytest"))

R(Rule("unreadable-input", "every workflow the audit must read is a regular UTF-8 file inside the tree, "
       "under the size cap, with aliases and nesting within bounds",
       "a workflow that is a link to another file, a device or an alias bomb: read, it leaks or hangs the audit; "
       "skipped silently, it hides a run",
       ".github/workflows/ci.yml -> /etc/hostname",
       "error   [unreadable-input] .github/workflows/ci.yml: a symlink that resolves outside the audited tree "
       "(not read): a workflow the audit cannot read may hide a run"))
R(Rule("oversize-matrix", "no job's matrix makes more than GitHub's 256 jobs",
       "GitHub refuses the whole workflow: none of its suites run, and no check turns red",
       "strategy: {matrix: {a: [1..9], b: [1..9], c: [1..9]}}  (729 jobs)",
       "error   [oversize-matrix] .github/workflows/w.yml:j: strategy.matrix of 729 combinations before exclude: "
       "over GitHub's 256-job cap: ..."))
R(Rule("fork-on-self-hosted", "a job on a self-hosted runner never runs a fork's pull request without a "
       "maintainer's approval of that commit",
       "a fork's code (any later push included) on the project's own GPU machines: their tokens, caches, network",
       "on: pull_request; runs-on: linux-h200-gpu-1; if: contains(github.event.pull_request.labels.*.name, 'gpu')",
       "error   [fork-on-self-hosted] .github/workflows/w.yml:gpu: runs on self-hosted runner(s) "
       "['linux-h200-gpu-1'] under pull_request from a fork, every push included: ..."))

OWN_RULES = ("dormant-suite", "unknown-suite", "runner-mismatch", "ungated-value", "non-native-gpu-backend",
             "unregistered-test", "suite-name-typo", "op-without-reference", "disabled-without-reason",
             "masked-step", "skip-debt", "impossible-test", "collection-parity", "unreadable-input",
             "oversize-matrix", "fork-on-self-hosted")
FOREIGN_RULES = ("dormant-suite", "unknown-suite", "unresolved-step", "disabled-without-reason", "empty-suite",
                 "masked-step", "unreadable-registration", "runner-mismatch", "suite-name-typo",
                 "unreadable-input", "oversize-matrix", "fork-on-self-hosted")


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


if __name__ == "__main__":
    sys.exit(main())
