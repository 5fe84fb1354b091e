"""Adopting the audit: the ``dspark-audit`` command, its baseline, JSON and SARIF outputs, and the
files that ship it to other repositories (console script, pre-commit hook, composite Action).

The trees are sglang-shaped and written here (a registry of ``register_*_ci`` calls and the
workflows that run it); nothing is taken from sglang.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

from ci.audit.json_report import SCHEMA_PATH, findings_document
from ci.audit.sarif import FINGERPRINT, sarif_log
from ci.audit.baseline import BaselineError, baseline_text, compare, parse_baseline
from ci.audit.findings import Finding, Location, Rule, RuleRegistry
from ci.registration import register
from registered.fixture_repo import REAL_ROOT
from registered.skips import registered_skip

SARIF_SCHEMA = REAL_ROOT / "registered" / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"
SARIF_SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
CALLER = REAL_ROOT / "docs" / "examples" / "dspark-audit-caller.yml"

OLD = "nightly-amd-1-gpu-old-debt"      # dormant before the baseline is written
NEW = "nightly-amd-1-gpu-new-model"     # registered later, with no workflow: the one new finding
LIVE = "stage-a-test-1-gpu"             # run by the pull-request workflow throughout


# ---------------------------------------------------------------- a small sglang-shaped tree

def _registration(hw: str, suite: str, nightly: bool, pad: int = 0) -> str:
    func = "register_amd_ci" if hw == "amd" else "register_cuda_ci"
    return ("import unittest\n" + "\n" * pad
            + f"from sglang.test.ci.ci_register import {func}\n\n"
            + f"{func}(est_time=300, suite={suite!r}{', nightly=True' if nightly else ''})\n\n\n"
            + "class TestIt(unittest.TestCase):\n    def test_it(self):\n        self.assertEqual(1 + 1, 2)\n")


def _job(name: str, label: str, hw: str, suite: str, nightly: bool) -> str:
    flag = " --nightly" if nightly else ""
    return (f"  {name}:\n    runs-on: {label}\n    environment: gpu-runners\n    steps:\n"
            "      - uses: actions/checkout@v4\n"
            f"      - run: cd test && python3 run_suite.py --hw {hw} --suite {suite}{flag}\n")


def write_tree(root: Path, *, with_new: bool = False, old_runs: bool = False, pad: int = 0) -> Path:
    """The registry: LIVE (run per commit), OLD (dormant unless ``old_runs``), NEW (only ``with_new``)."""
    files = {"test/registered/cuda/test_live.py": _registration("cuda", LIVE, False),
             "test/registered/amd/test_old_debt.py": _registration("amd", OLD, True, pad)}
    if with_new:
        files["test/registered/amd/test_new_model.py"] = _registration("amd", NEW, True)
    files["test/run_suite.py"] = "import sys\n\nsys.exit(0)\n"
    files[".github/workflows/pr-test.yml"] = (
        "name: pr\non:\n  pull_request:\n  push:\n    branches: [main]\njobs:\n"
        + _job("stage-a", "1-gpu-runner", "cuda", LIVE, False))
    if old_runs:
        files[".github/workflows/nightly-amd.yml"] = (
            "name: nightly\non:\n  schedule:\n    - cron: '0 1 * * *'\njobs:\n"
            + _job("old-debt", "linux-mi325-gpu-1", "amd", OLD, True))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def cli(*args: str, cwd: Path = REAL_ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    run_env = {**os.environ, "PYTHONPATH": str(REAL_ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "ci.audit.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=run_env)


def json_findings(proc: subprocess.CompletedProcess) -> list[tuple[str, str, str, str, str]]:
    data = json.loads(proc.stdout)
    return [(f["rule"], f["severity"], f["schedule"], f["hardware"], f["suite"]) for f in data["findings"]]


# ---------------------------------------------------------------- baseline: replay on self-written trees

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_suite_registered_after_the_baseline_is_the_one_new_finding(tmp_path):
    before = write_tree(tmp_path / "before")
    base = tmp_path / "baseline.json"
    wrote = cli("--root", str(before), "--write-baseline", str(base))
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    assert f"baseline {base}: wrote 1 entr(ies)" in wrote.stdout.splitlines()
    written = json.loads(base.read_text())
    assert written["entries"] == [{"rule": "dormant-suite", "hardware": "amd", "suite": OLD, "schedule": "nightly",
                                   "severity": "error", "state": "dormant"}]
    assert written["run"] == [{"hardware": "cuda", "suite": LIVE, "schedule": "per-commit"}]

    added = write_tree(tmp_path / "added", with_new=True)
    proc = cli("--root", str(added), "--baseline", str(base), "--format", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json_findings(proc) == [("dormant-suite", "error", "nightly", "amd", NEW)]
    data = json.loads(proc.stdout)
    assert {k: v for k, v in data["baseline"].items() if k != "baselined"} == {
        "path": str(base), "suppressed": 1, "stale": [], "grown": [], "worse": [], "outdated": []}
    assert data["ok"] is False
    assert [f["suite"] for f in data["baseline"]["baselined"]] == [OLD]
    assert data["findings"][0]["locations"] == [{"path": "test/registered/amd/test_new_model.py", "line": 4}]

    text = cli("--root", str(added), "--baseline", str(base))
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[0].endswith(": 2 finding(s) (2 error, 0 warning, 0 note); 1 not in the baseline "
                             "(1 error, 0 warning, 0 note)"), lines[0]
    shown = [line.split() for line in lines if re.match(r"\s*(error|warning|note)\s+\[[a-z-]+\] ", line)]
    assert [words[:3] for words in shown] == [["error", "[dormant-suite]", "DORMANT"]]
    assert f"nightly/amd/{NEW}" in shown[0]
    assert lines[-2:] == [f"baseline {base}: 1 known finding(s) suppressed, 0 stale entr(ies)",
                          "dspark-audit: FAILED: 1 new finding(s) at or above error (1 baselined)"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_baseline_entry_nothing_finds_is_stale_and_fails_only_when_strict(tmp_path):
    before = write_tree(tmp_path / "before")
    base = tmp_path / "baseline.json"
    assert cli("--root", str(before), "--write-baseline", str(base)).returncode == 0
    gone = write_tree(tmp_path / "gone")                       # OLD's test is deleted: nothing registers it
    (gone / "test" / "registered" / "amd" / "test_old_debt.py").unlink()
    proc = cli("--root", str(gone), "--baseline", str(base))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-3:] == [
        f"baseline {base}: 0 known finding(s) suppressed, 1 stale entr(ies)",
        f"  stale [dormant-suite] nightly/amd/{OLD} (nothing finds it any more: delete the entry)",
        "dspark-audit: OK"]
    strict = cli("--root", str(gone), "--baseline", str(base), "--strict-baseline", "--format", "json")
    assert strict.returncode == 1
    data = json.loads(strict.stdout)
    assert data["findings"] == [] and data["ok"] is False and data["baseline"]["outdated"] == []
    assert data["baseline"]["stale"] == [{"rule": "dormant-suite", "hardware": "amd", "suite": OLD,
                                          "schedule": "nightly"}]
    # a nightly workflow now runs OLD: the entry would hide its next regression, so it fails until rewritten
    # (registered/test_ci_audit_baseline_bypass.py)
    fixed = write_tree(tmp_path / "fixed", old_runs=True)
    proc = cli("--root", str(fixed), "--baseline", str(base))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == ("dspark-audit: FAILED: 1 baseline entr(ies) for suite(s) that run now "
                                            "(rewrite the baseline: --write-baseline FILE)")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_moving_a_known_finding_to_another_line_keeps_it_known(tmp_path):
    base = tmp_path / "baseline.json"
    assert cli("--root", str(write_tree(tmp_path / "before")), "--write-baseline", str(base)).returncode == 0
    moved = write_tree(tmp_path / "moved", pad=7)               # the registration is 7 lines lower
    proc = cli("--root", str(moved), "--baseline", str(base), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["findings"] == [] and data["baseline"]["suppressed"] == 1
    unbaselined = cli("--root", str(moved), "--format", "json")
    assert unbaselined.returncode == 1
    assert json.loads(unbaselined.stdout)["findings"][0]["locations"][0]["line"] == 11


def _finding(rule="dormant-suite", severity="error", suite="s1", line=3, why=None) -> Finding:
    return Finding(rule, severity, f"{rule} {suite}", "amd", suite, "nightly",
                   (Location("test/registered/a.py", line),), why)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_baseline_file_is_sorted_stable_and_keyed_without_lines():
    findings = [_finding(suite="zeta"), _finding(rule="masked-step", suite="alpha"), _finding(suite="alpha"),
                _finding(suite="zeta", line=99)]
    text = baseline_text(findings, "sglang")
    assert text == baseline_text(list(reversed(findings)), "sglang")
    assert text.splitlines() == [
        "{", '  "version": 2,', '  "adapter": "sglang",', '  "entries": [',
        '    {"rule": "dormant-suite", "hardware": "amd", "suite": "alpha", "schedule": "nightly", '
        '"severity": "error"},',
        '    {"rule": "dormant-suite", "hardware": "amd", "suite": "zeta", "schedule": "nightly", "severity": "error",'
        ' "count": 2},',
        '    {"rule": "masked-step", "hardware": "amd", "suite": "alpha", "schedule": "nightly", "severity": "error"}',
        "  ],", '  "run": []', "}"]
    baseline = parse_baseline(text, "b.json")
    now = [_finding(suite="zeta", line=1), _finding(suite="beta")]
    result = compare(now, baseline)
    assert [f.suite for f in result.new] == ["beta"] and [f.suite for f in result.suppressed] == ["zeta"]
    assert result.stale == (("dormant-suite", "amd", "alpha", "nightly"), ("masked-step", "amd", "alpha", "nightly"))
    assert result.grown == ()
    assert parse_baseline(baseline_text([], "dspark"), "e.json").keys == frozenset()


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_one_more_finding_under_a_shared_key_fails_the_whole_key():
    """Masked steps of several workflows can share a key: a third one must not hide behind two known ones."""
    masked = [Finding("masked-step", "error", f"MASKED wf{i}.yml", locations=(Location(f"wf{i}.yml", 4),))
              for i in range(3)]
    baseline = parse_baseline(baseline_text(masked[:2], "sglang"), "b.json")
    assert baseline.counts == {("masked-step", "", "", ""): 2}
    same = compare(list(reversed(masked[:2])), baseline)
    assert same.new == () and len(same.suppressed) == 2 and same.grown == ()
    fewer = compare(masked[:1], baseline)
    assert fewer.new == () and fewer.stale == ()
    more = compare(masked, baseline)
    assert more.new == tuple(masked) and more.suppressed == ()
    assert more.grown == ((("masked-step", "", "", ""), 2, 3),)
    doc = findings_document(more.new, adapter="sglang", tool_version="1", fail_on="error", ok=False,
                            comparison=more, baseline_path="b.json")
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(doc)
    assert doc["baseline"]["grown"] == [{"rule": "masked-step", "hardware": "", "suite": "", "schedule": "",
                                         "known": 2, "found": 3}]


@pytest.mark.parametrize("text, expected", [
    ("{", r"b\.json: not JSON \(line 1"),
    ('{"version": 3, "adapter": "x", "entries": []}', r"version 3 is not supported \(expected 2\)"),
    ('{"version": 1, "adapter": "x", "entries": []}', r"b\.json: version 1 records no severities.*--write-baseline"),
    ('{"version": 2, "entries": []}', r"'adapter' must be a non-empty string"),
    ('{"version": 2, "adapter": "x", "entries": {}}', r"'entries' must be a list"),
    ('{"version": 2, "adapter": "x", "entries": [], "run": {}}', r"'run' must be a list"),
    ('{"version": 2, "adapter": "x", "entries": [], "run": [{"suite": "s"}]}', r"run\[0\] must be an object"),
    ('{"version": 2, "adapter": "x", "entries": [{"rule": "r", "suite": "s"}]}', r"entries\[0\] must be an object"),
    ('{"version": 2, "adapter": "x", "entries": [{"rule": "r", "hardware": "", "suite": "s", "schedule": 3,'
     ' "severity": "error"}]}', r"entries\[0\]"),
    ('{"version": 2, "adapter": "x", "entries": [{"rule": "r", "hardware": "", "suite": "s", "schedule": "",'
     ' "severity": "fatal"}]}', r"entries\[0\]\.severity must be one of"),
    ('{"version": 2, "adapter": "x", "entries": [{"rule": "r", "hardware": "", "suite": "s", "schedule": "",'
     ' "severity": "error", "state": "asleep"}]}', r"entries\[0\]\.state must be one of"),
    ('{"version": 2, "adapter": "x", "entries": [{"rule": "r", "hardware": "", "suite": "s", "schedule": "",'
     ' "severity": "error", "count": 0}]}', r"entries\[0\]\.count must be a positive integer"),
    ('{"version": 2, "adapter": "x", "entries": [{"rule": "r", "hardware": "", "suite": "s", "schedule": "",'
     ' "severity": "note"}, {"rule": "r", "hardware": "", "suite": "s", "schedule": "", "severity": "note"}]}',
     r"entries\[1\] repeats"),
])
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_malformed_baseline_is_refused_naming_the_file(text, expected):
    with pytest.raises(BaselineError, match=expected):
        parse_baseline(text, "b.json")


# ---------------------------------------------------------------- usage errors: one line, exit 2

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_usage_errors_are_one_line_on_stderr_and_exit_2(tmp_path):
    tree = write_tree(tmp_path / "tree")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("[1, 2")
    dspark_base = tmp_path / "dspark.json"
    dspark_base.write_text(baseline_text([], "dspark"))
    cases = [
        (["--fail-on", "fatal"], "--fail-on"),
        (["--repo", "no-slash"], "expected OWNER/NAME"),
        (["--today", "12/01/2026"], "expected a YYYY-MM-DD date"),
        (["--format", "xml"], "--format"),
        (["--strict-baseline"], "--strict-baseline: needs --baseline FILE"),
        (["--baseline", str(dspark_base), "--write-baseline", str(tmp_path / "w.json")], "cannot be combined"),
        (["--baseline", str(tmp_path / "missing.json")], "cannot read"),
        (["--baseline", str(bad_json)], "not JSON"),
        (["--baseline", str(dspark_base)], "written for --adapter dspark, not sglang"),
        (["--output", str(tmp_path / "no" / "such" / "dir" / "out.json")], "--output"),
    ]
    for extra, message in cases:
        proc = cli("--root", str(tree), *extra)
        assert proc.returncode == 2, (extra, proc.stdout, proc.stderr)
        assert len(proc.stderr.splitlines()) == 1 and message in proc.stderr, (extra, proc.stderr)
        assert proc.stderr.startswith("dspark-audit: "), proc.stderr
    missing_root = cli("--root", str(tmp_path / "nowhere"), "--adapter", "sglang")
    assert missing_root.returncode == 2 and len(missing_root.stderr.splitlines()) == 1, missing_root.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_fail_on_and_output_file(tmp_path):
    tree = write_tree(tmp_path / "tree")
    out = tmp_path / "audit.sarif"
    proc = cli("--root", str(tree), "--format", "sarif", "--output", str(out))
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == "dspark-audit: FAILED: 1 new finding(s) at or above error"
    assert json.loads(out.read_text())["runs"][0]["results"][0]["ruleId"] == "dormant-suite"
    assert cli("--root", str(write_tree(tmp_path / "ok", old_runs=True)), "--fail-on", "note").returncode == 0


# ---------------------------------------------------------------- JSON: versioned, schema-checked

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_json_output_validates_against_the_committed_schema(tmp_path):
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    base = tmp_path / "b.json"
    assert cli("--root", str(write_tree(tmp_path / "before")), "--write-baseline", str(base)).returncode == 0
    for extra in ([], ["--baseline", str(base)]):
        doc = json.loads(cli("--root", str(write_tree(tmp_path / "added", with_new=True)), "--format", "json",
                             *extra).stdout)
        validator.validate(doc)
        assert doc["format"] == "dspark-audit-findings" and doc["version"] == schema["properties"]["version"]["const"]
    warning = findings_document([_finding(severity="warning", why="the matrix comes from fromJson(needs.x)"),
                                 _finding(line=0)], adapter="sglang", tool_version="1", fail_on="warning", ok=False)
    validator.validate(warning)
    assert warning["findings"][1]["locations"] == [{"path": "test/registered/a.py", "line": None}]
    assert warning["counts"] == {"error": 1, "warning": 1, "note": 0}
    unexplained = findings_document([_finding(severity="warning")], adapter="sglang", tool_version="1",
                                    fail_on="error", ok=True)
    with pytest.raises(jsonschema.ValidationError):        # a warning must say why it is not proven
        validator.validate(unexplained)
    absolute = json.loads(json.dumps(doc))
    absolute["findings"][0]["locations"][0]["path"] = "/abs/path.py"
    with pytest.raises(jsonschema.ValidationError):        # paths are repo-relative
        validator.validate(absolute)


# ---------------------------------------------------------------- SARIF 2.1.0

def _rules() -> RuleRegistry:
    registry = RuleRegistry()
    registry.register(Rule("dormant-suite", "every registered suite is run by a triggered workflow step",
                           "a suite registered for a nightly run that no workflow starts", "register(...) only",
                           "[dormant-suite] nightly/amd/x"))
    registry.register(Rule("masked-step", "no step can turn a failure green", "continue-on-error hiding a failure",
                           "continue-on-error: true", "[masked-step] ...", "error"))
    return registry


def _sarif_validator() -> jsonschema.Draft4Validator:
    assert hashlib.sha256(SARIF_SCHEMA.read_bytes()).hexdigest() == SARIF_SCHEMA_SHA256, "schema file changed"
    return jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text()),
                                      format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_sarif_of_a_real_finding_set_validates_against_the_oasis_schema(tmp_path):
    validator = _sarif_validator()
    tree = write_tree(tmp_path / "tree", with_new=True)
    proc = cli("--root", str(tree), "--format", "sarif")
    assert proc.returncode == 1, proc.stderr
    log = json.loads(proc.stdout)
    validator.validate(log)
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert {r["ruleId"] for r in run["results"]} == {"dormant-suite"} and len(run["results"]) == 2
    for result in run["results"]:
        rule = rules[result["ruleId"]]
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"] and rule["help"]["text"]
        assert result["level"] == "error"
        where = result["locations"][0]["physicalLocation"]
        assert where["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert (tree / where["artifactLocation"]["uri"]).is_file() and where["region"]["startLine"] == 4
    moved = cli("--root", str(write_tree(tmp_path / "moved", with_new=True, pad=4)), "--format", "sarif")
    prints = lambda lg: sorted(r["partialFingerprints"][FINGERPRINT] for r in lg["runs"][0]["results"])  # noqa: E731
    region = lambda r: r["locations"][0]["physicalLocation"]  # noqa: E731
    moved_log = json.loads(moved.stdout)
    assert prints(moved_log) == prints(log)          # same findings, other lines: same fingerprints
    lines = sorted(region(r)["region"]["startLine"] for r in moved_log["runs"][0]["results"])
    assert lines == [4, 8]
    broken = json.loads(proc.stdout)
    broken["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_sarif_lists_baselined_findings_as_suppressed_only_when_asked(tmp_path):
    """Under a baseline the SARIF log holds the new findings ("new"); with --show-baselined also the
    known ones, each "unchanged" with an external, accepted suppression naming the baseline by its path
    inside the root (never a path of the machine), and the log still validates."""
    validator = _sarif_validator()
    added = write_tree(tmp_path / "added", with_new=True)
    base = added / ".github" / "audit-baseline.json"
    base.parent.mkdir(exist_ok=True)
    assert cli("--root", str(write_tree(tmp_path / "before")), "--write-baseline", str(base)).returncode == 0
    plain = cli("--root", str(added), "--baseline", str(base), "--format", "sarif")
    shown = cli("--root", str(added), "--baseline", str(base), "--format", "sarif", "--show-baselined")
    assert plain.returncode == shown.returncode == 1, plain.stderr + shown.stderr  # the new finding still fails
    plain_results = json.loads(plain.stdout)["runs"][0]["results"]
    log = json.loads(shown.stdout)
    validator.validate(log)
    results = log["runs"][0]["results"]
    assert [(r["baselineState"], "suppressions" in r) for r in plain_results] == [("new", False)]
    assert [(r["baselineState"], "suppressions" in r) for r in results] == [("new", False), ("unchanged", True)]
    assert results[0] == plain_results[0]
    assert results[1]["suppressions"] == [{"kind": "external", "status": "accepted", "justification":
                                           "a known finding in the audit baseline .github/audit-baseline.json"}]
    assert OLD in results[1]["message"]["text"] and NEW in results[0]["message"]["text"]
    outside = tmp_path / "elsewhere" / "known.json"
    outside.parent.mkdir()
    shutil.copy(base, outside)
    far = json.loads(cli("--root", str(added), "--baseline", str(outside), "--format", "sarif",
                         "--show-baselined").stdout)
    assert far["runs"][0]["results"][1]["suppressions"][0]["justification"].endswith(" baseline known.json")
    assert str(tmp_path) not in json.dumps(far)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_sarif_paths_are_relative_to_the_git_repository_when_the_root_is_a_subfolder(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path / "mono")], check=True)
    tree = write_tree(tmp_path / "mono" / "services" / "serving")
    log = json.loads(cli("--root", str(tree), "--format", "sarif").stdout)
    (result,) = log["runs"][0]["results"]
    uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "services/serving/test/registered/amd/test_old_debt.py" and (tmp_path / "mono" / uri).is_file()
    data = json.loads(cli("--root", str(tree), "--format", "json").stdout)
    assert data["findings"][0]["locations"][0]["path"] == "test/registered/amd/test_old_debt.py"  # JSON: root-relative


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_sarif_levels_fallback_locations_and_fingerprints():
    validator = _sarif_validator()
    findings = [_finding(severity="warning", why="a job-level if: on changed paths"),
                _finding(rule="masked-step", severity="note", suite="s2", line=0),
                Finding("masked-step", "error", "no place", "", "wf.yml:job", ""),
                _finding(suite="dup"), _finding(suite="dup", line=8)]
    log = sarif_log(findings, _rules(), tool_version="1", fallback=Location(".github/workflows/pr.yml", 1),
                    baseline_state="new")
    validator.validate(log)
    results = log["runs"][0]["results"]
    assert [r["level"] for r in results] == ["warning", "note", "error", "error", "error"]
    assert results[0]["properties"]["whyUnproven"] == "a job-level if: on changed paths"
    assert "not proven: a job-level if: on changed paths" in results[0]["message"]["text"]
    region = lambda r: r["locations"][0]["physicalLocation"]  # noqa: E731
    assert region(results[1])["region"] == {"startLine": 1}                     # unknown line: line 1
    assert region(results[2])["artifactLocation"]["uri"] == ".github/workflows/pr.yml"   # no location: fallback
    fps = [r["partialFingerprints"][FINGERPRINT] for r in results]
    assert len(set(fps)) == 5 and fps[4] == fps[3] + ":2"
    assert all(r["baselineState"] == "new" for r in results)
    with pytest.raises(KeyError, match="unknown rule 'nope'"):
        sarif_log([_finding(rule="nope")], _rules(), tool_version="1", fallback=Location("a", 1))
    with pytest.raises(ValueError, match="repo-relative"):
        sarif_log([Finding("masked-step", "error", "m", locations=(Location("/abs/x.yml", 2),))], _rules(),
                  tool_version="1", fallback=Location("a", 1))


# ---------------------------------------------------------------- shipping: console script, hook, Action

TORCH_BLOCKER = '''\
import importlib.abc, sys

class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "triton", "numpy"}:
            raise ImportError(f"{name} is not installed here (blocked by the test)")
        return None

sys.meta_path.insert(0, _NoTorch())
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_the_console_script_runs_without_torch(tmp_path):
    scripts = tomllib.loads((REAL_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    installed, _, func = scripts["dspark-audit"].partition(":")
    assert (installed, func) == ("dspark_suite.ci.audit.cli", "main")
    module = installed.removeprefix("dspark_suite.")   # the same module, as the checkout names it
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TORCH_BLOCKER)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(REAL_ROOT)])}
    blocked = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True,
                             env={**os.environ, **env}, timeout=60)
    assert blocked.returncode != 0 and "blocked by the test" in blocked.stderr   # the blocker works
    tree = write_tree(tmp_path / "tree", with_new=True)
    code = f"import sys; from {module} import {func}; sys.exit({func}(['--root', {str(tree)!r}, '--format', 'sarif']))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, **env}, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert len(json.loads(proc.stdout)["runs"][0]["results"]) == 2 and "Traceback" not in proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_pre_commit_hook_points_at_the_console_script():
    hooks = yaml.safe_load((REAL_ROOT / ".pre-commit-hooks.yaml").read_text())
    scripts = tomllib.loads((REAL_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    (hook,) = hooks
    assert hook["id"] == "dspark-audit" and hook["entry"] in scripts
    assert hook["language"] == "python" and hook["pass_filenames"] is False
    files = re.compile(hook["files"])
    for path in (".github/workflows/pr-test.yml", "test/registered/amd/test_x.py", "registered/test_ops.py",
                 "ci/hardware.yaml"):
        assert files.search(path), path
    for path in ("README.md", "impl/kernels/top_k.py", ".github/CODEOWNERS"):
        assert not files.search(path), path
    deps = tomllib.loads((REAL_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if re.match(r"(torch|triton|numpy)\b", d)], deps   # the hook installs these


def _tool(name: str) -> str | None:
    return shutil.which(name) or next((str(p) for p in [Path(sys.executable).parent / name] if p.is_file()), None)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_action_is_composite_pinned_and_passes_zizmor_and_its_caller_actionlint():
    action = yaml.safe_load((REAL_ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert {"adapter", "baseline", "fail-on", "root", "sarif-file", "upload-sarif"} <= set(action["inputs"])
    uses = [s["uses"] for s in action["runs"]["steps"] if "uses" in s]
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", u) for u in uses), uses
    assert any(u.startswith("github/codeql-action/upload-sarif@") for u in uses)
    runs = "\n".join(s.get("run", "") for s in action["runs"]["steps"])
    assert "${{" not in runs                         # inputs reach scripts through env, never spliced in
    assert "dspark-audit" in runs and "--format sarif" in runs
    zizmor, actionlint = _tool("zizmor"), _tool("actionlint")
    assert zizmor and actionlint, "zizmor/actionlint not installed (nox installs them: the `workflows` group)"
    z = subprocess.run([zizmor, "--offline", "--no-progress", "action.yml"], cwd=REAL_ROOT, capture_output=True,
                       text=True, timeout=120)
    assert z.returncode == 0, z.stdout + z.stderr
    a = subprocess.run([actionlint, str(CALLER.relative_to(REAL_ROOT))], cwd=REAL_ROOT, capture_output=True,
                       text=True, timeout=120)
    assert a.returncode == 0, a.stdout + a.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_act_lists_the_audit_job_of_the_sample_caller():
    act = _tool("act")
    if act is None:
        registered_skip("needs-act")
    proc = subprocess.run([act, "-l", "-W", str(CALLER)], cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    job = yaml.safe_load(CALLER.read_text())["jobs"]
    assert list(job) == ["registry-audit"]
    # act prints a job's events in no fixed order ("pull_request,push" or "push,pull_request")
    assert any(row[:2] == ["0", "registry-audit"] and set(row[-1].split(",")) == {"pull_request", "push"}
               for row in rows), proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_readme_shows_the_three_ways_to_use_it():
    readme = (REAL_ROOT / "README.md").read_text()
    section = readme.split("## Use it in your repository", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    text = "\n".join(body for _, body in blocks)
    assert "dspark-audit --write-baseline" in text and "--baseline" in text
    pre_commit = yaml.safe_load(next(body for lang, body in blocks if "hooks:" in body))
    assert pre_commit["repos"][0]["hooks"][0]["id"] == "dspark-audit"
    workflow = yaml.safe_load(next(body for lang, body in blocks if "jobs:" in body))
    steps = next(iter(workflow["jobs"].values()))["steps"]
    action_inputs = set(yaml.safe_load((REAL_ROOT / "action.yml").read_text())["inputs"])
    with_ = next(s["with"] for s in steps if "dspark-suite@" in s.get("uses", ""))
    assert set(with_) <= action_inputs, set(with_) - action_inputs
