"""A workflow GitHub refuses runs nothing (docs/audit-baseline.md "Malformed workflows").

GitHub validates a workflow file before any of its jobs start; one mistake anywhere in it (a step with
both ``uses`` and ``run``, ``needs`` naming a job that was renamed, a ``continue_on_error`` typo) and the
whole file is "not valid": every job of it, including the one that runs the suite, never starts. The
audit used to read such a file job by job and call its suites run, so the breakage was green. Every
tree here is written by the test itself.
"""
from __future__ import annotations

import json

import pytest

from ci.github.refusals import refusals
from ci.github.scan import scan_workflows
from ci.registration import register
from registered.test_ci_audit_crafted import audit, sglang_tree

RUN = "python3 run_suite.py --hw cuda --suite stage-a"
HEAD = "name: m\non: pull_request\npermissions: {}\njobs:\n"
RUNS = f"  j:\n    runs-on: ubuntu-latest\n    steps:\n      - run: {RUN}\n"
OTHER = "  k:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo k\n"

# name: (the workflow's jobs, what the refusal says); the suite's own job is always fine
REFUSED = {
    "a step with uses and run": (RUNS + OTHER + "      - uses: actions/checkout@v4\n        run: echo\n",
                                 "job 'k', step 2 has both uses and run"),
    "a step with neither": (RUNS + OTHER + "      - name: nothing here\n", "job 'k', step 2 has neither uses nor run"),
    "a step key typo": (RUNS + OTHER + "        continue_on_error: true\n",
                        "job 'k', step 1 has a key 'continue_on_error', which GitHub does not know"),
    "a job key typo": (RUNS + OTHER + "    runs_on: x\n", "job 'k' has a key 'runs_on', which GitHub does not know"),
    "a caller with a runner's key": (RUNS + "  k:\n    uses: octo/repo/.github/workflows/x.yml@v1\n    steps: []\n",
                                     "job 'k' has a key 'steps', which GitHub does not know in a job that calls"),
    "needs a renamed job": (RUNS + OTHER + "    needs: [j, build]\n", "job 'k' needs 'build', which is not a job"),
    "needs in a cycle": (RUNS.replace("    steps", "    needs: k\n    steps") + OTHER + "    needs: j\n",
                         "its needs go round in a cycle: 'j' -> 'k' -> 'j'"),
    "a job without runs-on": (RUNS + "  k:\n    steps:\n      - run: echo\n", "job 'k' has neither runs-on nor uses"),
    "a job without steps": (RUNS + "  k:\n    runs-on: ubuntu-latest\n", "job 'k' has no list of steps"),
    "a job id that is no id": (RUNS + OTHER.replace("  k:", "  1k:"), "job id '1k' is not an id"),
    "a repeated step id": (RUNS + OTHER + "        id: a\n      - id: a\n        run: echo\n",
                           "job 'k', step 2 repeats the id 'a'"),
    "a step id that is no id": (RUNS + OTHER + "        id: a.b\n", "job 'k', step 1 has id 'a.b', which is not an id"),
    "a workflow key typo": (RUNS + "job:\n  x: 1\n", "the workflow has a key 'job', which GitHub does not know"),
    "an if with a single =": (RUNS + OTHER + "        if: github.event_name = 'push'\n",
                              "job 'k', step 1's if has an expression GitHub cannot parse: cannot read \"= 'push'\""),
    "a job if that ends early": (RUNS + OTHER.replace("    steps", "    if: ${{ always() && }}\n    steps"),
                                 "job 'k' has an expression GitHub cannot parse: expression ' always() && ' ends"),
    "a ${{ never closed": (RUNS + OTHER + "      - run: echo ${{ github.sha\n",
                           "job 'k' has a ${{ that is never closed"),
    "an env expression": (RUNS + "env:\n  A: ${{ (github.ref }}\n",
                          "the workflow's 'env' has an expression GitHub cannot parse: expected )"),
}
VALID = (HEAD.replace("jobs:\n", "run-name: r\nenv: {A: 1}\ndefaults: {run: {shell: bash}}\nconcurrency: c\njobs:\n")
         + RUNS.replace("    steps:", "    name: n\n    needs: [k2]\n    permissions: {}\n    environment: e\n"
                        "    concurrency: c\n    outputs: {o: x}\n    env: {B: 2}\n    defaults: {run: {shell: bash}}\n"
                        "    if: true\n    timeout-minutes: 5\n    strategy: {fail-fast: false, max-parallel: 2, "
                        "matrix: {s: [a]}}\n    continue-on-error: false\n    container: {image: x}\n"
                        "    services: {}\n    steps:")
         + "        id: s_1-x\n        name: n\n        if: true\n        working-directory: .\n        shell: bash\n"
           "        env: {C: \"${{ format('}}{0}', github.sha) }}\"}\n        continue-on-error: false\n"
           "        timeout-minutes: ${{ fromJSON('3') }}\n"
           "      - uses: actions/checkout@v4\n        with: {a: 1}\n"
         + "  k2:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo\n"
         + "  call:\n    name: c\n    uses: octo/repo/.github/workflows/x.yml@v1\n    with: {a: 1}\n"
           "    secrets: inherit\n    needs: k2\n    if: true\n    permissions: {}\n    concurrency: c\n"
           "    strategy: {matrix: {s: [a]}}\n")


