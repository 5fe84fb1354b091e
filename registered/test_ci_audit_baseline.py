"""A baseline never turns a regression green, and the audit is one program.

Each test writes a small sglang-shaped tree (``register_*_ci`` calls and the workflows that run them,
self-written here; nothing is taken from sglang) and runs the command line as a user does:

- a suite the baseline knows as a warning (dispatch-only) that loses its run step is a new error;
- removing a workflow's ``schedule:`` turns "ran on a schedule" into "manual-only": a new error
  under a baseline (the baseline records the suites that ran);
- renaming workflow files, jobs and steps changes no key: zero new, zero stale, same fingerprints;
- suppressed findings are counted per rule (``baselined (N)``) and listed with ``--show-baselined``;
- ``dspark-audit``, ``python -m ci.audit`` and ``nox -s audit`` print JSON the published schema accepts;
- a malformed workflow's finding names that file and line, in text, JSON and SARIF.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from ci.audit.cli import build_parser
from ci.audit.json_report import SCHEMA_PATH
from ci.audit.sarif import FINGERPRINT
from ci.audit.findings import STATES
from ci.registration import register
from registered.fixture_repo import REAL_ROOT

LIVE = "stage-a-test-1-gpu"                 # per-commit, run by pull_request
NIGHTLY = "nightly-amd-1-gpu-alpha"         # nightly, run on a schedule
MANUAL = "nightly-amd-1-gpu-by-hand"        # nightly, run only by workflow_dispatch
MASKED = "nightly-amd-1-gpu-masked"         # nightly, run only by a step whose failure is ignored: dormant
DORMANT = "nightly-amd-1-gpu-old-debt"      # nightly, run by nothing
EIGHT = "stage-c-test-8-gpu-amd"            # per-commit, sent to a 1-GPU runner

REGISTRATIONS = {LIVE: ("cuda", False), NIGHTLY: ("amd", True), MANUAL: ("amd", True), MASKED: ("amd", True),
                 DORMANT: ("amd", True), EIGHT: ("amd", False)}


def _registration(hw: str, suite: str, nightly: bool) -> str:
    func = "register_amd_ci" if hw == "amd" else "register_cuda_ci"
    return (f"from sglang.test.ci.ci_register import {func}\n\n"
            f"{func}(est_time=300, suite={suite!r}{', nightly=True' if nightly else ''})\n\n\n"
            "def test_it():\n    assert 1 + 1 == 2\n")


def _step(suite: str, hw: str, nightly: bool, name: str | None) -> str:
    head = f"      - name: {name}\n        run: " if name else "      - run: "
    return f"{head}cd test && python3 run_suite.py --hw {hw} --suite {suite}{' --nightly' if nightly else ''}\n"


def _job(key: str, runner: str, steps: list[str], extra: str = "") -> str:
    return f"  {key}:\n    runs-on: {runner}\n{extra}    steps:\n      - uses: actions/checkout@v4\n" + "".join(steps)


def write_tree(root: Path, *, names: dict[str, str] | None = None, files: dict[str, str] | None = None,
               nightly_on: str = "\n  schedule:\n    - cron: '0 1 * * *'\n  workflow_dispatch:",
               manual_runs: bool = True) -> Path:
    """The registry above and three workflows. ``names`` renames workflow files, job keys and steps
    (keys: pr, nightly, manual, stage-a, eight, ghost, alpha, masked, planned, by-hand, step)."""
    n = {"pr": "pr-test.yml", "nightly": "nightly.yml", "manual": "manual.yml", "stage-a": "stage-a",
         "eight": "stage-c", "ghost": "ghost", "alpha": "alpha", "masked": "masked", "planned": "planned",
         "by-hand": "by-hand", "step": None, **(names or {})}
    step = n["step"]
    out = {f"test/registered/{hw}/test_{suite.replace('-', '_')}.py": _registration(hw, suite, nightly)
           for suite, (hw, nightly) in REGISTRATIONS.items()}
    out["test/run_suite.py"] = "import sys\n\nsys.exit(0)\n"
    out[f".github/workflows/{n['pr']}"] = (
        "name: pr\non:\n  pull_request:\n  push:\n    branches: [main]\njobs:\n"
        + _job(n["stage-a"], "1-gpu-runner", [_step(LIVE, "cuda", False, step)])
        + _job(n["eight"], "linux-mi325-gpu-1", [_step(EIGHT, "amd", False, step)])
        + _job(n["ghost"], "1-gpu-runner", [_step("stage-a-test-ghost", "cuda", False, step)]))
    out[f".github/workflows/{n['nightly']}"] = (
        f"name: nightly\non:{nightly_on}\njobs:\n"
        + _job(n["alpha"], "linux-mi325-gpu-1", [_step(NIGHTLY, "amd", True, step)])
        + _job(n["masked"], "linux-mi325-gpu-1", [_step(MASKED, "amd", True, step)], "    continue-on-error: true\n")
        + _job(n["planned"], "cpu-runner", [
            (f"      - name: {step}\n        run: " if step else "      - run: ")
            + "cd test && python3 run_suite.py --hw cpu --suite ${{ needs.plan.outputs.suite }}\n"]))
    if manual_runs:
        out[f".github/workflows/{n['manual']}"] = (
            "name: manual\non: [workflow_dispatch]\njobs:\n"
            + _job(n["by-hand"], "linux-mi325-gpu-1", [_step(MANUAL, "amd", True, step)]))
    out.update(files or {})
    for rel, text in out.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def cli(*args: str, module: str = "ci.audit.cli", fresh: bool = False) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS``: a fresh interpreter with ``fresh``, else ``MODULE.main(ARGS)`` in this one
    (the same function ``python -m`` runs, without the interpreter's start-up)."""
    if fresh:
        return subprocess.run([sys.executable, "-m", module, *args], cwd=REAL_ROOT, capture_output=True, text=True,
                              timeout=120, env={**os.environ, "PYTHONPATH": str(REAL_ROOT)})
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = importlib.import_module(module).main(list(args))
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue())


