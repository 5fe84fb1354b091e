"""A baseline never hides a regression or a new error, whatever the file or the workflows say.

Each test copies the self-written sglang fixture tree (registered/fixtures/sglang/base: its nightly
workflow runs the suite ``nightly-amd-8-gpu-mi35x-r1`` on a schedule), changes it, and runs the
command line as a user does, against a baseline written by the tool (or edited as a reviewer would
read it):

- a baseline (or durations file) that names a JSON member twice is exit 2, in one line naming the
  file and the name: JSON keeps the last one, so a reviewer and the tool would read different files;
- an entry about the run state of a suite that the same file lists under ``run`` is exit 2 (the
  tool never writes both; read as given, the entry would hide the suite's regression);
- a stale entry about a suite's run state whose suite runs now fails the run (exit 1) until the
  baseline is rewritten: left in, it would hide the suite when it stops running again;
- a masked step is keyed by the suite it runs, whatever its name holds (``rerun: a`` once lost its
  target, so a baselined masked step of one suite hid a new masked step of another);
- a suite is run only by unmasked steps: when its only unmasked run becomes masked it regresses (the
  same masked-step key and count once let the baseline say OK);
- a suite the baseline records as run that now hangs on a repository variable (``if:``, a
  ``continue-on-error`` expression) regresses: an error, not the warning it is without a baseline.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from ci.audit import cli as audit_cli
from ci.registration import register
from registered.fixture_repo import REAL_ROOT

BASE = REAL_ROOT / "registered" / "fixtures" / "sglang" / "base"
R1 = "nightly-amd-8-gpu-mi35x-r1"
R1_CALL = f"--suite {R1} --nightly"


def tree(dest: Path, *, exit_before_r1: bool = False, mask_r1: bool = False, extra: str = "") -> Path:
    """The fixture tree at ``dest``. ``exit_before_r1``: the r1 step ends before the runner (r1 is dormant);
    ``mask_r1``: its failure is ignored (``|| true``); ``extra``: text added to the nightly workflow."""
    shutil.copytree(BASE, dest)
    nightly = dest / ".github" / "workflows" / "nightly.yml"
    text = nightly.read_text()
    assert "cd test\n" in text and R1_CALL + "\n" in text
    if exit_before_r1:
        text = text.replace("cd test\n", "cd test\n          exit 0\n")
    if mask_r1:
        text = text.replace(R1_CALL + "\n", R1_CALL + " || true\n")
    nightly.write_text(text + extra)
    return dest


def audit(root: Path, *args: str) -> tuple[int, str, str]:
    """``dspark-audit --root ROOT --adapter sglang ARGS``: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = audit_cli.main(["--root", str(root), "--adapter", "sglang", *args])
    return code, out.getvalue(), err.getvalue()


def written_baseline(root: Path, path: Path) -> dict:
    code, _out, err = audit(root, "--write-baseline", str(path))
    assert code == 0, err
    return json.loads(path.read_text())


# ---------------------------------------------------------------- B1: a JSON member named twice

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_baseline_naming_a_member_twice_is_exit_2_naming_the_file_and_the_name(tmp_path):
    """``{"suite": "brand-new", ..., "suite": "r1"}`` reads to a reviewer as debt of a new suite, while
    JSON keeps the last member: r1's regression would be suppressed. Refused at any depth."""
    good, bad = tree(tmp_path / "good"), tree(tmp_path / "regressed", exit_before_r1=True)
    base = tmp_path / "baseline.json"
    written_baseline(good, base)
    code, out, _err = audit(bad, "--baseline", str(base))
    assert code == 1 and f"REGRESSED nightly/amd/{R1}" in out          # the control
    entry = ('{"rule": "dormant-suite", "hardware": "amd", "suite": "nightly-amd-8-gpu-mi35x-brand-new", '
             f'"schedule": "nightly", "severity": "error", "state": "dormant", "suite": "{R1}"}}')
    text = base.read_text()
    variants = {
        "entry": text.replace('"entries": [', '"entries": [\n    ' + entry + ",", 1),
        "top": text.rstrip().removesuffix("}") + ',\n  "run": []\n}\n',
        "run item": text.replace('"schedule": "nightly"}', '"schedule": "nightly", "suite": "x"}', 1),
    }
    for name, variant in variants.items():
        dup = tmp_path / f"dup-{name.replace(' ', '-')}.json"
        dup.write_text(variant)
        code, out, err = audit(bad, "--baseline", str(dup))
        repeated = "'run'" if name == "top" else "'suite'"
        assert code == 2 and out == "", (name, code, out[-500:])
        assert err.count("\n") == 1 and str(dup) in err and f"member {repeated} twice" in err, (name, err)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_durations_file_naming_a_member_twice_is_refused():
    """The same reader serves ci/durations.json (and a plan's {node_id: seconds} file): a test measured
    twice is as ambiguous there, and the tool never writes one (``durations_file.dump``)."""
    from ci.registry.durations_file import DurationsError, dump, parse

    one = '{"hardware": {"cpu": {"registered/test_a.py::test_a": 1.0}}}'
    assert parse(one) == {"cpu": {"registered/test_a.py::test_a": 1.0}}
    for text in ('{"hardware": {"cpu": {"registered/test_a.py::test_a": 1.0, "registered/test_a.py::test_a": 90}}}',
                 '{"hardware": {"cpu": {}, "cpu": {"registered/test_a.py::test_a": 1.0}}}',
                 '{"hardware": {}, "hardware": {}}'):
        with pytest.raises(DurationsError) as refused:
            parse(text)
        assert str(refused.value).startswith("ci/durations.json: an object names the member '") and "twice" in str(
            refused.value)
    committed = (REAL_ROOT / "ci" / "durations.json").read_text()
    assert dump(parse(committed)) == committed or parse(dump(parse(committed))) == parse(committed)


