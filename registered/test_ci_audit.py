"""Audit rules dormant-suite .. disabled-without-reason on fixture repositories, each breaking exactly one rule.

Rules masked-step, skip-debt, impossible-test and collection-parity are in
test_ci_audit_chain.py, test_ci_audit_skips.py and test_ci_parity.py.
"""
from __future__ import annotations

import datetime as dt
import json

import pytest
import yaml

from ci.audit.own import RULES, run_audit
from registered.fixture_repo import REAL_ROOT, FixtureRepo
from ci.registration import register

TODAY = dt.date(2026, 6, 1)

BASELINE = """
OPS_UNDER_TEST = ["scatter_op"]

@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
def test_kernels(): pass

@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5,
          env={"hip-mtp": {"DSPARK_PLATFORM": "hip", "DSPARK_SPEC_ALGO": "mtp", "DSPARK_KV_BACKEND": "paged"},
               "torch-none": {"DSPARK_KERNEL_BACKEND": "torch", "DSPARK_SPEC_ALGO": "none", "DSPARK_CHECK": "on"}})
def test_gate_variants(): pass

@register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900)
class TestE2E:
    def test_gsm8k(self): pass
"""


def baseline(tmp_path, *, workflows: bool = True, nightly: bool = True) -> FixtureRepo:
    """``nightly=False``: no nightly/mi35x-8 group yet, so a new MI35x-8 suite has no workflow in any shape
    (one workflow job per job, or per group shard)."""
    repo = FixtureRepo(tmp_path)
    repo.write("impl/__init__.py", '_LAZY = {"scatter_op": "impl.kernels", "SpecConfig": "impl.config"}\n')
    repo.write("reference/__init__.py", "from reference.ops import scatter_op\n")
    repo.test_file("test_base.py", BASELINE if nightly else BASELINE[:BASELINE.index('@register(suite="dspark-e2e"')])
    if workflows:
        repo.generate_workflows()
    return repo


def failed_rules(report) -> set[str]:
    return {code for code, found in report.violations.items() if found}


def only(report, code: str) -> list[str]:
    assert failed_rules(report) == {code}, report.violations
    return report.violations[code]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_baseline_fixture_passes_every_rule(tmp_path):
    report = run_audit(baseline(tmp_path).root, today=TODAY)
    assert report.ok, report.violations
    gates = {(g, v): (pc, n) for g, v, pc, n in report.gate_rows}
    assert gates[("platform", "hip")][0] == 1   # HIP covered per-commit by emulation on cpu
    assert gates[("kernel_backend", "triton")][0] == 1   # h200-1 per-commit job, GPU default
    rows = {r[0]: r for r in report.job_rows}
    # workflow_dispatch runs it only when the `job` input picks it: not definitely, so not listed
    assert rows["nightly/mi35x-8/dspark-e2e"][4:] == ("nightly.yml", "schedule", "triton")


