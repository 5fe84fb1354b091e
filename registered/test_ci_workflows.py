"""Generated workflows: committed == generated, schema-valid, linted, gated, pinned; path gating."""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from ci.registry.catalog import CatalogError, parse_catalog
from ci.tools.changed_paths import decide, gated_groups, group_paths, import_closure
from ci.registry.group_plan import groups
from ci.registry.jobs import load_registry
from ci.registration import register
from ci.github.generate import (ACTIONS, CHANGES_KEY, GATE_KEY, GATE_SCRIPT, GPU_LABEL, HEADER, WORKFLOW_DIR, check,
                          drift, generate, gpu_if, schema_check)
from registered.fixture_repo import REAL_ROOT, FixtureRepo


def _fixture(tmp_path) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_w.py", """
        @register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=700)
        def test_a(): pass

        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=650)
        def test_b(): pass

        @register(suite="components", hardware="cpu", schedule="per-commit", est_time=3,
                  env={"hip": {"DSPARK_PLATFORM": "hip"}, "cuda": {"DSPARK_PLATFORM": "cuda"}})
        def test_c(): pass

        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900,
                  env={"kv": {"DSPARK_KV_BACKEND": "unified"}, "paged": {"DSPARK_KV_BACKEND": "paged"}})
        def test_e2e(): pass
    """)
    return repo


def _run_step(job: dict) -> dict:
    return next(s for s in job["steps"] if "nox -s suite" in s.get("run", ""))


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_generated_workflows_run_one_job_per_group_and_shard(tmp_path):
    registry = load_registry(_fixture(tmp_path).root)
    files = generate(registry)
    assert files == generate(registry), "generation must be deterministic"
    assert all(text.startswith(HEADER) for text in files.values())
    per_commit = yaml.safe_load(files[f"{WORKFLOW_DIR}/per-commit.yml"])
    nightly = yaml.safe_load(files[f"{WORKFLOW_DIR}/nightly.yml"])

    assert per_commit["on"]["pull_request"]["types"] == ["opened", "synchronize", "reopened", "labeled"]
    assert per_commit["on"]["push"]["branches"] == ["main"]
    jobs = per_commit["jobs"]
    # four registry jobs on cpu (kernels, components[hip], components[cuda]) form ONE group job
    assert set(jobs) == {"lint", CHANGES_KEY, "per-commit__cpu", "per-commit__h200-1", GATE_KEY}
    cpu = jobs["per-commit__cpu"]
    assert cpu["runs-on"] == "ubuntu-latest" and "if" not in cpu and "needs" not in cpu
    assert cpu["strategy"]["matrix"]["shard"] == ["1/2", "2/2"]     # 1356 s over a 600 s budget, balanced
    step = _run_step(cpu)
    assert step["run"] == 'python3 -m nox -s suite -- --group per-commit/cpu --shard "$SHARD"'
    assert step["env"]["SHARD"] == "${{ matrix.shard }}"
    upload = next(s for s in cpu["steps"] if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "ci-results/"
    assert jobs["per-commit__h200-1"]["runs-on"] == "linux-h200-gpu-1"
    lint_runs = " ".join(s.get("run", "") for s in jobs["lint"]["steps"])
    assert all(f"nox -s {s}" in lint_runs for s in ("lint", "audit", "workflows -- --check"))
    gate = jobs[GATE_KEY]
    assert gate["if"] == "always()" and gate["needs"] == [k for k in jobs if k != GATE_KEY]

    assert nightly["on"]["schedule"][0]["cron"] and nightly["concurrency"]["group"].startswith("nightly-")
    choice = nightly["on"]["workflow_dispatch"]["inputs"]["group"]
    assert choice["type"] == "choice" and choice["options"] == ["all", "nightly/mi35x-8"]
    e2e = nightly["jobs"]["nightly__mi35x-8"]
    assert e2e["runs-on"] == "linux-mi35x-gpu-8" and "inputs.group == 'nightly/mi35x-8'" in e2e["if"]
    assert re.fullmatch(r"rocm/pytorch:\S+@sha256:[0-9a-f]{64}", e2e["container"]["image"])
    assert "/dev/kfd" in e2e["container"]["options"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_workflow_hygiene_pins_actions_and_passes_values_through_env():
    files = generate(load_registry(REAL_ROOT))
    text = "".join(files[f"{WORKFLOW_DIR}/{name}"] for name in ("per-commit.yml", "nightly.yml", "liveness.yml"))
    uses = re.findall(r"uses: (\S+)@(\S+)(.*)", text)
    assert uses
    for repo, ref, comment in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{repo}@{ref} is not pinned by commit SHA"
        assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), f"{repo}@{ref}: no '# vX.Y.Z' comment"
        assert int(comment.split("v")[1].split(".")[0]) >= 5, f"{repo}: node20 major"
    assert {r for r, _, _ in uses} == {a[0] for a in ACTIONS.values()}
    for name in ("per-commit.yml", "nightly.yml", "liveness.yml"):
        doc = yaml.safe_load(files[f"{WORKFLOW_DIR}/{name}"])
        assert set(doc["permissions"]) <= {"contents", "actions"} and "write" not in str(doc["permissions"])
        for key, job in doc["jobs"].items():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, (name, key)
                assert "${{" not in step.get("run", ""), f"{name}: {key}: expression inside run:"
    assert yaml.safe_load(files[f"{WORKFLOW_DIR}/nightly.yml"])["concurrency"]


@functools.lru_cache(maxsize=1)
def _per_commit_gpu() -> tuple[dict, list]:
    """The generated per-commit.yml and its gated GPU groups (read once for every event case)."""
    registry = load_registry(REAL_ROOT)
    doc = yaml.safe_load(generate(registry)[f"{WORKFLOW_DIR}/per-commit.yml"])
    return doc, [g for g in groups(registry) if g.schedule == "per-commit" and g.hardware.is_gpu]


def _evaluate(expr: str, ctx: dict) -> bool:
    """Evaluate the GPU gating condition for one event (a test-sized subset of GitHub's syntax)."""
    py = expr.replace("||", " or ").replace("&&", " and ")
    py = re.sub(r"contains\(github\.event\.pull_request\.labels\.\*\.name, '([^']*)'\)",
                lambda m: repr(m.group(1) in ctx["labels"]), py)
    py = re.sub(r"needs\.changes\.outputs\.([\w-]+)", lambda m: repr(ctx["outputs"].get(m.group(1), "")), py)
    for name, value in (("github.event.pull_request.head.repo.full_name", ctx["head_repo"]),
                        ("github.repository", "me/dspark"), ("github.event_name", ctx["event"]),
                        ("github.event.action", ctx["action"]), ("github.event.label.name", ctx["label"])):
        py = py.replace(name, repr(value))
    return bool(eval(py, {"__builtins__": {}}))   # noqa: S307 - a literal expression built above


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("event, head_repo, labels, changed, action, runs", [
    ("push", "", [], "false", "", True),                                        # main runs everything
    ("schedule", "", [], "", "", True),
    ("pull_request", "me/dspark", [], "true", "synchronize", True),             # touches the group's paths
    ("pull_request", "me/dspark", [], "false", "synchronize", False),           # docs-only PR: GPU skipped
    ("pull_request", "me/dspark", [GPU_LABEL], "false", "synchronize", True),   # our own branch, labelled
    ("pull_request", "fork/dspark", [], "true", "synchronize", False),          # forks never without the label
    ("pull_request", "fork/dspark", [GPU_LABEL], "false", "labeled", True),     # the maintainer's labelling approves
    ("pull_request", "fork/dspark", [GPU_LABEL], "true", "synchronize", False),  # ...that commit, not the next push
    ("pull_request", "fork/dspark", [GPU_LABEL], "true", "reopened", False),
    ("pull_request", "me/dspark", ["other"], "false", "labeled", False),
])
def test_gpu_condition_per_event(event, head_repo, labels, changed, action, runs):
    doc, gpu = _per_commit_gpu()
    assert gpu
    for group in gpu:
        job = doc["jobs"][group.key]
        assert job["needs"] == [CHANGES_KEY] and job["if"] == gpu_if(group.key)
        assert doc["jobs"][CHANGES_KEY]["outputs"][group.key] == f"${{{{ steps.paths.outputs.{group.key} }}}}"
        ctx = {"event": event, "head_repo": head_repo, "labels": labels, "outputs": {group.key: changed},
               "action": action, "label": labels[-1] if action == "labeled" else None}
        assert _evaluate(job["if"], ctx) is runs


def _gate(needs: dict, **env: str) -> subprocess.CompletedProcess:
    script = GATE_SCRIPT.split("<<'EOF'\n", 1)[1].rsplit("EOF\n", 1)[0]
    full = {**os.environ, "NEEDS_JSON": json.dumps(needs),
            "GATED_JSON": json.dumps({"per-commit__h200-1": "per-commit__h200-1"}), **env}
    return subprocess.run([sys.executable, "-c", script], env=full, capture_output=True, text=True, timeout=30)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_gate_accepts_a_skip_only_where_the_pull_request_does_not_require_the_group():
    def needs(gpu_result: str, changed: str) -> dict:
        return {"lint": {"result": "success"}, "per-commit__cpu": {"result": "success"},
                "changes": {"result": "success", "outputs": {"per-commit__h200-1": changed}},
                "per-commit__h200-1": {"result": gpu_result}}

    pr = {"EVENT_NAME": "pull_request", "SAME_REPO": "true", "GPU_LABEL": "false"}
    assert _gate(needs("skipped", "false"), **pr).returncode == 0
    bad = _gate(needs("skipped", "true"), **pr)                     # touched but did not run
    assert bad.returncode == 1 and "per-commit__h200-1" in bad.stderr
    assert _gate(needs("skipped", "false"), **{**pr, "GPU_LABEL": "true"}).returncode == 1
    fork = {"EVENT_NAME": "pull_request", "SAME_REPO": "false", "GPU_LABEL": "true"}
    assert _gate(needs("skipped", "true"), **fork).returncode == 0   # a fork's later push: skipped by design
    assert _gate(needs("skipped", "true"), **fork, GPU_APPROVED="true").returncode == 1   # the labelled run must
    assert _gate(needs("skipped", "false"), EVENT_NAME="push").returncode == 1
    assert _gate(needs("failure", "false"), **pr).returncode == 1   # a gated job that ran must pass


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_toolchain_pins_reach_the_run_step():
    registry = load_registry(REAL_ROOT)
    doc = yaml.safe_load(generate(registry)[f"{WORKFLOW_DIR}/per-commit.yml"])
    cpu_env = _run_step(doc["jobs"]["per-commit__cpu"])["env"]
    assert cpu_env["CI_TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    assert cpu_env["CI_TORCH_VERSION"] == "2.13.0" and cpu_env["CI_TRITON_VERSION"]
    h200_env = _run_step(doc["jobs"]["per-commit__h200-1"])["env"]
    assert h200_env["CI_TORCH_VERSION"] == "2.11.0" and h200_env["CI_TRITON_VERSION"] == "3.6.0"
    assert h200_env["CI_TORCH_INDEX_URL"] == registry.catalog.get("h200-1").toolchain.index_url
    assert "/whl/cu" in h200_env["CI_TORCH_INDEX_URL"]  # a CUDA wheel index, not the CPU one
    assert registry.catalog.toolchain_problems() == []


TOOLCHAIN_ENTRY = """\
hardware:
  gpu:
    runs_on: [x]
    vendor: amd
    arch: gfx950
    gpus: 1
    backend: hip
    container:
      image: {image}
      options: --device=/dev/kfd
{toolchain}"""
DIGEST = "sha256:" + "ab" * 32


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("image, toolchain, error", [
    ("rocm/pytorch:t@sha256:123", "", "@sha256:<64 lower-case hex>"),
    (f"rocm/pytorch:t@{DIGEST}", "    toolchain:\n      torch: 2.7\n", "exact version string"),
    (f"rocm/pytorch:t@{DIGEST}", "    toolchain:\n      torch: \"2.7.1\"\n      index_url: https://x\n",
     "takes torch from its pinned image"),
    (f"rocm/pytorch:t@{DIGEST}", "    toolchain:\n      torch: \"2.7.1\"\n      cuda: \"12\"\n", "unknown field"),
])
def test_toolchain_errors_name_the_field(image, toolchain, error):
    with pytest.raises(CatalogError, match=re.escape(error)):
        parse_catalog(TOOLCHAIN_ENTRY.format(image=image, toolchain=toolchain))


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_unpinned_toolchains_are_reported():
    tagged = parse_catalog(TOOLCHAIN_ENTRY.format(image="rocm/pytorch:t",
                                                  toolchain="    toolchain:\n      torch: \"2.7.1\"\n"))
    assert ["not pinned by digest" in p for p in tagged.toolchain_problems()] == [True]
    bare = parse_catalog(TOOLCHAIN_ENTRY.format(image=f"rocm/pytorch:t@{DIGEST}", toolchain=""))
    assert ["no toolchain" in p for p in bare.toolchain_problems()] == [True]
    pinned = parse_catalog(TOOLCHAIN_ENTRY.format(image=f"rocm/pytorch:t@{DIGEST}",
                                                  toolchain="    toolchain:\n      torch: \"2.7.1\"\n"))
    assert pinned.toolchain_problems() == []
    with pytest.raises(CatalogError, match="index_url"):
        parse_catalog(TOOLCHAIN_ENTRY.replace("    container:\n      image: {image}\n"
                                              "      options: --device=/dev/kfd\n", "")
                      .format(toolchain="    toolchain:\n      torch: \"2.11.0\"\n      triton: \"3.6.0\"\n"))


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_drift_is_detected_and_shown_as_a_diff(tmp_path, capsys):
    repo = _fixture(tmp_path)
    repo.generate_workflows()
    assert drift(repo.root, generate(load_registry(repo.root))) == []
    repo.test_file("test_new.py", """
        @register(suite="newsuite", hardware="mi30x-1", schedule="per-commit", est_time=5)
        def test_n(): pass
    """)
    diffs = drift(repo.root, generate(load_registry(repo.root)))
    assert any("+  per-commit__mi30x-1:" in d for d in diffs), diffs
    assert check(repo.root, linters=False) == 1
    assert "nox -s workflows" in capsys.readouterr().out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_committed_workflows_equal_a_fresh_generation():
    diffs = drift(REAL_ROOT, generate(load_registry(REAL_ROOT)))
    assert not diffs, "run `nox -s workflows` and commit the result:\n" + "\n".join(diffs)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_committed_workflows_pass_the_github_workflow_schema(tmp_path):
    paths = sorted((REAL_ROOT / WORKFLOW_DIR).glob("*.yml"))
    assert {p.name for p in paths} >= {"per-commit.yml", "nightly.yml", "liveness.yml"}
    ok, output = schema_check(paths)
    assert ok, output
    # the check can fail: a job without runs-on/steps is not a workflow GitHub accepts
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    name: no runner, no steps\n")
    ok, output = schema_check([broken])
    assert not ok and "broken.yml" in output


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_every_registry_job_is_in_a_group_job_with_every_shard():
    registry = load_registry(REAL_ROOT)
    docs = {name: yaml.safe_load((REAL_ROOT / WORKFLOW_DIR / name).read_text())
            for name in ("per-commit.yml", "nightly.yml")}
    covered = set()
    for group in groups(registry):
        doc = docs[f"{group.schedule}.yml"]
        job = doc["jobs"][group.key]
        assert f"--group {group.id} " in _run_step(job)["run"]
        assert job["strategy"]["matrix"]["shard"] == [f"{i}/{group.shards}" for i in range(1, group.shards + 1)]
        covered |= {j.id for j in group.jobs}
    assert covered == set(registry.jobs)
    per_commit = [g for g in groups(registry) if g.schedule == "per-commit"]
    before, after = len(registry.jobs) + 2, sum(1 for g in per_commit) + 3   # + lint, gate (+ changes)
    assert after < before


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_path_sets_follow_imports(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/__init__.py", '_LAZY = {"op": "impl.lazy_op"}\n')
    repo.write("impl/kernels/__init__.py", "from .core import run\n")
    repo.write("impl/kernels/core.py", "from impl import util\n")
    repo.write("impl/util.py", "X = 1\n")
    repo.write("impl/lazy_op.py", "import importlib\nmod = importlib.import_module('impl.dyn')\n")
    repo.write("impl/dyn.py", "")
    repo.write("impl/unrelated.py", "")
    repo.write("docs/design.md", "")
    repo.test_file("test_gpu.py", """
        from impl.kernels import run

        @register(suite="kernels", hardware="h200-1", schedule="per-commit", est_time=5)
        def test_g(): pass
    """)
    closure = import_closure(repo.root, ["registered/test_gpu.py"])
    assert {"impl/__init__.py", "impl/kernels/__init__.py", "impl/kernels/core.py", "impl/util.py",
            "impl/lazy_op.py", "impl/dyn.py"} <= closure
    assert "impl/unrelated.py" not in closure
    registry = load_registry(repo.root)
    [group] = gated_groups(registry)
    paths = group_paths(repo.root, group)
    assert {"registered/test_gpu.py", "ci/hardware.yaml", ".github/workflows/per-commit.yml"} <= paths
    assert decide(repo.root, [group], ["impl/util.py", "docs/design.md"]) == {
        "per-commit__h200-1": (True, ["impl/util.py"])}
    assert decide(repo.root, [group], ["docs/design.md", "impl/unrelated.py"])["per-commit__h200-1"][0] is False
    assert decide(repo.root, [group], None)["per-commit__h200-1"][0] is True


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_changed_paths_cli_reads_git_and_writes_outputs(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gpu_only.py", "")
    repo.test_file("test_gpu.py", """
        import impl.gpu_only

        @register(suite="kernels", hardware="h200-1", schedule="per-commit", est_time=5)
        def test_g(): pass
    """)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo.root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    repo.write("README.md", "docs only\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "docs"], check=True)
    docs = repo.run_module("ci.tools.changed_paths", "--base", "HEAD~1")
    assert docs.returncode == 0 and docs.stdout == "per-commit__h200-1=false\n", docs.stdout + docs.stderr
    repo.write("impl/gpu_only.py", "X = 2\n")
    subprocess.run([*git, "commit", "-qam", "kernel"], check=True)
    touched = repo.run_module("ci.tools.changed_paths", "--base", "HEAD~1")
    assert touched.stdout == "per-commit__h200-1=true\n" and "impl/gpu_only.py" in touched.stderr
    assert repo.run_module("ci.tools.changed_paths", "--event", "push").stdout == "per-commit__h200-1=true\n"
    missing = repo.run_module("ci.tools.changed_paths", "--event", "pull_request")
    assert missing.returncode == 2 and "--base" in missing.stderr
    bad = repo.run_module("ci.tools.changed_paths", "--base", "nosuchrev")
    assert bad.returncode == 2 and "nosuchrev" in bad.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_workflows_cli_check_passes_on_the_repository():
    proc = subprocess.run([sys.executable, "-m", "ci.github.generate", "--check"], cwd=REAL_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in ("workflow drift: none", "schema: ok", "toolchain pins: ok", "actionlint: ok", "zizmor: ok"):
        assert line in proc.stdout, proc.stdout