# ---------------------------------------------------------------- B4: an entry for a suite listed as run

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_baseline_with_a_run_state_entry_for_a_suite_it_lists_as_run_is_exit_2(tmp_path):
    """The tool never writes both; read as given, the entry would hide the suite's regression (the
    comparison consults ``run`` only for keys without an entry)."""
    good, bad = tree(tmp_path / "good"), tree(tmp_path / "regressed", exit_before_r1=True)
    base = tmp_path / "baseline.json"
    doc = written_baseline(good, base)
    assert {"hardware": "amd", "suite": R1, "schedule": "nightly"} in doc["run"]
    doc["entries"].append({"rule": "dormant-suite", "hardware": "amd", "suite": R1, "schedule": "nightly",
                           "severity": "error", "state": "dormant"})
    base.write_text(json.dumps(doc))
    code, out, err = audit(bad, "--baseline", str(base))
    assert code == 2 and out == "", out[-500:]
    assert err.count("\n") == 1 and str(base) in err, err
    assert f"records 'dormant-suite' dormant for 'nightly/amd/{R1}', which 'run' lists as run" in err, err
    doc["entries"][-1] = {"rule": "masked-step", "hardware": "amd", "suite": R1, "schedule": "nightly",
                          "severity": "error"}   # not about its run state: a run suite may have a masked step too
    base.write_text(json.dumps(doc))
    code, out, err = audit(bad, "--baseline", str(base))
    assert code == 1 and f"REGRESSED nightly/amd/{R1}" in out, err