def _events(root) -> dict[str, tuple[str, ...]]:
    return {r.target: tuple(sorted(r.events)) for r in scan_workflows(root, "sglang").refs}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_workflow_github_refuses_runs_none_of_its_jobs(tmp_path, name):
    """The suite's own job is fine; a mistake elsewhere in the file refuses the file, so the suite is not
    run, and the scan names the reason at the job's line."""
    jobs, said = REFUSED[name]
    root = sglang_tree(tmp_path, workflow=HEAD + jobs)
    scan = scan_workflows(root, "sglang")
    assert [r.target for r in scan.refs] == [], scan.refs
    assert any(said in p and "GitHub refuses the whole workflow" in p for p in scan.problems), scan.problems


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_every_key_github_documents_is_accepted_and_the_suite_runs(tmp_path):
    """A workflow that uses every workflow, job, caller and step key GitHub documents, and expressions
    whose strings hold ``}}``, is not refused (a false refusal would be an error on a valid workflow)."""
    import yaml

    assert refusals(yaml.safe_load(VALID)) == []
    root = sglang_tree(tmp_path, workflow=VALID)
    assert _events(root) == {"per-commit/cuda/stage-a": ("pull_request",)}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_call_to_a_refused_local_workflow_refuses_the_caller_too(tmp_path):
    """GitHub reads a called local workflow when the caller's run starts: a callee it refuses (or that is
    not valid YAML) fails the caller, so the caller's own steps run nothing either."""
    callee = HEAD.replace("on: pull_request", "on: workflow_call") + OTHER + "      - name: neither\n"
    for broken_callee in (callee, "on: [\n"):
        root = sglang_tree(tmp_path / str(len(broken_callee)),
                           workflow=HEAD + RUNS + "  call:\n    uses: ./.github/workflows/callee.yml\n")
        (root / ".github" / "workflows" / "callee.yml").write_text(broken_callee)
        scan = scan_workflows(root, "sglang")
        assert [r.target for r in scan.refs] == [], scan.refs
        assert any("job call calls './.github/workflows/callee.yml', which GitHub refuses" in p
                   for p in scan.problems), scan.problems


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("matrix", ["s: []", "s: [a]\n        exclude: [{s: a}]"])
def test_a_matrix_without_a_row_runs_no_step(tmp_path, matrix):
    """An empty vector or a matrix whose rows are all excluded: GitHub fails the job when it evaluates
    the strategy; it used to read as one row that ran the suite."""
    jobs = RUNS.replace("    steps:", f"    strategy:\n      matrix:\n        {matrix}\n    steps:")
    assert _events(sglang_tree(tmp_path, workflow=HEAD + jobs)) == {}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_breaking_a_workflow_is_a_regression_under_the_baseline(tmp_path):
    """The regression this guards against, end to end: a suite recorded as run in the baseline, then a
    change renames a job another job needs. The audit fails with the suite REGRESSED and the reason."""
    root = sglang_tree(tmp_path, workflow=HEAD + RUNS + OTHER + "    needs: j\n")
    baseline = tmp_path / "baseline.json"
    got = audit("--root", str(root), "--adapter", "sglang", "--write-baseline", str(baseline))
    assert got["rc"] == 0 and json.loads(baseline.read_text())["run"], got["err"]
    (root / ".github" / "workflows" / "ok.yml").write_text(HEAD + RUNS.replace("  j:", "  build:") + OTHER
                                                         + "    needs: j\n")
    got = audit("--root", str(root), "--adapter", "sglang", "--baseline", str(baseline), "--format", "json")
    findings = json.loads(got["out"])["findings"]
    assert got["rc"] == 1, got["err"]
    assert any(f["rule"] == "dormant-suite" and "REGRESSED" in f["message"] for f in findings), findings
    assert any(f["rule"] == "unknown-suite" and "needs 'j', which is not a job" in f["message"] for f in findings)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_only_yml_and_yaml_files_of_the_folder_itself_are_workflows(tmp_path):
    """GitHub reads ``*.yml`` and ``*.yaml`` directly in .github/workflows/: a ``ci.yxml`` (which the
    folder's old ``*.y*ml`` pattern matched) or a file in a subfolder runs nothing."""
    root = sglang_tree(tmp_path, workflow=HEAD + RUNS)
    folder = root / ".github" / "workflows"
    (folder / "ok.yml").rename(folder / "ok.yxml")
    (folder / "sub").mkdir()
    (folder / "sub" / "ok.yml").write_text(HEAD + RUNS)
    assert _events(root) == {}
    (folder / "ok.yxml").rename(folder / "ok.yaml")
    assert _events(root) == {"per-commit/cuda/stage-a": ("pull_request",)}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_long_chain_of_callers_of_a_refused_workflow_is_refused_in_linear_time(tmp_path):
    """2,000 workflows, each calling the next, the last refused: every one of them is refused, each naming
    the call that refuses it. The refusal climbs the chain through a map of callers, once per workflow
    (a pass over every workflow per link would be 4 million call checks, each touching the disk)."""
    n = 2000
    root = sglang_tree(tmp_path, workflow=HEAD + "  j:\n    uses: ./.github/workflows/w0.yml\n")
    folder = root / ".github" / "workflows"
    for i in range(n):
        body = (f"  j:\n    uses: ./.github/workflows/w{i + 1}.yml\n" if i < n - 1 else
                "  j:\n    runs-on: x\n    steps:\n      - name: neither\n")
        (folder / f"w{i}.yml").write_text("on: workflow_call\njobs:\n" + body)
    scan = scan_workflows(root, "sglang")
    calls = [p for p in scan.problems if "which GitHub refuses" in p]
    assert len(calls) == n and len(scan.problems) == n + 1, len(scan.problems)