def audit_json(root: Path, *args: str) -> tuple[int, dict]:
    proc = cli("--root", str(root), "--format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def keyed(findings: list[dict]) -> list[tuple[str, str, str, str, str, str]]:
    return sorted((f["rule"], f["severity"], f["state"], f["schedule"], f["hardware"], f["suite"]) for f in findings)


def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# ---------------------------------------------------------------- a baseline compares states, not only keys

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_baselined_warning_that_becomes_an_error_is_new(tmp_path):
    before = write_tree(tmp_path / "before")
    base = tmp_path / "baseline.json"
    assert cli("--root", str(before), "--write-baseline", str(base)).returncode == 0
    entry = next(e for e in json.loads(base.read_text())["entries"] if e["suite"] == MANUAL)
    assert (entry["severity"], entry["state"]) == ("warning", "manual-only")
    after = write_tree(tmp_path / "after", manual_runs=False)      # the dispatch-only workflow is gone
    code, data = audit_json(after, "--baseline", str(base))
    assert code == 1 and data["ok"] is False
    assert keyed(data["findings"]) == [("dormant-suite", "error", "dormant", "nightly", "amd", MANUAL)]
    assert data["baseline"]["worse"] == [{"rule": "dormant-suite", "hardware": "amd", "suite": MANUAL,
                                          "schedule": "nightly", "was": "warning manual-only", "now": "error dormant"}]
    validator().validate(data)
    text = cli("--root", str(after), "--baseline", str(base))
    assert text.returncode == 1
    assert (f"  worse [dormant-suite] nightly/amd/{MANUAL}: the baseline knows it as warning manual-only, "
            "now error dormant") in text.stdout.splitlines()
    assert text.stdout.splitlines()[-1].startswith("dspark-audit: FAILED: 1 new finding(s) at or above error "
                                                   "(1 worse than the baseline)")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_removing_the_schedule_under_a_baseline_is_a_new_error(tmp_path):
    base = tmp_path / "baseline.json"
    assert cli("--root", str(write_tree(tmp_path / "before")), "--write-baseline", str(base)).returncode == 0
    assert {"hardware": "amd", "suite": NIGHTLY, "schedule": "nightly"} in json.loads(base.read_text())["run"]
    after = write_tree(tmp_path / "after", nightly_on=" [workflow_dispatch]")   # dispatch-only now
    _code, alone = audit_json(after)                 # without a baseline it is only a warning
    assert ("dormant-suite", "warning", "manual-only", "nightly", "amd", NIGHTLY) in keyed(alone["findings"])
    code, data = audit_json(after, "--baseline", str(base))
    assert code == 1 and data["baseline"]["stale"] == []
    # NIGHTLY ran on the workflow's schedule: it regressed. MASKED never counted as run (a masked run is no
    # run: it is dormant, known to the baseline, before and after)
    assert {"hardware": "amd", "suite": MASKED, "schedule": "nightly"} not in json.loads(base.read_text())["run"]
    assert keyed(data["findings"]) == [("dormant-suite", "error", "manual-only", "nightly", "amd", NIGHTLY)]
    regressed = next(f for f in data["findings"] if f["suite"] == NIGHTLY)
    assert regressed["why_unproven"] is None
    assert regressed["message"].startswith(f"REGRESSED nightly/amd/{NIGHTLY}: ran on a schedule in the baseline, "
                                           "now manual-only: DORMANT")
    worse = {w["suite"]: (w["was"], w["now"]) for w in data["baseline"]["worse"]}
    assert worse == {NIGHTLY: ("run", "error manual-only")}
    validator().validate(data)


# ---------------------------------------------------------------- renames are not churn

RENAMED = {"pr": "ci-pull-request.yml", "nightly": "every-night.yaml", "manual": "dispatch-me.yml",
           "stage-a": "unit", "eight": "big-box", "ghost": "spooky", "alpha": "first", "masked": "tolerant",
           "planned": "computed", "by-hand": "human", "step": "Run the suite"}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_renaming_workflow_files_jobs_and_steps_gives_no_new_and_no_stale_finding(tmp_path):
    before = write_tree(tmp_path / "before")
    base = tmp_path / "baseline.json"
    assert cli("--root", str(before), "--write-baseline", str(base)).returncode == 0
    _code, known = audit_json(before)
    rules = {(f["rule"], f["severity"]) for f in known["findings"]}
    assert {("masked-step", "error"), ("unknown-suite", "error"), ("runner-mismatch", "error"),
            ("unresolved-step", "warning"), ("dormant-suite", "error"), ("dormant-suite", "warning")} <= rules, rules
    masked = next(f for f in known["findings"] if f["rule"] == "masked-step")
    assert (masked["schedule"], masked["hardware"], masked["suite"]) == ("nightly", "amd", MASKED)  # what it masks
    renamed = write_tree(tmp_path / "renamed", names=RENAMED)
    code, data = audit_json(renamed, "--baseline", str(base), "--strict-baseline")
    assert code == 0, data["findings"]
    assert data["findings"] == [] and data["baseline"]["stale"] == [] and data["baseline"]["grown"] == []
    assert data["baseline"]["suppressed"] == len(known["findings"])
    assert any("every-night.yaml:tolerant:Run the suite" in f["message"] for f in data["baseline"]["baselined"])

    def prints(root: Path) -> list[str]:
        log = json.loads(cli("--root", str(root), "--format", "sarif").stdout)
        return sorted(r["partialFingerprints"][FINGERPRINT] for r in log["runs"][0]["results"])
    assert prints(renamed) == prints(before)


# ---------------------------------------------------------------- suppressed is not PASS

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_baselined_findings_are_counted_per_rule_and_listed_on_request(tmp_path):
    root = write_tree(tmp_path / "tree")
    base = tmp_path / "baseline.json"
    assert cli("--root", str(root), "--write-baseline", str(base)).returncode == 0
    proc = cli("--root", str(root), "--baseline", str(base))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines()]
    assert "[PASS] [dormant-suite]" not in proc.stdout and "[PASS] [masked-step]" not in proc.stdout
    start = lines.index(next(line for line in lines if line.startswith("[BASE] [dormant-suite]")))
    assert lines[start + 1] == ("baselined (3) [dormant-suite]: 2 error, 1 warning known to the baseline "
                                "(--show-baselined lists them)")
    assert "baselined (1) [masked-step]: 1 error known to the baseline (--show-baselined lists them)" in lines
    assert not any(line.startswith("baselined error") for line in lines)
    total = len(json.loads(cli("--root", str(root), "--format", "json").stdout)["findings"])
    assert lines[-1] == f"dspark-audit: OK ({total} baselined)"
    assert f"audit: OK ({total} baselined)" in lines
    shown = cli("--root", str(root), "--baseline", str(base), "--show-baselined")
    listed = [line.strip() for line in shown.stdout.splitlines() if line.strip().startswith("baselined ")
              and "known to the baseline" not in line]
    assert len(listed) == total and any(f"DORMANT nightly/amd/{DORMANT}" in line for line in listed)
    assert ["baselined", "error", "[dormant-suite]", "DORMANT", f"nightly/amd/{DORMANT}"] in [
        line.split()[:5] for line in listed]
    refused = cli("--root", str(root), "--show-baselined")
    assert refused.returncode == 2 and refused.stderr == "dspark-audit: --show-baselined: needs --baseline FILE\n"


