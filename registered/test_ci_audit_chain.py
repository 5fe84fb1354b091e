"""The chain workflow -> step -> nox session -> runner: the scan reads any workflow (generated or
hand-written, old --job shape or the --group shape), evaluates `if:` per event, and flags anything
that can turn the runner's failure green (masked-step); group shards 1/N..N/N must all run (dormant-suite)."""
from __future__ import annotations

import datetime as dt

import pytest

from ci.audit.own import group_plan, run_audit
from ci.github.expressions import truth
from ci.registry.jobs import load_registry
from ci.registration import register
from registered.fixture_repo import FixtureRepo

TODAY = dt.date(2026, 12, 1)
GATE_IF = ("github.event_name != 'pull_request' || contains(github.event.pull_request.labels.*.name, 'run-gpu-ci') "
           "|| (github.event.pull_request.head.repo.full_name == github.repository "
           "&& needs.changes.outputs.kernels == 'true')")
TESTS = """
@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
def test_kernels(): pass

@register(suite="big", hardware="cpu", schedule="per-commit", est_time=500)
def test_big_one(): pass

@register(suite="big", hardware="cpu", schedule="per-commit", est_time=500)
def test_big_two(): pass

@register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900)
class TestE2E:
    def test_gsm8k(self): pass
"""
CPU_STEP = 'python3 -m nox -s suite -- --group per-commit/cpu --shard "$SHARD"'
PER_COMMIT = """
name: per-commit
on:
  pull_request:
    types: [opened, synchronize, reopened, labeled]
  push:
    branches: [main]
jobs:
  changes:
    runs-on: ubuntu-latest
    outputs:
      kernels: ${{{{ steps.filter.outputs.kernels }}}}
    steps:
      - id: filter
        run: echo "kernels=true" >> "$GITHUB_OUTPUT"
  per-commit__cpu:
    runs-on: ubuntu-latest{job_extra}
    strategy:
      fail-fast: false
      matrix:
        shard: [{cpu_shards}]
    steps:
      - uses: actions/checkout@v5
      - name: run group shard{step_extra}
        env:
          SHARD: ${{{{ matrix.shard }}}}
        run: {cpu_run}
  per-commit__h200-1:
    needs: [changes]
    if: {gate_if}
    runs-on: linux-h200-gpu-1
    strategy:
      matrix:
        shard: [1/1]
    env:
      SHARD: ${{{{ matrix.shard }}}}
    steps:
      - uses: actions/checkout@v5
      - name: run group shard
        run: python3 -m nox -s suite -- --group per-commit/h200-1 --shard "${{SHARD}}"
"""
NIGHTLY = """
name: nightly
on:
  schedule:
    - cron: '17 2 * * *'
  workflow_dispatch:
jobs:
  nightly__mi35x-8:
    runs-on: linux-mi35x-gpu-8
    strategy:
      matrix:
        shard: [1/1]
    steps:
      - uses: actions/checkout@v5
      - name: run group shard
        env:
          SHARD: ${{ matrix.shard }}
        run: python3 -m nox -s suite -- --group nightly/mi35x-8 --shard "$SHARD"
"""


def repo_with(tmp_path, *, cpu_run=CPU_STEP, cpu_shards="1/2, 2/2", job_extra="", step_extra="",
              gate_if=GATE_IF) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_base.py", TESTS)
    repo.write(".github/workflows/per-commit.yml", PER_COMMIT.format(
        cpu_run=cpu_run, cpu_shards=cpu_shards, job_extra=job_extra, step_extra=step_extra, gate_if=gate_if))
    repo.write(".github/workflows/nightly.yml", NIGHTLY)
    return repo


