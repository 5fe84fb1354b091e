"""The audit reads ``run:`` scripts as bash (docs/audit-shell.md): commands built in shell run, runs
that can never happen are dormant, anything known only at run time is a warning that names it.

Trees: registered/fixtures/sglang/shell-*/ (self-written overlays on ``base/``, each adding one
workflow in one shape); the reader itself is checked on small scripts (ci/github/shell_eval.py).
"""
from __future__ import annotations

import pytest

from ci.audit.foreign import run_foreign_audit
from ci.registration import register
from ci.github.shell_eval import ShellEnv, read_runs
from registered.test_ci_audit_sglang import DSPARK, kinds, materialize


def audit(shape: str, tmp_path):
    return run_foreign_audit(materialize(shape, tmp_path / shape))


def dspark_finding(report):
    [found] = [f for f in report.findings if f"{f.schedule}/{f.hardware}/{f.suite}" == DSPARK]
    return found


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("shape", ["shell-array", "shell-variables", "shell-bash-c"])
def test_a_command_built_in_shell_runs_its_suite(tmp_path, shape):
    """cmd=( ... ) + cmd+=(--nightly) under [[ matrix == true ]]; variables and a one-line if; bash -c:
    base's one error (the DSpark nightly suite nothing runs) is gone, and nothing new appears."""
    report = audit(shape, tmp_path)
    assert kinds(report) == []
    row = next(r for r in report.job_rows if r[0] == DSPARK)
    assert (row[4], row[5]) == ("dspark.yml", "schedule")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_exit_0_before_the_run_makes_the_suite_dormant(tmp_path):
    report = audit("shell-exit-before", tmp_path)
    assert kinds(report) == [("dormant-suite", "error", DSPARK)]
    assert dspark_finding(report).message.endswith(
        "only referenced by .github/workflows/dspark.yml:mi35x on ['schedule'] "
        "(never reached: `exit 0` on line 2 ends the script before it)")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_runs_that_can_never_happen_are_dormant_errors(tmp_path):
    """A variable nothing sets, ``false && run``, ``false`` under ``set -e``: each job says why."""
    found = dspark_finding(audit("shell-never-set", tmp_path))
    message = found.message
    assert found.severity == "error"
    assert "unset-variable on ['schedule'] (never reached: `[ \"$RUN_DSPARK\" = yes ]` on line 1 is false)" in message
    assert "false-and on ['schedule'] (never reached: `&& python3 test/run_suite.py" in message
    assert ("false-under-errexit on ['schedule'] (never reached: a command that always fails on line 2 ends the "
            "script under `set -e`)") in message


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_run_under_a_run_time_condition_is_a_warning_that_names_it(tmp_path):
    """A file test, a variable from env: (a run-time value) and one an earlier step exports via $GITHUB_ENV."""
    report = audit("shell-unknown", tmp_path)
    assert kinds(report) == [("dormant-suite", "warning", DSPARK)]
    why = dspark_finding(report).why_unproven
    assert "`[ -f /data/models/dspark/config.json ]` on line 1 is known only at run time" in why
    assert "`[ \"$RUN_DSPARK\" = yes ]` on line 1 is known only at run time" in why
    assert "`[ \"$RUN_LATE\" = yes ]` on line 1 is known only at run time" in why


RUN = "python3 run_suite.py --hw amd --suite s"
OPEN = ShellEnv(unset_is_empty=False, why_open="an earlier step writes $GITHUB_ENV")


def runner_state(script: str, env: ShellEnv = ShellEnv()) -> tuple[str, str]:
    """The state of every command of ``script`` that starts with ``python3 run_suite.py`` (grouped by words)."""
    reading = read_runs(script, env)
    runs = [r for r in reading.runs if r.words[:2] == ("python3", "run_suite.py")]
    assert runs, script
    return reading.state(runs)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize(("script", "env", "state"), [
    (f"x=1\nif [ \"$x\" != 1 ]; then exit 0; fi\n{RUN}", ShellEnv(), "run"),
    (f"case arm64 in\n  x86*) exit 0 ;;\n  *) {RUN} ;;\nesac", ShellEnv(), "run"),
    (f"for p in a b; do\n  [ \"$p\" = c ] && exit 0\ndone\n{RUN}", ShellEnv(), "run"),
    (f"go() {{\n  {RUN} \"$@\"\n}}\ngo --nightly", ShellEnv(), "run"),
    (f"go() {{\n  return\n  {RUN}\n}}\ngo", ShellEnv(), "never"),
    (f"sh -c '{RUN}'", ShellEnv(), "run"),
    (f"(exit 0)\n{RUN}", ShellEnv(), "run"),                       # a subshell's exit ends only it
    (f"if [ ! -f ready ]; then echo missing; exit 1; fi\n{RUN}", ShellEnv(), "run"),   # fails loudly
    (f"[ -n \"$HF\" ] && export HF_HOME=/x\n{RUN}", OPEN, "run"),   # both outcomes reach the run
    (f"if [ -n \"$SKIP\" ]; then exit 0; fi\n{RUN}", OPEN, "maybe"),
    (f"if [ -n \"$SKIP\" ]; then exit 0; fi\n{RUN}", ShellEnv(), "run"),   # nothing sets SKIP: empty
    (f"if [ -n \"$GITHUB_HEAD_REF\" ]; then exit 0; fi\n{RUN}", ShellEnv(), "maybe"),   # the runner sets it
    (f"if [ \"$(uname -m)\" = x86_64 ]; then {RUN}; fi", ShellEnv(), "maybe"),
    (f"command -v rocm-smi || exit 0\n{RUN}", ShellEnv(), "maybe"),
    (f"true || {RUN}", ShellEnv(), "never"),
    (f"if [ yes = yes ]; then :; else {RUN}; fi", ShellEnv(), "never"),
])
def test_the_reader_decides_what_it_can_and_leaves_the_rest_unknown(script, env, state):
    assert runner_state(script, env)[0] == state


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_words_are_expanded_like_bash():
    script = ("cmd=(\n  python3 run_suite.py  # runner\n  --hw amd\n)\nflag=''\nextra='--a --b'\n"
              "cmd+=(--suite \"s 1\")\n\"${cmd[@]}\" $flag $extra \"$flag\" ${missing:-dflt} \"${{ inputs.x }}\"")
    [run] = read_runs(script).runs
    assert run.words == ("python3", "run_suite.py", "--hw", "amd", "--suite", "s 1", "--a", "--b", "", "dflt",
                         "${{ inputs.x }}")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_many_run_time_branches_stay_bounded_and_unknown():
    """40 independent unknown branches that each set a variable: the paths are capped, the run is a maybe."""
    script = "".join(f"if [ -n \"$V{i}\" ]; then x{i}=1; fi\n" for i in range(40)) + RUN
    state, why = runner_state(script, OPEN)
    assert (state, why) == ("maybe", "more than 32 paths through the script: the reader stops following them")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_nesting_deeper_than_the_stack_is_read_flat_and_every_run_is_a_maybe():
    script = "if [ -n \"$X\" ]; then\n" * 400 + RUN + "\n" + "fi\n" * 400
    assert runner_state(script) == ("maybe", "the script nests deeper than the reader follows")