# -------------------------------------------------------------- [dormant-suite] dormant
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_nightly_mi35x_8_suite_without_a_workflow_is_dormant(tmp_path):
    """The incident: a nightly 8-GPU MI35x suite registered, but no workflow job runs it."""
    repo = baseline(tmp_path, nightly=False)
    repo.test_file("test_amd_dspark.py", """
        @register(suite="dspark-unified-kv", hardware="mi35x-8", schedule="nightly", est_time=2400,
                  env={"kv": {"DSPARK_KV_BACKEND": "unified"}})
        class TestDSparkUnifiedKVGSM8K:
            def test_accuracy(self): pass
    """)
    found = only(run_audit(repo.root, today=TODAY), "dormant-suite")
    assert len(found) == 1
    assert found[0].startswith("DORMANT nightly/mi35x-8/dspark-unified-kv[kv]")
    assert "registered/test_amd_dspark.py:4" in found[0] and "no workflow job" in found[0]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_manual_only_or_disabled_workflow_job_does_not_count(tmp_path):
    repo = baseline(tmp_path, nightly=False)
    repo.test_file("test_amd_dspark.py", """
        @register(suite="dspark-unified-kv", hardware="mi35x-8", schedule="nightly", est_time=2400)
        def test_accuracy(): pass
    """)
    repo.write(".github/workflows/manual.yml", """
        on: workflow_dispatch
        jobs:
          amd:
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: nox -s suite -- --job nightly/mi35x-8/dspark-unified-kv
          amd-off:
            if: false
            runs-on: linux-mi35x-gpu-8
            steps:
              - run: nox -s suite -- --job nightly/mi35x-8/dspark-unified-kv
    """)
    found = only(run_audit(repo.root, today=TODAY), "dormant-suite")
    assert len(found) == 1 and found[0].startswith("DORMANT nightly/mi35x-8/dspark-unified-kv")
    assert "manual.yml:amd on ['workflow_dispatch']" in found[0] and "(if: false)" in found[0]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_per_commit_job_run_only_on_a_schedule_is_dormant_for_prs(tmp_path):
    repo = baseline(tmp_path)
    path = repo.root / ".github/workflows/per-commit.yml"
    doc = yaml.safe_load(path.read_text())
    doc["on"] = {"schedule": [{"cron": "0 0 * * 0"}]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    found = only(run_audit(repo.root, today=TODAY), "dormant-suite")
    assert {f.split()[1] for f in found} == {"per-commit/cpu/kernels", "per-commit/cpu/kernels[hip-mtp]",
                                            "per-commit/cpu/kernels[torch-none]", "per-commit/h200-1/kernels"}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_workflow_that_skips_a_shard_is_flagged(tmp_path):
    repo = baseline(tmp_path, workflows=False)
    repo.test_file("test_big.py", """
        @register(suite="big", hardware="cpu", schedule="per-commit", est_time=500)
        def test_one(): pass

        @register(suite="big", hardware="cpu", schedule="per-commit", est_time=500)
        def test_two(): pass
    """)
    repo.generate_workflows()
    path = repo.root / ".github/workflows/per-commit.yml"
    text = path.read_text()
    assert "- 1/2\n        - 2/2\n" in text
    path.write_text(text.replace("- 1/2\n        - 2/2\n", "- 1/2\n"))
    found = only(run_audit(repo.root, today=TODAY), "dormant-suite")
    # one workflow job per job (--job per-commit/cpu/big) or per group shard (--group per-commit/cpu)
    assert len(found) == 1 and found[0] in (
        "PARTIAL per-commit/cpu/big: .github/workflows/per-commit.yml:per-commit__cpu__big "
        "runs shards [1] of 2: shard(s) [2] never run",
        "PARTIAL group per-commit/cpu: .github/workflows/per-commit.yml:per-commit__cpu run(s) "
        "shards [1] of 2: shard(s) [2] never run (4 job(s) affected)"), found


# -------------------------------------------------------------- [unknown-suite] unknown job
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_b_workflow_reference_to_an_unknown_job(tmp_path):
    repo = baseline(tmp_path)
    repo.write(".github/workflows/extra.yml", """
        on: [push]
        jobs:
          ghost:
            runs-on: ubuntu-latest
            env:
              JOB: per-commit/cpu/ghost-suite
            steps:
              - run: python -m ci.runner.run_suite --job "$JOB"
          typo:
            runs-on: ubuntu-latest
            strategy:
              matrix:
                job: [per-commit/cpu/kernels, per-commit/cpu/kernel]
            steps:
              - run: nox -s suite -- --job ${{ matrix.job }}
          garbage:
            runs-on: ubuntu-latest
            steps:
              - run: nox -s suite -- --job not-a-job-id
    """)
    found = only(run_audit(repo.root, today=TODAY), "unknown-suite")
    assert len(found) == 3
    assert any("extra.yml:ghost: --job per-commit/cpu/ghost-suite is not a registered job" in f for f in found)
    assert any("extra.yml:typo: --job per-commit/cpu/kernel is not a registered job" in f for f in found)
    assert any("extra.yml:garbage" in f and "not a job id" in f for f in found)


# -------------------------------------------------------------- [ungated-value] gates
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_c_gate_values_only_nightly_or_in_no_job(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_gates.py", """
        @register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=5)
        def test_kernels(): pass

        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5,
                  env={"hip-mtp": {"DSPARK_PLATFORM": "hip", "DSPARK_SPEC_ALGO": "mtp"},
                       "torch-none": {"DSPARK_KERNEL_BACKEND": "torch", "DSPARK_SPEC_ALGO": "none"}})
        def test_gate_variants(): pass

        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900,
                  env={"paged": {"DSPARK_KV_BACKEND": "paged"}})
        def test_e2e(): pass
    """)
    repo.generate_workflows()
    found = only(run_audit(repo.root, today=TODAY), "ungated-value")
    assert len(found) == 2
    assert found[0].startswith("gate kv_backend=paged is exercised only by nightly jobs "
                               "['nightly/mi35x-8/dspark-e2e[paged]']")
    assert "DSPARK_KV_BACKEND=paged" in found[0]
    assert found[1].startswith("gate check_mode=on is exercised by no job") and "DSPARK_CHECK=on" in found[1]


# -------------------------------------------------------------- [unregistered-test] unregistered
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_d_test_in_no_suite(tmp_path):
    repo = baseline(tmp_path)
    repo.write("registered/test_orphan.py", "import pytest\n\n\ndef test_forgotten():\n    assert True\n")
    found = only(run_audit(repo.root, today=TODAY), "unregistered-test")
    assert found == ["registered/test_orphan.py:4: registered/test_orphan.py::test_forgotten belongs to no suite "
                     "(decorate it with @register(...))"]


# -------------------------------------------------------------- [op-without-reference] ops
OP_MSG = ("op {}: no per-commit registered test file (nor the op table, impl/testing/op_table.py or "
          "registered/op_table.py, used by one) mentions it")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_e_op_without_reference_or_per_commit_test(tmp_path):
    repo = baseline(tmp_path)
    repo.write("impl/__init__.py", '_LAZY = {"scatter_op": "impl.kernels", "gather_op": "impl.kernels.gather",'
                                   ' "SpecConfig": "impl.config"}\nAUDITED_OPS = ("renorm_op",)\n')
    repo.write("reference/__init__.py", "from reference.ops import scatter_op\nfrom .more import *\n")
    repo.write("reference/more.py", "def renorm_op(x):\n    return x\n\ndef _private():\n    pass\n")
    repo.test_file("test_nightly_ops.py", """
        @register(suite="ops-nightly", hardware="mi35x-1", schedule="nightly", est_time=5)
        def test_gather():
            gather_op, renorm_op  # mentioned only by a nightly test: does not count
    """)
    repo.generate_workflows()
    found = only(run_audit(repo.root, today=TODAY), "op-without-reference")
    assert sorted(found) == [
        OP_MSG.format("gather_op"),
        "op gather_op: reference/__init__.py exports no 'gather_op'",
        OP_MSG.format("renorm_op"),
    ]


def op_table_repo(tmp_path, table: str, schedule: str) -> FixtureRepo:
    """Ops scatter_op and gather_op, the op table module ``table`` listing both, a generic test on ``schedule``
    importing its OPS; workflows generated."""
    repo = baseline(tmp_path, workflows=False)
    repo.write("impl/__init__.py", '_LAZY = {"scatter_op": "impl.kernels", "gather_op": "impl.kernels"}\n')
    repo.write("reference/__init__.py", "from reference.ops import scatter_op, gather_op\n")
    package = table.rpartition(".")[0].replace(".", "/")
    if not (repo.root / package / "__init__.py").exists():
        repo.write(f"{package}/__init__.py", "")
    repo.write(table.replace(".", "/") + ".py", "import impl.kernels as K\nOPS = [K.scatter_op, K.gather_op]\n")
    repo.test_file("test_op_table_generic.py", f"""
        from {table} import OPS

        @register(suite="ops", hardware="cpu", schedule="{schedule}", est_time=5)
        def test_all_ops(): pass
    """)
    repo.generate_workflows()
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_e_op_table_covers_ops_when_its_generic_test_is_per_commit(tmp_path):
    repo = op_table_repo(tmp_path, "registered.op_table", "nightly")
    assert only(run_audit(repo.root, today=TODAY), "op-without-reference") == [
        OP_MSG.format("gather_op")]
    source = (repo.root / "registered/test_op_table_generic.py").read_text()
    (repo.root / "registered/test_op_table_generic.py").write_text(source.replace('"nightly"', '"per-commit"'))
    repo.generate_workflows()
    assert run_audit(repo.root, today=TODAY).ok


# -------------------------------------------------------------- [disabled-without-reason] disabled
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("disabled, words", [
    ('{"until": "2026-07-31"}', "no reason"),
    ('{"reason": "hangs on ROCm 7.2", "until": "2026-12-31"}', "beyond the 90-day horizon (2026-08-30"),
    ('{"reason": "hangs on ROCm 7.2"}', "no `until` expiry date"),
    ('{"reason": "hangs on ROCm 7.2", "until": "2026-05-31"}', "expired on 2026-05-31"),
    ('{"reason": "hangs on ROCm 7.2", "until": "soon"}', "not a YYYY-MM-DD date"),
    ('{"reason": "hangs on ROCm 7.2", "until": "2026-06-01"}', None),   # expires at the end of its day
])
def test_f_disabled_registrations_need_reason_and_unexpired_until(tmp_path, disabled, words):
    repo = baseline(tmp_path)
    repo.test_file("test_flaky.py", f"""
        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
        @register(suite="dspark-e2e", hardware="mi35x-8", schedule="nightly", est_time=900, disabled={disabled})
        def test_flaky(): pass
    """)
    repo.generate_workflows()
    report = run_audit(repo.root, today=TODAY)
    if words is None:
        assert report.ok, report.violations
        return
    found = only(report, "disabled-without-reason")
    assert len(found) == 1 and found[0].startswith("registered/test_flaky.py:5: registered/test_flaky.py::test_flaky")
    assert words in found[0]


# -------------------------------------------------------------- CLI
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_audit_cli_prints_the_table_and_fails_on_the_incident(tmp_path):
    repo = baseline(tmp_path, nightly=False)
    proc = repo.run_module("ci.audit", "--today", "2026-06-01")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "audit: OK" in proc.stdout
    header = next(line for line in proc.stdout.splitlines() if line.startswith("job "))
    assert header.split() == ["job", "registrations", "est", "s", "shards", "workflow", "trigger", "backend"]
    repo.test_file("test_amd.py", """
        @register(suite="dspark-unified-kv", hardware="mi35x-8", schedule="nightly", est_time=2400)
        def test_gsm8k(): pass
    """)
    proc = repo.run_module("ci.audit")
    assert proc.returncode == 1
    assert "[FAIL] [dormant-suite]" in proc.stdout and "DORMANT nightly/mi35x-8/dspark-unified-kv" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("nightly/mi35x-8/dspark-unified-kv "))
    assert row.split() == ["nightly/mi35x-8/dspark-unified-kv", "1", "2400", "1", "-", "-", "triton"]
    data = json.loads(repo.run_module("ci.audit", "--format", "json").stdout)
    assert data["ok"] is False and data["adapter"] == "dspark"
    assert [f["rule"] for f in data["findings"]] == ["dormant-suite"]
    assert data["findings"][0]["message"].startswith("DORMANT nightly/mi35x-8/dspark-unified-kv")
    assert {j["id"]: j["workflows"] for j in data["tables"]["jobs"]}["nightly/mi35x-8/dspark-unified-kv"] == "-"
    assert data["rules"]["collection-parity"] == {"title": RULES["collection-parity"], "checked": False,
                                                  "new": 0, "baselined": 0}
    repo.test_file("test_bad.py",
                   "@register(suite='s', hardware='mi99', schedule='nightly', est_time=1)\ndef test_x(): pass\n")
    proc = repo.run_module("ci.audit")
    assert proc.returncode == 2 and "registered/test_bad.py:3: " in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_the_real_repository_passes_the_audit():
    report = run_audit(REAL_ROOT)
    assert report.ok, {k: v for k, v in report.violations.items() if v}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_e_the_op_table_in_impl_testing_counts(tmp_path):
    repo = op_table_repo(tmp_path, "impl.testing.op_table", "per-commit")
    assert run_audit(repo.root, today=TODAY).ok
    source = (repo.root / "registered/test_op_table_generic.py").read_text()
    (repo.root / "registered/test_op_table_generic.py").write_text(
        source.replace("from impl.testing.op_table import OPS", "from impl.testing import op_table"))
    assert run_audit(repo.root, today=TODAY).ok
    (repo.root / "registered/test_op_table_generic.py").write_text(
        source.replace("from impl.testing.op_table import OPS\n", ""))
    assert only(run_audit(repo.root, today=TODAY), "op-without-reference") == [OP_MSG.format("gather_op")]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_bench_registry_and_the_audit_count_in_the_same_words(tmp_path):
    repo = baseline(tmp_path)
    audit = repo.run_module("ci.audit", "--today", "2026-06-01")
    bench = repo.run_module("ci.tools.bench_registry", "--repeat", "1")
    assert bench.returncode == 0, bench.stderr
    audit_line = next(line for line in audit.stdout.splitlines() if line.startswith("registry:")).partition(" -- ")[0]
    bench_line = bench.stdout.splitlines()[0]
    assert audit_line == bench_line == ("registry: 1 test file(s), 3 registration(s) (0 disabled), "
                                        "5 job(s) in 3 group(s)")