def found(report, *codes: str) -> dict[str, list[str]]:
    return {c: report.violations[c] for c in codes if report.violations[c]}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_group_shaped_gated_workflows_count_and_the_gpu_job_through_push(tmp_path):
    repo = repo_with(tmp_path)
    assert {g: n for g, (n, _) in group_plan(load_registry(repo.root)).items()} == {
        "per-commit/cpu": 2, "per-commit/h200-1": 1, "nightly/mi35x-8": 1}
    report = run_audit(repo.root, today=TODAY)
    assert found(report, "dormant-suite", "unknown-suite", "masked-step") == {}
    rows = {r[0]: r for r in report.job_rows}
    assert rows["per-commit/h200-1/kernels"][3:] == (1, "per-commit.yml", "push", "triton")   # gated on PRs
    assert rows["per-commit/cpu/big"][3:] == (2, "per-commit.yml", "pull_request, push", "triton-interpret")
    assert rows["nightly/mi35x-8/dspark-e2e"][5] == "schedule, workflow_dispatch"
    groups = {r[0]: r for r in report.group_rows}
    assert groups["per-commit/cpu"][1:] == (2, "1005", 2, "per-commit.yml", "pull_request, push")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_group_shard_that_never_runs_and_a_shard_count_off_the_plan(tmp_path):
    partial = found(run_audit(repo_with(tmp_path / "p", cpu_shards="1/2").root, today=TODAY),
                    "dormant-suite", "unknown-suite", "masked-step")
    assert partial == {"dormant-suite": [
        "PARTIAL group per-commit/cpu: .github/workflows/per-commit.yml:per-commit__cpu run(s) "
        "shards [1] of 2: shard(s) [2] never run (2 job(s) affected)"]}
    off = found(run_audit(repo_with(tmp_path / "o", cpu_shards="1/3, 2/3, 3/3").root, today=TODAY), "unknown-suite")
    assert off["unknown-suite"][0] == (
        ".github/workflows/per-commit.yml:per-commit__cpu: --group per-commit/cpu --shard 1/3, "
        "but the plan splits per-commit/cpu into 2 shard(s) (regenerate with nox -s workflows)")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_gpu_job_gated_even_on_push_is_dormant(tmp_path):
    gate = "github.event_name == 'pull_request' && contains(github.event.pull_request.labels.*.name, 'run-gpu-ci')"
    report = run_audit(repo_with(tmp_path, gate_if=gate).root, today=TODAY)
    assert found(report, "dormant-suite", "masked-step") == {"dormant-suite": [
        "DORMANT per-commit/h200-1/kernels (1 registration(s), first at registered/test_base.py:4): needs a workflow "
        "triggered by pull_request/push; only referenced by .github/workflows/per-commit.yml:per-commit__h200-1 on "
        "['pull_request', 'push'] (its if: is not definitely true on any of them)"]}


STEP = ".github/workflows/per-commit.yml:per-commit__cpu:run group shard"
MASKS = {
    "or-true": dict(cpu_run=CPU_STEP + " || true"),
    "or-echo": dict(cpu_run=CPU_STEP + ' || echo "tests failed"'),
    "tee": dict(cpu_run=CPU_STEP + " | tee suite.log"),
    "set+e": dict(cpu_run="|\n          set +e\n          " + CPU_STEP + "\n          echo done"),
    "semicolon-true": dict(cpu_run="|\n          set +e\n          " + CPU_STEP + "; true"),
    "exit0": dict(cpu_run="|\n          set +e\n          " + CPU_STEP + "\n          exit 0"),
    "background": dict(cpu_run=CPU_STEP + " &"),
    "if-condition": dict(cpu_run=f"if ! {CPU_STEP}; then echo flaky; fi"),
    "group-or-true": dict(cpu_run="|\n          { " + CPU_STEP + "; } || true"),
    "subshell-lines": dict(cpu_run="|\n          (\n            " + CPU_STEP + "\n          ) || echo failed"),
    "function-or-true": dict(cpu_run="|\n          run_tests() {\n            " + CPU_STEP + "\n          }\n"
                                     "          run_tests || true"),
    "trap-exit": dict(cpu_run="|\n          trap 'echo cleanup; exit' EXIT\n          " + CPU_STEP),
    # bash: `$?` in the handler is echo's status (0), not the runner's
    "trap-exit-status": dict(cpu_run="|\n          trap 'echo bye; exit $?' EXIT\n          " + CPU_STEP),
    "step-continue": dict(step_extra="\n        continue-on-error: true"),
    "job-continue": dict(job_extra="\n    continue-on-error: ${{ github.event_name == 'push' }}"),
    "step-if": dict(step_extra="\n        if: github.event_name == 'push'"),
    "no-errexit-shell": dict(step_extra="\n        shell: bash {0}",
                             cpu_run="|\n          " + CPU_STEP + "\n          echo done"),
    "dry-run": dict(cpu_run=CPU_STEP + " --dry-run"),
    "help": dict(cpu_run=CPU_STEP + " --help"),
    "emulate": dict(cpu_run=CPU_STEP + " --emulate hip"),
    "pytest-k": dict(cpu_run=CPU_STEP + " -- -k 'not slow'"),
    "addopts": dict(job_extra="\n    env:\n      PYTEST_ADDOPTS: --deselect registered/test_base.py::test_big_one"),
}
# a bash script's masks are what the syntax-tree reading finds with the runner failing (ci/github/masking.py)
LEFT_OF_OR = "it is on the left of `||` on line {}, where `set -e` does not apply; the script then ends with status 0"
WORDS = {"or-true": LEFT_OF_OR.format(1), "or-echo": LEFT_OF_OR.format(1), "tee": "piped into `tee suite.log`",
         "set+e": "`set +e` on line 1 turns errexit off", "semicolon-true": "`set +e` on line 1 turns errexit off",
         "exit0": "`exit 0` on line 3 ends the script", "background": "background",
         "if-condition": "`!` on line 1 negates it", "group-or-true": LEFT_OF_OR.format(1),
         "subshell-lines": LEFT_OF_OR.format(1), "function-or-true": LEFT_OF_OR.format(4),
         "trap-exit": "the EXIT trap `echo cleanup; exit` exits 0",
         "trap-exit-status": "the EXIT trap `echo bye; exit $?` exits 0",
         "step-continue": "step continue-on-error: True",
         "job-continue": "job continue-on-error", "step-if": "step if: \"github.event_name == 'push'\"",
         "no-errexit-shell": "the step's shell runs the script without `-e`",
         "dry-run": "`--dry-run` on the runner's command line",
         "help": "`--help` on the runner's command line",
         "emulate": "`--emulate` on the runner's command line", "pytest-k": "`-k` on the runner's command line",
         "addopts": "job env PYTEST_ADDOPTS="}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("case", sorted(MASKS))