# ---------------------------------------------------------------- B3: a stale entry of a suite that runs now

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_stale_run_state_entry_of_a_suite_that_runs_now_fails_until_the_baseline_is_rewritten(tmp_path):
    """Baseline written while r1 was dormant; r1 gets fixed. Passing then (stale: "delete the entry")
    left the entry in place, and when r1 broke again the entry suppressed it as known debt. The fixed
    tree now fails (exit 1) whatever --fail-on, naming the entry; the rewritten baseline records r1 as run."""
    dormant, fixed = tree(tmp_path / "dormant", exit_before_r1=True), tree(tmp_path / "fixed")
    old = tmp_path / "old.json"
    doc = written_baseline(dormant, old)
    assert {"rule": "dormant-suite", "hardware": "amd", "suite": R1, "schedule": "nightly", "severity": "error",
            "state": "dormant"} in doc["entries"]
    assert {"hardware": "amd", "suite": R1, "schedule": "nightly"} not in doc["run"]
    code, out, err = audit(fixed, "--baseline", str(old))
    assert code == 1, out[-800:] + err
    lines = out.splitlines()
    assert (f"  outdated [dormant-suite] nightly/amd/{R1}: the baseline knows it as error dormant, and it runs now: "
            "rewrite the baseline with --write-baseline FILE, so that it records the suite as run (left in, the "
            "entry would hide the suite if it stopped running again)") in lines
    assert not any(line.startswith(f"  stale [dormant-suite] nightly/amd/{R1}") for line in lines)
    assert lines[-1].startswith("dspark-audit: FAILED: 1 baseline entr(ies) for suite(s) that run now "
                                "(rewrite the baseline: --write-baseline FILE)"), lines[-1]
    for fail_on in ("warning", "note"):
        assert audit(fixed, "--baseline", str(old), "--fail-on", fail_on)[0] == 1
    code, out, _err = audit(fixed, "--baseline", str(old), "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["findings"] == []
    assert data["baseline"]["outdated"] == [{"rule": "dormant-suite", "hardware": "amd", "suite": R1,
                                             "schedule": "nightly", "was": "error dormant"}]
    assert {"rule": "dormant-suite", "hardware": "amd", "suite": R1, "schedule": "nightly"} in data["baseline"]["stale"]
    import jsonschema
    from ci.audit.json_report import SCHEMA_PATH
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(data)
    # rewritten, the baseline records r1 as run: breaking it again is a regression
    new = tmp_path / "new.json"
    assert {"hardware": "amd", "suite": R1, "schedule": "nightly"} in written_baseline(fixed, new)["run"]
    assert audit(fixed, "--baseline", str(new), "--strict-baseline")[0] == 0
    code, out, _err = audit(tree(tmp_path / "broken-again", exit_before_r1=True), "--baseline", str(new))
    assert code == 1 and f"REGRESSED nightly/amd/{R1}: ran on a schedule in the baseline, now dormant" in out


# ---------------------------------------------------------------- B5: a step name holding ": "

EXTRA_JOB = """  extra:
    runs-on: linux-mi35x-gpu-8
    steps:
      - uses: actions/checkout@v4
      - name: "{name}"
        run: python3 test/run_suite.py --hw amd {call} || true
"""
SMALL_CALL = "--suite stage-b-test-1-gpu-small-amd --auto-partition-id 0 --auto-partition-size 2"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_masked_step_is_keyed_by_its_target_whatever_its_name_holds(tmp_path):
    """The masked-step key was read back out of the message, split at its first ": ": a step named
    ``rerun: a`` lost its target and got the empty key, so a baselined masked step of r1 hid a new masked
    step of another suite. The key now comes from the step's runner calls, matched as data."""
    for name in ("rerun: a", "rerun - a", "a: b: c"):
        tag = "".join(c if c.isalnum() else "-" for c in name)
        old = tree(tmp_path / f"old-{tag}", extra=EXTRA_JOB.format(name=name, call=R1_CALL))
        new = tree(tmp_path / f"new-{tag}", extra=EXTRA_JOB.format(name=name, call=SMALL_CALL))
        base = tmp_path / f"{tag}.json"
        doc = written_baseline(old, base)
        masked = [e for e in doc["entries"] if e["rule"] == "masked-step"]
        assert masked == [{"rule": "masked-step", "hardware": "amd", "suite": R1, "schedule": "nightly",
                           "severity": "error"}], (name, masked)
        code, out, _err = audit(new, "--baseline", str(base), "--format", "json")
        data = json.loads(out)
        new_masked = [f for f in data["findings"] if f["rule"] == "masked-step"]
        assert code == 1 and len(new_masked) == 1, (name, data["findings"])
        assert (new_masked[0]["hardware"], new_masked[0]["suite"], new_masked[0]["schedule"]) == (
            "amd", "stage-b-test-1-gpu-small-amd", "per-commit"), (name, new_masked)
        assert f"MASKED .github/workflows/nightly.yml:extra:{name}: " in new_masked[0]["message"]
        assert new_masked[0]["locations"][0]["path"] == ".github/workflows/nightly.yml"
        assert new_masked[0]["locations"][0]["line"], new_masked
        stale = data["baseline"]["stale"]
        assert {"rule": "masked-step", "hardware": "amd", "suite": R1, "schedule": "nightly"} in stale, stale


# ---------------------------------------------------------------- B6: a suite's only unmasked run becomes masked

@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_suite_whose_runs_are_all_masked_now_regresses(tmp_path):
    """Old tree: r1 runs unmasked (baseline: r1 under run) and in a second, masked step (baseline: one
    masked-step of r1). New tree: the unmasked step gets ``|| true`` and the masked one is deleted: the
    same masked-step key and count, and a masked run used to count as run. A suite is run only by
    unmasked steps (the rule's title; the own audit reads it the same way): r1 regresses to dormant."""
    old = tree(tmp_path / "old", extra=EXTRA_JOB.format(name="rerun r1", call=R1_CALL))
    new = tree(tmp_path / "new", mask_r1=True)
    base = tmp_path / "baseline.json"
    doc = written_baseline(old, base)
    assert {"hardware": "amd", "suite": R1, "schedule": "nightly"} in doc["run"]
    assert [e for e in doc["entries"] if e["suite"] == R1] == [
        {"rule": "masked-step", "hardware": "amd", "suite": R1, "schedule": "nightly", "severity": "error"}]
    code, out, _err = audit(new, "--format", "json")          # without a baseline: masked and dormant
    assert code == 1
    alone = {(f["rule"], f["severity"], f["state"]) for f in json.loads(out)["findings"] if f["suite"] == R1}
    assert alone == {("masked-step", "error", ""), ("dormant-suite", "error", "dormant")}, alone
    dormant = next(f for f in json.loads(out)["findings"] if f["suite"] == R1 and f["rule"] == "dormant-suite")
    assert "(masked)" in dormant["message"], dormant["message"]
    code, out, _err = audit(new, "--baseline", str(base), "--format", "json")
    data = json.loads(out)
    assert code == 1 and [(f["rule"], f["severity"], f["state"], f["suite"]) for f in data["findings"]] == [
        ("dormant-suite", "error", "dormant", R1)], data["findings"]
    assert data["findings"][0]["message"].startswith(
        f"REGRESSED nightly/amd/{R1}: ran on a schedule in the baseline, now dormant: DORMANT")
    assert data["baseline"]["worse"] == [{"rule": "dormant-suite", "hardware": "amd", "suite": R1,
                                          "schedule": "nightly", "was": "run", "now": "error dormant"}]
    assert [f["rule"] for f in data["baseline"]["baselined"] if f["suite"] == R1] == ["masked-step"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_mask_on_a_run_time_value_leaves_the_suite_unproven(tmp_path):
    """``continue-on-error: ${{ ... }}`` may or may not mask the run: the suite may run (a warning, with
    why), not proven dormant; an unmasked step beside it still runs it."""
    root = tree(tmp_path / "tree")
    nightly = root / ".github" / "workflows" / "nightly.yml"
    text = nightly.read_text()
    tolerant = "        continue-on-error: ${{ vars.TOLERANT == 'yes' }}\n"
    nightly.write_text(text.replace("      - name: r1 accuracy\n", "      - name: r1 accuracy\n" + tolerant))
    code, out, _err = audit(root, "--format", "json")
    found = {(f["rule"], f["severity"], f["state"]): f for f in json.loads(out)["findings"] if f["suite"] == R1}
    assert set(found) == {("masked-step", "warning", ""), ("dormant-suite", "warning", "unproven")}, set(found)
    assert "its exit may be masked" in found[("dormant-suite", "warning", "unproven")]["why_unproven"]
    both = tree(tmp_path / "both", extra=EXTRA_JOB.format(name="again", call=R1_CALL).replace(" || true", ""))
    nightly = both / ".github" / "workflows" / "nightly.yml"
    nightly.write_text(nightly.read_text().replace(R1_CALL + "\n", R1_CALL + " || true\n", 1))
    code, out, _err = audit(both, "--format", "json")
    rules = sorted(f["rule"] for f in json.loads(out)["findings"] if f["suite"] == R1)
    assert rules == ["masked-step"], rules


# ---------------------------------------------------------------- B7: run -> unproven under a baseline

GATES = {
    "step if: on a variable": "        if: ${{ vars.RUN_R1 == 'true' }}\n",
    "continue-on-error on a variable": "        continue-on-error: ${{ vars.TOLERANT == 'yes' }}\n",
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("gate", sorted(GATES))
def test_a_suite_the_baseline_knew_as_run_that_now_hangs_on_a_variable_regresses(tmp_path, gate):
    """The env-gated path of the field reports: a change puts r1's step under a repository variable. Without
    a baseline that is a warning (the suite may still run); against a baseline that recorded r1 as run it
    was a warning too, exit 0, and whoever sets the variable switches the nightly off unreviewed. Now it is
    an error naming the value, until the baseline is rewritten (its diff moves r1 out of ``run``)."""
    good = tree(tmp_path / "good")
    base = tmp_path / "baseline.json"
    assert {"hardware": "amd", "suite": R1, "schedule": "nightly"} in written_baseline(good, base)["run"]
    gated = tree(tmp_path / "gated")
    nightly = gated / ".github" / "workflows" / "nightly.yml"
    nightly.write_text(nightly.read_text().replace("      - name: r1 accuracy\n",
                                                   "      - name: r1 accuracy\n" + GATES[gate]))
    code, out, _err = audit(gated, "--format", "json")          # no baseline: it may still run
    states = {(f["rule"], f["severity"], f["state"]) for f in json.loads(out)["findings"] if f["suite"] == R1}
    assert ("dormant-suite", "warning", "unproven") in states, (code, states)
    code, out, _err = audit(gated, "--baseline", str(base), "--format", "json")
    data = json.loads(out)
    [found] = [f for f in data["findings"] if f["suite"] == R1 and f["rule"] == "dormant-suite"]
    assert code == 1 and (found["severity"], found["state"]) == ("error", "unproven"), (code, found)
    assert found["message"].startswith(f"REGRESSED nightly/amd/{R1}: ran on a schedule in the baseline, now unproven")
    assert ("vars.RUN_R1" if "if" in gate else "its exit may be masked") in found["why_unproven"], found
    rewritten = tmp_path / "rewritten.json"
    assert R1 not in {s["suite"] for s in written_baseline(gated, rewritten)["run"]}
    code, _out, _err = audit(gated, "--baseline", str(rewritten))
    assert code == 0                                              # accepted, reviewably, as debt
