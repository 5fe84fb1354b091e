"""Generated workflows: committed == generated, schema-valid, and every reference runs tests."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from ci import run_suite
from registered.fixture_repo import REAL_ROOT, FixtureRepo
from ci.jobs import load_registry, workflow_key
from ci.registration import register
from ci.workflow_scan import scan_workflows
from ci.workflows import GATE_KEY, HEADER, WORKFLOW_DIR, check, drift, generate, schema_check


def _fixture(tmp_path) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_w.py", """
        @register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=700)
        def test_a(): pass

        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=650)
        def test_b(): pass

        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900,
                  env={"kv": {"DSPARK_KV_BACKEND": "unified"}, "paged": {"DSPARK_KV_BACKEND": "paged"}})
        def test_e2e(): pass
    """)
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_generated_workflows_have_the_documented_shape(tmp_path):
    registry = load_registry(_fixture(tmp_path).root)
    files = generate(registry)
    assert files == generate(registry), "generation must be deterministic"
    per_commit = yaml.safe_load(files[f"{WORKFLOW_DIR}/per-commit.yml"])
    nightly = yaml.safe_load(files[f"{WORKFLOW_DIR}/nightly.yml"])
    assert all(text.startswith(HEADER) for text in files.values())

    assert set(per_commit["on"]) == {"pull_request", "push"} and per_commit["on"]["push"]["branches"] == ["main"]
    jobs = per_commit["jobs"]
    cpu = jobs["per-commit__cpu__kernels"]
    assert cpu["name"] == "per-commit/cpu/kernels" and cpu["runs-on"] == "ubuntu-latest"
    assert cpu["strategy"]["matrix"]["shard"] == ["1/2", "2/2"]   # 1350 s over a 600 s budget, balanced
    run = next(s["run"] for s in cpu["steps"] if "run" in s)
    assert "nox -s suite -- --job 'per-commit/cpu/kernels' --shard ${{ matrix.shard }}" in run
    upload = next(s for s in cpu["steps"] if s.get("uses", "").startswith("actions/upload-artifact@v4"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "ci-results/"
    assert jobs["per-commit__h200-1__kernels"]["runs-on"] == "linux-h200-gpu-1"
    lint_runs = " ".join(s.get("run", "") for s in jobs["lint"]["steps"])
    assert "nox -s audit" in lint_runs and "nox -s workflows -- --check" in lint_runs
    gate = jobs[GATE_KEY]
    assert gate["if"] == "always()" and gate["name"] == "all jobs"
    assert gate["needs"] == [k for k in jobs if k != GATE_KEY]

    assert "schedule" in nightly["on"] and nightly["on"]["schedule"][0]["cron"]
    choice = nightly["on"]["workflow_dispatch"]["inputs"]["job"]
    assert choice["type"] == "choice"
    assert choice["options"] == ["all", "nightly/mi35x-8/dspark-e2e[kv]", "nightly/mi35x-8/dspark-e2e[paged]"]
    e2e = nightly["jobs"][workflow_key("nightly/mi35x-8/dspark-e2e[kv]")]
    assert e2e["runs-on"] == "linux-mi35x-gpu-8"
    assert e2e["container"]["image"].startswith("rocm/") and "/dev/kfd" in e2e["container"]["options"]
    assert "inputs.job == 'nightly/mi35x-8/dspark-e2e[kv]'" in e2e["if"]
    assert nightly["jobs"][GATE_KEY]["needs"] == [k for k in nightly["jobs"] if k != GATE_KEY]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_drift_is_detected_and_shown_as_a_diff(tmp_path, capsys):
    repo = _fixture(tmp_path)
    repo.generate_workflows()
    assert drift(repo.root, generate(load_registry(repo.root))) == []
    repo.test_file("test_new.py", """
        @register(suite="newsuite", hardware="cpu", schedule="per-commit", est_time=5)
        def test_n(): pass
    """)
    diffs = drift(repo.root, generate(load_registry(repo.root)))
    assert len(diffs) == 1 and "+  per-commit__cpu__newsuite:" in diffs[0]
    assert check(repo.root) == 1
    assert "nox -s workflows" in capsys.readouterr().out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_committed_workflows_equal_a_fresh_generation():
    diffs = drift(REAL_ROOT, generate(load_registry(REAL_ROOT)))
    assert not diffs, "run `nox -s workflows` and commit the result:\n" + "\n".join(diffs)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_committed_workflows_pass_the_github_workflow_schema(tmp_path):
    paths = sorted((REAL_ROOT / WORKFLOW_DIR).glob("*.yml"))
    assert {p.name for p in paths} >= {"per-commit.yml", "nightly.yml"}
    ok, output = schema_check(paths)
    assert ok, output
    # the check can fail: a job without runs-on/steps is not a workflow GitHub accepts
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    name: no runner, no steps\n")
    ok, output = schema_check([broken])
    assert not ok and "broken.yml" in output


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_every_workflow_reference_selects_tests_in_a_dry_run(capsys):
    scan = scan_workflows(REAL_ROOT)
    assert not scan.problems, scan.problems
    assert scan.refs, "the committed workflows run registry jobs"
    registry = load_registry(REAL_ROOT)
    for ref in scan.refs:
        job = registry.job(ref.job_id)
        for index in range(1, job.shards + 1):   # what --dry-run lists, without reloading the registry
            tests, shard = run_suite.select(job, f"{index}/{job.shards}", None)
            assert tests and all(t.startswith("registered/test_") for t in tests), (ref.job_id, shard)
    # and once through the CLI, for the first referenced job
    first = scan.refs[0].job_id
    assert run_suite.main(["--root", str(REAL_ROOT), "--job", first, "--dry-run"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith(f"# {first} shard 1/1:") and all(x.startswith("registered/") for x in listed[1:])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_workflows_cli_check_passes_on_the_repository():
    proc = subprocess.run([sys.executable, "-m", "ci.workflows", "--check"], cwd=REAL_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "workflow drift: none" in proc.stdout and "schema: ok" in proc.stdout