# ---------------------------------------------------------------- one program, one schema

def _noxfile():
    spec = importlib.util.spec_from_file_location("noxfile_under_test", REAL_ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_the_three_entry_points_are_one_program_with_one_json_schema(tmp_path, monkeypatch):
    check = validator()
    root = write_tree(tmp_path / "tree")
    base = tmp_path / "baseline.json"
    assert cli("--root", str(root), "--write-baseline", str(base)).returncode == 0
    nox = _noxfile()
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(nox, "tools_env", lambda session: "tools")
    monkeypatch.setattr(nox, "session_args", lambda session: ["--root", str(root), "--adapter", "sglang",
                                                              "--format", "json"])
    monkeypatch.setattr(nox, "run_in", lambda session, envs, *args: calls.append(args))
    nox.audit.func(None) if hasattr(nox.audit, "func") else nox.audit(None)
    (nox_args,) = calls
    assert nox_args[:2] == ("-m", "ci.audit.cli")                      # nox runs dspark-audit itself
    documents = {}
    for name, module, args in (("dspark-audit", "ci.audit.cli", ("--root", str(root), "--format", "json")),
                               ("python -m ci.audit", "ci.audit", ("--root", str(root), "--format", "json")),
                               ("nox -s audit", nox_args[1], nox_args[2:])):
        for extra in ((), ("--baseline", str(base))):
            proc = cli(*args, *extra, module=module, fresh=module == "ci.audit")
            assert proc.returncode in (0, 1), (name, proc.stderr)
            doc = json.loads(proc.stdout)
            check.validate(doc)
            documents[(name, extra)] = {k: v for k, v in doc.items() if k != "tool"}
    first = documents[("dspark-audit", ())]
    assert all(doc == first for (_n, extra), doc in documents.items() if not extra)
    assert first["tables"]["jobs"] and set(first["rules"]) >= {"dormant-suite", "masked-step"}
    sarif = cli("--root", str(root), "--format", "sarif", module="ci.audit", fresh=True)
    assert json.loads(sarif.stdout)["version"] == "2.1.0"
    options = {a.option_strings[-1] if a.option_strings[-1].startswith("--") else a.option_strings[0]:
               a.nargs != 0 for a in build_parser()._actions if a.option_strings and a.dest != "help"}
    declared = {k: v for k, v in nox.OPTIONS["audit"].items() if k != "--repository"}
    assert declared == {("--repo" if k == "--repository" else k): v for k, v in options.items()}
    assert nox.AUDIT_DEFAULTS == ("--adapter", "dspark")               # own registry unless told otherwise


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_schema_state_vocabulary_is_the_findings_one():
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$defs"]["state"]["enum"] == ["", *STATES]
    assert schema["properties"]["version"]["const"] == 2


# ---------------------------------------------------------------- a broken workflow is located

BROKEN_A = ("name: a\non: [push]\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n"
            "     bad: 1\n")                                                   # line 8: a key out of place
BROKEN_B = "name: b\non: [push]\njobs: {a: [1, 2\n"                          # line 4: never closed


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_each_malformed_workflow_is_named_with_its_line_in_text_json_and_sarif(tmp_path):
    root = write_tree(tmp_path / "tree", files={".github/workflows/zz-broken-a.yml": BROKEN_A,
                                                ".github/workflows/zz-broken-b.yml": BROKEN_B})
    code, data = audit_json(root)
    assert code == 1
    broken = sorted((f["suite"], f["locations"]) for f in data["findings"] if "not valid YAML" in f["message"])
    assert broken == [(".github/workflows/zz-broken-a.yml", [{"path": ".github/workflows/zz-broken-a.yml", "line": 8}]),
                      (".github/workflows/zz-broken-b.yml", [{"path": ".github/workflows/zz-broken-b.yml", "line": 4}])]
    text = cli("--root", str(root)).stdout
    assert "error   [unknown-suite] .github/workflows/zz-broken-a.yml:8: not valid YAML: " in text
    assert "error   [unknown-suite] .github/workflows/zz-broken-b.yml:4: not valid YAML: " in text
    log = json.loads(cli("--root", str(root), "--format", "sarif").stdout)
    results = [r for r in log["runs"][0]["results"] if "not valid YAML" in r["message"]["text"]]
    where = sorted((r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                    r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results)
    assert where == [(".github/workflows/zz-broken-a.yml", 8), (".github/workflows/zz-broken-b.yml", 4)]
    prints = [r["partialFingerprints"][FINGERPRINT] for r in results]
    assert len(set(prints)) == 2 and not any(":" in p for p in prints)      # from the key, not the order


# ---------------------------------------------------------------- the project's own adapter: same keys

OWN_TESTS = """
@register(suite="quick", hardware="cpu", schedule="per-commit", est_time=5)
def test_quick(): pass

@register(suite="steady", hardware="cpu", schedule="per-commit", est_time=5)
def test_steady(): pass

@register(suite="forgotten", hardware="cpu", schedule="nightly", est_time=5)
def test_forgotten(): pass
"""
OWN_WORKFLOW = """
name: per-commit
on:
  pull_request:
  push:
    branches: [main]
jobs:
  {job}:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v5
      - name: {step}
        continue-on-error: true
        run: python3 -m nox -s suite -- --job per-commit/cpu/quick
      - name: {step} again
        run: python3 -m nox -s suite -- --job per-commit/cpu/renamed-away
      - run: python3 -m nox -s suite -- --job per-commit/cpu/steady
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_own_adapter_keys_survive_renaming_the_workflow_file_job_and_step(tmp_path):
    from ci.audit.own import run_audit
    from ci.audit.baseline import baseline_text, compare, parse_baseline
    from registered.fixture_repo import FixtureRepo

    def audit(root: Path, wf: str, job: str, step: str):
        repo = FixtureRepo(root)
        repo.test_file("test_own.py", OWN_TESTS)
        repo.write(f".github/workflows/{wf}", OWN_WORKFLOW.format(job=job, step=step))
        return run_audit(repo.root)

    before = audit(tmp_path / "before", "per-commit.yml", "cpu-tests", "run the quick suite")
    keys = {f.rule: f.key for f in before.findings if f.rule in ("masked-step", "unknown-suite")}
    assert keys == {"masked-step": ("masked-step", "", "per-commit/cpu/quick", ""),
                    "unknown-suite": ("unknown-suite", "", "per-commit/cpu/renamed-away", "")}
    assert sorted(f.suite for f in before.findings if f.rule == "dormant-suite" and f.state == "dormant") == [
        "forgotten", "quick"]                                      # a masked run is no run here
    assert before.run_suites == {("cpu", "steady", "per-commit")}
    base = parse_baseline(baseline_text(before.findings, "dspark", before.run_suites), "b.json")
    after = audit(tmp_path / "after", "checks.yaml", "unit", "Tests")
    result = compare(after.findings, base)
    assert result.new == () and result.stale == () and len(result.suppressed) == len(before.findings)