def test_g_anything_that_can_mask_the_runner_is_named_and_the_step_does_not_count(tmp_path, case):
    report = run_audit(repo_with(tmp_path, **MASKS[case]).root, today=TODAY)
    masked = report.violations["masked-step"]
    assert masked and all(m.startswith(f"MASKED {STEP}: ") for m in masked), masked
    assert any(WORDS[case] in m for m in masked), masked
    dormant = sorted(v.split()[1] for v in report.violations["dormant-suite"])
    assert dormant == ["per-commit/cpu/big", "per-commit/cpu/kernels"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("run, extra", [
    ("|\n          set -o pipefail\n          " + CPU_STEP + " | tee suite.log", ""),
    (CPU_STEP + " | tee suite.log", "\n        shell: bash"),          # GitHub: bash --noprofile --norc -eo pipefail
    ("|\n          " + CPU_STEP + " || status=$?\n          echo collected >> \"$GITHUB_STEP_SUMMARY\"\n"
     "          exit ${status:-0}", ""),                                  # sglang's capture-and-rethrow
    ("python3 -m pip install nox && " + CPU_STEP + " && echo passed", ""),
    (CPU_STEP + " > suite.log 2>&1", ""),                                 # a redirection, not a background job
    ("|\n          " + CPU_STEP + " | tee suite.log\n          exit ${PIPESTATUS[0]}", ""),
    ("|\n          { " + CPU_STEP + "; } > suite.log 2>&1", ""),                # a group whose output is kept
    ("|\n          trap 'rm -rf build' EXIT\n          " + CPU_STEP, ""),      # a cleanup trap keeps the status
    ("|\n          cleanup() {\n            rc=$?\n            rm -rf build\n            exit $rc\n          }\n"
     "          trap cleanup EXIT\n          " + CPU_STEP, ""),                 # a trap that rethrows the status
    ("|\n          run_tests() {\n            " + CPU_STEP + "\n          }\n          run_tests", ""),
    # a failure handled loudly, and shapes a flat reading took for masks where `set -e` ends the script first
    (CPU_STEP + " || exit 1", ""),
    ("|\n          " + CPU_STEP + " || { echo failed; exit 1; }\n          echo done", ""),
    ("|\n          set +e\n          " + CPU_STEP + "\n          rc=$?\n          if [ $rc -ne 0 ]; then exit $rc; fi",
     ""),
    (CPU_STEP + "; true", ""),
    ("|\n          " + CPU_STEP + "\n          exit 0", ""),
    ("|\n          set +e\n          " + CPU_STEP, ""),
])
def test_g_honest_shell_around_the_runner_is_not_flagged(tmp_path, run, extra):
    report = run_audit(repo_with(tmp_path, cpu_run=run, step_extra=extra).root, today=TODAY)
    assert found(report, "dormant-suite", "unknown-suite", "masked-step") == {}


NOX_SUITE = '''
import nox


def run_in(session, envs, *cmd):
    {helper}


def session_args(session):
    return list(session.posargs)


@nox.session
def suite(session):
    {body}
'''
HONEST_HELPER = 'session.run("python", *cmd, external=True)'
VIA_HELPER = 'args = session_args(session)\n    run_in(session, [], "-m", "ci.runner.run_suite", *args)'


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("helper, body, words", [
    (HONEST_HELPER, 'session.run("python", "-m", "ci.runner.run_suite", *session.posargs, success_codes=[0, 1])',
     "noxfile.py:15: session suite: session.run(success_codes=[0, 1]) turns a failing exit code into success"),
    (HONEST_HELPER,
     'try:\n        session.run("python", "-m", "ci.runner.run_suite", *session.posargs)\n'
     '    except Exception:\n        pass',
     "noxfile.py:15: session suite: the runner call is inside try/except, which can swallow its failure"),
    (HONEST_HELPER, 'session.run("python", "-m", "ci.runner.run_suite", "--group", "per-commit/cpu")',
     "noxfile.py:14: session suite never hands ci.runner.run_suite the posargs"),
    ('session.run("python", *cmd, external=True, success_codes=[0, 1, 5])', VIA_HELPER,
     "noxfile.py:6: helper run_in() called by session suite: session.run(success_codes=[0, 1, 5])"),
    ('try:\n        session.run("python", *cmd)\n    except Exception:\n        session.log("ignored")', VIA_HELPER,
     "noxfile.py:6: helper run_in() called by session suite: the runner call is inside try/except"),
    ('session.run("python", "-c", "pass")', VIA_HELPER,
     "noxfile.py:5: helper run_in() called by session suite does not pass its *cmd on to session.run"),
    (HONEST_HELPER, VIA_HELPER, None),
    (HONEST_HELPER, 'session.run("python", "-m", "ci.runner.run_suite", "--dry-run", *session.posargs)',
     "noxfile.py:15: the session passes `--dry-run` to the runner, which lists the selected tests and runs none"),
])
def test_g_the_nox_suite_session_is_checked(tmp_path, helper, body, words):
    repo = repo_with(tmp_path)
    repo.write("noxfile.py", NOX_SUITE.format(helper=helper, body=body))
    masked = run_audit(repo.root, today=TODAY).violations["masked-step"]
    if words is None:
        assert masked == []
    else:
        assert any(m.startswith("MASKED " + words) for m in masked), masked


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_reusable_workflow_runs_when_its_caller_does(tmp_path):
    repo = repo_with(tmp_path)
    repo.write(".github/workflows/nightly.yml", """
        on:
          schedule:
            - cron: '0 3 * * *'
        jobs:
          call-amd:
            uses: ./.github/workflows/_amd-stage.yml
            with:
              group: nightly/mi35x-8
    """)
    repo.write(".github/workflows/_amd-stage.yml", """
        on:
          workflow_call:
            inputs:
              group:
                type: string
                required: true
        jobs:
          run:
            if: inputs.group != ''
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: python3 -m nox -s suite -- --group ${{ inputs.group }} --shard 1/1
    """)
    assert found(run_audit(repo.root, today=TODAY), "dormant-suite", "unknown-suite", "masked-step") == {}
    repo.write(".github/workflows/nightly.yml", "on: workflow_dispatch\njobs:\n  call-amd:\n"
               "    uses: ./.github/workflows/_amd-stage.yml\n    with:\n      group: nightly/mi35x-8\n")
    dormant = run_audit(repo.root, today=TODAY).violations["dormant-suite"]
    assert [v.split()[1] for v in dormant] == ["nightly/mi35x-8/dspark-e2e"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("expr, event, expected", [
    (GATE_IF, "push", True),
    (GATE_IF, "pull_request", None),
    ("${{ github.event_name == 'schedule' }}", "schedule", True),
    ("github.event_name == 'schedule'", "push", False),
    ("!(github.event_name == 'push')", "push", False),
    ("always() && !cancelled()", "push", True),
    ("success() || failure()", "push", True),
    ("failure()", "push", False),
    ("github.ref == 'refs/heads/main'", "push", None),
    ("contains('run-gpu-ci, other', 'RUN-GPU-CI')", "push", True),
    ("inputs.job_filter == '' || inputs.job_filter == 'all'", "schedule", True),
    ("fromJSON(needs.plan.outputs.go)", "push", None),
    ("false", "push", False),
    ("1 == '1' && null == '' && 'false'", "push", True),
    ("github.event_name == 'push' &&", "push", None),     # unreadable: unknown, never "true"
])
def test_the_if_evaluator_is_three_valued(expr, event, expected):
    ctx = {"github.event_name": event}
    if event == "schedule":
        ctx["inputs.*"] = None
    assert truth(expr, ctx) is expected


TRIGGERS = {
    "paths": ("  push:\n    branches: [main]\n    paths: ['docs/**']\n  pull_request:\n    paths: ['docs/**']\n",
              "push is filtered by paths ['docs/**'] that miss its files"),
    "paths-ignore": ("  push:\n    paths-ignore: ['registered/**']\n",
                     "push is filtered by paths ['!registered/**'] that miss its files"),
    "release-only": ("  push:\n    branches: ['release/*']\n", "push is limited to branches ['release/*']"),
    "closed-prs": ("  pull_request:\n    types: [closed]\n", "pull_request types ['closed'] miss synchronize"),
    "tags": ("  push:\n    tags: ['v*']\n", "push runs on tags only"),
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("case", sorted(TRIGGERS))
def test_a_triggers_that_do_not_fire_on_every_commit_do_not_count(tmp_path, case):
    on, words = TRIGGERS[case]
    repo = repo_with(tmp_path)
    path = repo.root / ".github/workflows/per-commit.yml"
    text = path.read_text()
    head, _, rest = text.partition("on:\n")
    path.write_text(head + "on:\n" + on + "jobs:\n" + rest.partition("jobs:\n")[2])
    dormant = run_audit(repo.root, today=TODAY).violations["dormant-suite"]
    assert sorted(d.split()[1] for d in dormant) == ["per-commit/cpu/big", "per-commit/cpu/kernels",
                                                     "per-commit/h200-1/kernels"]
    assert all(words in d for d in dormant), dormant


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_a_schedule_that_never_fires_and_a_job_limited_to_main(tmp_path):
    repo = repo_with(tmp_path)
    nightly = repo.root / ".github/workflows/nightly.yml"
    nightly.write_text(nightly.read_text().replace("'17 2 * * *'", "'0 0 31 2 *'"))
    dormant = run_audit(repo.root, today=TODAY).violations["dormant-suite"]
    assert len(dormant) == 1 and dormant[0].startswith("DORMANT nightly/mi35x-8/dspark-e2e")
    assert "cron '0 0 31 2 *' names a day that does not exist" in dormant[0]
    nightly.write_text(NIGHTLY.replace("    runs-on: linux-mi35x-gpu-8",
                                       "    if: github.ref == 'refs/heads/main'\n    runs-on: linux-mi35x-gpu-8"))
    assert run_audit(repo.root, today=TODAY).violations["dormant-suite"] == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_b_a_group_run_on_a_runner_the_catalog_does_not_give_it(tmp_path):
    repo = repo_with(tmp_path)
    path = repo.root / ".github/workflows/per-commit.yml"
    path.write_text(path.read_text().replace("runs-on: linux-h200-gpu-1", "runs-on: ubuntu-latest"))
    assert run_audit(repo.root, today=TODAY).violations["runner-mismatch"] == [
        ".github/workflows/per-commit.yml:per-commit__h200-1: runs group per-commit/h200-1 on runs-on "
        "['ubuntu-latest'], but ci/hardware.yaml gives h200-1 the runner(s) ['linux-h200-gpu-1']"]


ACTION = """
name: run a group shard
inputs:
  group:
    required: true
  shard:
    default: 1/1
runs:
  using: composite
  steps:
    - name: install nox
      shell: bash
      run: python3 -m pip install nox
    - name: run
      shell: bash
      run: python3 -m nox -s suite -- --group ${{ inputs.group }} --shard "${{ inputs.shard }}"{tail}
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_g_a_local_composite_action_is_read_as_part_of_the_job(tmp_path):
    use = ("uses: ./.github/actions/run-group\n        with:\n          group: per-commit/cpu\n"
           "          shard: ${{ matrix.shard }}")
    repo = repo_with(tmp_path)
    path = repo.root / ".github/workflows/per-commit.yml"
    text = path.read_text()
    head, _, rest = text.partition("      - name: run group shard\n")
    path.write_text(head + "      - name: run group shard\n        " + use + "\n" + rest.partition("        run: ")[2]
                    .partition("\n")[2])
    repo.write(".github/actions/run-group/action.yml", ACTION.replace("{tail}", ""))
    assert found(run_audit(repo.root, today=TODAY), "dormant-suite", "unknown-suite", "masked-step") == {}
    repo.write(".github/actions/run-group/action.yml", ACTION.replace("{tail}", " || true"))
    report = run_audit(repo.root, today=TODAY)
    assert report.violations["masked-step"] == [
        "MASKED .github/workflows/per-commit.yml:per-commit__cpu:run group shard > run: if the runner fails: "
        + LEFT_OF_OR.format(1)]
    dormant = report.violations["dormant-suite"]
    assert sorted(v.split()[1] for v in dormant) == ["per-commit/cpu/big", "per-commit/cpu/kernels"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_a_job_that_needs_a_job_skipped_on_push_is_skipped_too(tmp_path):
    repo = repo_with(tmp_path)
    path = repo.root / ".github/workflows/per-commit.yml"
    text = path.read_text().replace("  changes:\n    runs-on: ubuntu-latest",
                                    "  changes:\n    if: github.event_name == 'pull_request'\n"
                                    "    runs-on: ubuntu-latest")
    path.write_text(text)
    dormant = run_audit(repo.root, today=TODAY).violations["dormant-suite"]
    assert [d.split()[1] for d in dormant] == ["per-commit/h200-1/kernels"]
    path.write_text(text.replace("    if: " + GATE_IF, "    if: always() && (" + GATE_IF + ")"))
    assert run_audit(repo.root, today=TODAY).violations["dormant-suite"] == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_a_path_filter_that_covers_the_suites_own_files_counts(tmp_path):
    repo = repo_with(tmp_path)
    path = repo.root / ".github/workflows/per-commit.yml"
    text = path.read_text()
    head, _, rest = text.partition("on:\n")
    path.write_text(head + "on:\n  push:\n    branches: [main]\n    paths: ['impl/**', 'registered/**']\n"
                    "  pull_request:\n    paths: ['impl/**', 'registered/**']\njobs:\n" + rest.partition("jobs:\n")[2])
    report = run_audit(repo.root, today=TODAY)
    assert report.violations["dormant-suite"] == []
    rows = {r[0]: r for r in report.job_rows}
    assert rows["per-commit/cpu/big"][5] == "pull_request, push"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("run", [
    "echo " + CPU_STEP.replace('"', ""),                                   # text, not a command
    "|\n          cat <<EOF > later.sh\n          " + CPU_STEP + "\n          EOF",   # a heredoc body is data
    "# " + CPU_STEP,
])
def test_a_the_runner_named_in_text_is_not_a_run(tmp_path, run):
    report = run_audit(repo_with(tmp_path, cpu_run=run).root, today=TODAY)
    dormant = report.violations["dormant-suite"]
    assert sorted(v.split()[1] for v in dormant) == ["per-commit/cpu/big", "per-commit/cpu/kernels"]
    assert report.violations["masked-step"] == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_g_the_session_nox_runs_as_suite_is_the_one_checked(tmp_path):
    repo = repo_with(tmp_path)
    repo.write("noxfile.py", """
        import nox


        @nox.session
        def suite(session):
            session.run("python", "-m", "ci.runner.run_suite", *session.posargs)


        @nox.session(name="suite")
        def quick(session):
            session.run("python", "-m", "ci.runner.run_suite", *session.posargs, success_codes=[0, 1])
    """)
    masked = run_audit(repo.root, today=TODAY).violations["masked-step"]
    assert masked == ["MASKED noxfile.py:12: session suite: session.run(success_codes=[0, 1]) turns a failing "
                      "exit code into success"]
