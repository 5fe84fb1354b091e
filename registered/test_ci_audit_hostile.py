"""dspark-audit over a hostile tree (SECURITY.md, docs/audit-exit-codes.md): it reads only regular files
inside the root, within bounds; says so in one line per file; exits with a code that cannot lie; writes
atomically and never through a link; prints nothing that starts a workflow command; and flags self-hosted
jobs a fork can reach (docs/fork-safety.md).

Every tree is written here (sglang-shaped: ``test/registered/`` and ``.github/workflows/``); the
fork-safety workflows are self-written fixtures under registered/fixtures/fork_safety/.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ci.audit import cli as audit_cli
from ci.log_escape import escape_data, log_safe
from ci.registration import register
from ci.safe_yaml import YamlTooLarge, expanded_size, load_yaml, short
from ci.github.matrix import matrix_rows
from ci.github.scan import scan_workflows
from registered.fixture_repo import REAL_ROOT

FORK_FIXTURES = REAL_ROOT / "registered" / "fixtures" / "fork_safety"
SECRET = "SECRET-OUTSIDE-THE-TREE"
EVIL_STEP = "ok\n::warning title=x::pwned\n::add-mask::x\r::error::also"
LIMIT_S, LIMIT_MB = 30, 300
# runs the audit as its own child, so RUSAGE_CHILDREN holds the audit's peak memory and nothing else
LAUNCHER = """
import json, resource, subprocess, sys
p = subprocess.run([sys.executable, "-m", "ci.audit.cli", *sys.argv[1:]], capture_output=True, text=True, timeout=60)
print(json.dumps({"rc": p.returncode, "out": p.stdout, "err": p.stderr,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def _bomb(levels: int = 8) -> str:
    lines = ['        l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, levels):
        lines.append(f"        l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join(lines)


def _workflow(name: str, matrix: str = "", step: str = "run suite", extra: str = "") -> str:
    strategy = f"    strategy:\n      matrix:\n{matrix}\n" if matrix else ""
    return (f"name: {name}\non: pull_request\npermissions: {{}}\njobs:\n  j:\n    runs-on: ubuntu-latest\n{strategy}"
            f"    steps:\n      - name: {json.dumps(step)}\n{extra}"
            "        run: python3 run_suite.py --hw cuda --suite stage-a\n")


def hostile_tree(base: Path) -> Path:
    """A tree with one good workflow and registration, and every kind of file the audit must not read."""
    root, outside = base / "repo", base / "outside"
    outside.mkdir()
    (outside / "w.yml").write_text(f"name: {SECRET}\non: push\njobs: {{}}\n")
    (outside / "test_x.py").write_text(f'register_cuda_ci(est_time=1, suite="{SECRET.lower()}")\n')
    wf, reg = root / ".github" / "workflows", root / "test" / "registered"
    wf.mkdir(parents=True)
    reg.mkdir(parents=True)
    (reg / "test_ok.py").write_text('register_cuda_ci(est_time=60, suite="stage-a")\n')
    (reg / "test_out.py").symlink_to(outside / "test_x.py")
    (reg / "test_zero.py").symlink_to("/dev/zero")
    (reg / "test_gone.py").symlink_to(reg / "missing.py")
    (reg / "test_dir.py").mkdir()
    (reg / "test_latin.py").write_bytes(b'# caf\xe9\nregister_cuda_ci(est_time=1, suite="s")\n')
    (reg / "linked").symlink_to(outside, target_is_directory=True)   # a folder link is not descended
    (root / ".git").mkdir()
    (root / ".git" / "config").symlink_to("/dev/zero")               # read for github.repository: never
    (wf / "ok.yml").write_text(_workflow("ok"))
    (wf / "evil.yml").write_text(_workflow("evil", step=EVIL_STEP, extra="        continue-on-error: true\n"))
    (wf / "out.yml").symlink_to(outside / "w.yml")
    (wf / "zero.yml").symlink_to("/dev/zero")
    (wf / "gone.yml").symlink_to(wf / "missing.yml")
    (wf / "dir.yml").mkdir()
    (wf / "latin.yml").write_bytes(b"name: caf\xe9\non: push\njobs: {}\n")
    (wf / "huge.yml").write_text("# " + "x" * (1100 * 1024) + "\non: push\njobs: {}\n")
    (wf / "bomb.yml").write_text(_workflow("bomb", matrix=_bomb()))
    keys = "\n".join(f"        k{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" for i in range(9))
    (wf / "matrix.yml").write_text(_workflow("matrix", matrix=keys))
    wide = "[" + ", ".join(["github.ref"] * 50_000) + "]"                # an if: no message may print whole
    (wf / "wide.yml").write_text(_workflow("wide", extra=f"        if: {wide}\n        continue-on-error: {wide}\n"))
    return root


def run_audit(*args: str, cwd: Path = REAL_ROOT) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REAL_ROOT)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", LAUNCHER, *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=90)
    result = json.loads(proc.stdout)
    result["seconds"] = time.monotonic() - started
    return result


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    root = hostile_tree(base)
    sarif = base / "out.sarif"
    result = run_audit("--root", str(root), "--adapter", "sglang", "--format", "sarif", "--output", str(sarif))
    result["sarif"] = sarif.read_text() if sarif.is_file() else ""
    return result


def _lines_naming(result: dict, name: str) -> list[str]:
    return [line for line in result["out"].splitlines() if f"{name}:" in line and "] " in line]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_hostile_tree_ends_with_findings_in_bounded_time_and_memory(hostile):
    assert hostile["rc"] == 1, hostile["err"][-2000:]          # findings, not a crash (3) or a usage error (2)
    assert "Traceback" not in hostile["err"] and hostile["err"] == ""
    assert hostile["seconds"] < LIMIT_S and hostile["maxrss_mb"] < LIMIT_MB, (hostile["seconds"], hostile["maxrss_mb"])
    assert json.loads(hostile["sarif"])["runs"][0]["results"]   # the SARIF was written, and whole


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name, reason", [
    ("out.yml", "outside the audited tree"), ("zero.yml", "outside the audited tree"),
    ("gone.yml", "cannot be opened"), ("dir.yml", "a directory"), ("latin.yml", "not UTF-8"),
    ("huge.yml", "-byte cap"), ("bomb.yml", "alias bomb"),
])
def test_each_unreadable_workflow_is_one_unreadable_input_finding(hostile, name, reason):
    lines = _lines_naming(hostile, f".github/workflows/{name}")
    assert len(lines) == 1 and "[unreadable-input]" in lines[0] and reason in lines[0], lines


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name, reason", [
    ("test_out.py", "outside the audited tree"), ("test_zero.py", "outside the audited tree"),
    ("test_gone.py", "cannot be opened"), ("test_dir.py", "a directory"), ("test_latin.py", "not UTF-8"),
])
def test_each_unreadable_registered_file_is_named_in_one_line(hostile, name, reason):
    lines = _lines_naming(hostile, f"test/registered/{name}")
    assert len(lines) == 1 and "[unreadable-registration]" in lines[0] and reason in lines[0], lines


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_nothing_from_outside_the_tree_reaches_the_report_or_the_sarif(hostile):
    for text in (hostile["out"], hostile["sarif"]):
        assert SECRET not in text and SECRET.lower() not in text and "outside/" not in text


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_matrix_over_the_job_cap_is_a_finding_not_a_computation(hostile):
    lines = _lines_naming(hostile, ".github/workflows/matrix.yml")
    assert len(lines) == 1 and "[oversize-matrix]" in lines[0] and "1000000000 combinations" in lines[0]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_messages_show_a_bounded_repr_of_a_huge_value(hostile):
    wide = [line for line in hostile["out"].splitlines() if "wide.yml" in line]
    assert wide and max(len(line) for line in hostile["out"].splitlines()) < 2000


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_no_printed_line_can_start_a_workflow_command(hostile):
    assert "MASKED" in hostile["out"] and "pwned" in hostile["out"]   # the evil step is reported...
    for line in hostile["out"].replace("\r", "\n").split("\n"):
        assert not line.lstrip().startswith("::"), line              # ...but never as a command


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_log_safe_neutralises_every_command_start_and_escape_data_keeps_one_line():
    text = log_safe(f"step {EVIL_STEP}\n  ::set-env name=x::y\nsee ##[add-mask]z\nplain: line :: here")
    lines = text.split("\n")
    assert not any(line.lstrip().startswith("::") for line in lines) and "##[" not in text and "\r" not in text
    assert "%3A%3Awarning title=x::pwned" in text and lines[-1] == "plain: line :: here"
    assert escape_data("50%\r\n::x") == "50%25%0D%0A::x"


# ---------------------------------------------------------------- bounded YAML, in process
@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_alias_bomb_and_recursive_alias_are_refused_quickly():
    started = time.monotonic()
    with pytest.raises(YamlTooLarge, match="alias bomb"):
        load_yaml("m:\n" + _bomb(9).replace("        ", "  "))
    with pytest.raises(YamlTooLarge, match="recursive"):
        load_yaml("a: &a [1, *a]\n")
    with pytest.raises(YamlTooLarge, match="nested deeper"):
        load_yaml("[" * 100 + "]" * 100)
    assert time.monotonic() - started < 2
    assert expanded_size(load_yaml("a: &a [1, 2]\nb: [*a, *a]\n")) == 13   # map + 2 keys, a: 3, b: 1 + 2 x 3
    assert len(short(list(range(10**6)))) <= 120


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_matrix_rows_refuse_to_expand_past_the_cap_but_count_exclude_and_include():
    big = {"strategy": {"matrix": {f"k{i}": list(range(10)) for i in range(9)}}}
    rows, why = matrix_rows(big)
    assert rows == [{"*": rows[0]["*"]}] and "over GitHub's 256-job cap" in why
    trimmed = {"strategy": {"matrix": {"a": list(range(20)), "b": list(range(15)),
                                       "exclude": [{"a": i} for i in range(10)], "include": [{"a": 99}]}}}
    rows, why = matrix_rows(trimmed)                           # 300 - 150 + 1: within the cap
    assert len(rows) == 151 and why is None


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_matrix_include_or_exclude_that_is_not_a_list_is_unknown_not_a_crash():
    """``exclude: 5`` / ``include: true`` (crafted: GitHub rejects them) were TypeErrors, exit 3, found by
    replacing fixture values with ones of the wrong type; ``exclude: ${{ fromJSON(needs.a.outputs.x) }}``
    iterated the UNKNOWN marker the same way. Exclude that cannot be read may drop any row: every row is
    unknown; include that cannot be read keeps the known rows and adds an unknown one."""
    from ci.github.expressions import UNKNOWN

    for exclude in (5, True, "text", {"a": 1}, "${{ fromJSON(needs.a.outputs.x) }}"):
        rows, why = matrix_rows({"strategy": {"matrix": {"a": [1, 2], "exclude": exclude}}})
        assert rows == [{"*": UNKNOWN}] and "matrix.exclude" in why, (exclude, rows, why)
    for include in (7, False, {"a": 3}, "${{ fromJSON(needs.a.outputs.x) }}"):
        rows, why = matrix_rows({"strategy": {"matrix": {"a": [1, 2], "include": include}}})
        assert rows == [{"a": "1"}, {"a": "2"}, {"*": UNKNOWN}] and "matrix.include" in why, (include, rows, why)


# ---------------------------------------------------------------- exit codes and outputs
def _small_tree(base: Path) -> Path:
    root = base / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    (root / "test" / "registered" / "test_ok.py").write_text('register_cuda_ci(est_time=60, suite="stage-a")\n')
    (root / ".github" / "workflows" / "ok.yml").write_text(_workflow("ok"))
    return root


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_output_through_a_symlink_is_exit_2_and_leaves_the_target_alone(tmp_path):
    root = _small_tree(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (root / "out.sarif").symlink_to(victim)
    result = run_audit("--root", str(root), "--adapter", "sglang", "--format", "sarif",
                       "--output", str(root / "out.sarif"))
    assert result["rc"] == 2 and victim.read_text() == "keep me"
    assert result["err"].count("\n") == 1 and "symlink" in result["err"], result["err"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_write_baseline_through_a_symlink_is_exit_2(tmp_path, capsys):
    root = _small_tree(tmp_path)
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    (tmp_path / "base.json").symlink_to(victim)
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang",
                           "--write-baseline", str(tmp_path / "base.json")]) == 2
    err = capsys.readouterr().err
    assert victim.read_text() == "{}" and err.count("\n") == 1 and "symlink" in err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_registered_folder_linked_out_of_the_tree_is_named_not_listed(tmp_path):
    from ci.adapters.sglang import collect_suites

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "test_x.py").write_text(f'register_cuda_ci(est_time=1, suite="{SECRET.lower()}")\n')
    root = tmp_path / "repo"
    (root / "test").mkdir(parents=True)
    (root / "test" / "registered").symlink_to(outside, target_is_directory=True)
    found = collect_suites(root)
    assert found.registrations == [] and found.files == []
    assert found.problems == ["test/registered: a symlink that resolves outside the audited tree (not read): "
                              "its registrations cannot be read"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_baseline_that_links_to_a_device_is_exit_2_unread(tmp_path, capsys):
    root = _small_tree(tmp_path)
    (root / "baseline.json").symlink_to("/dev/zero")
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang", "--baseline", str(root / "baseline.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--baseline" in err and "outside" in err, err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_an_internal_error_is_exit_3_in_one_line_and_the_traceback_only_with_debug(tmp_path, capsys, monkeypatch):
    root = _small_tree(tmp_path)

    def broken(args):
        raise KeyError("a bug in the audit")

    monkeypatch.setattr(audit_cli, "collect_findings", broken)
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: KeyError" in err and "Traceback" not in err
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang", "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_value_error_inside_the_audit_is_exit_3_and_an_input_error_is_exit_2(tmp_path, capsys, monkeypatch):
    """Only the audit's refusals of its input (InputError and its kinds) are exit 2; a ValueError from
    anywhere else is a defect of the audit and reads as one (exit 3), never as the user's mistake."""
    from ci.input_errors import InputError

    root = _small_tree(tmp_path)
    for raised, code, said in ((ValueError("a bug in the audit"), 3, "internal error: ValueError"),
                               (InputError("--root x: not a directory"), 2, "--root x: not a directory")):
        def broken(args, raised=raised):
            raise raised

        monkeypatch.setattr(audit_cli, "collect_findings", broken)
        assert audit_cli.main(["--root", str(root), "--adapter", "sglang"]) == code
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err
    monkeypatch.undo()
    assert audit_cli.main(["--root", str(tmp_path / "missing"), "--adapter", "sglang"]) == 2  # a real refusal
    assert "not a directory" in capsys.readouterr().err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_help_and_docs_state_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        audit_cli.main(["--help"])
    text = capsys.readouterr().out
    doc = (REAL_ROOT / "docs" / "audit-exit-codes.md").read_text()
    for code in ("0", "1", "2", "3"):
        assert f"\n  {code}  " in text and f"| {code} |" in doc
    assert "--debug" in text


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_an_unreadable_test_file_in_this_projects_layout_is_exit_2_naming_it(tmp_path, capsys):
    root = tmp_path / "repo"
    (root / "ci").mkdir(parents=True)
    shutil.copy(REAL_ROOT / "ci" / "hardware.yaml", root / "ci" / "hardware.yaml")
    (root / "registered").mkdir()
    (root / "registered" / "test_zero.py").symlink_to("/dev/zero")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ok.yml").write_text(_workflow("ok"))
    assert audit_cli.main(["--root", str(root), "--adapter", "dspark"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "registered/test_zero.py" in err and "Traceback" not in err, err


def _action_script(step_id: str) -> str:
    action = yaml.safe_load((REAL_ROOT / "action.yml").read_text())
    return next(s for s in action["runs"]["steps"] if s.get("id") == step_id)["run"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_the_actions_install_step_imports_nothing_from_the_audited_checkout(tmp_path):
    """The install step runs in the caller's checkout, the tree being audited. ``python3 -m venv`` and
    ``python -m pip`` put the working directory first on the import path, so a ``venv/`` or ``pip/``
    folder there ran as the step (checked: both wrote their marker). The step, run by real bash and the
    real interpreter in such a checkout (the install itself refused offline and pointed at an empty
    folder, so nothing is fetched), creates the venv and runs none of the checkout's modules."""
    checkout = tmp_path / "checkout"
    for module in ("venv", "pip", "ensurepip"):
        (checkout / module).mkdir(parents=True)
        (checkout / module / "__init__.py").write_text("")
        (checkout / module / "__main__.py").write_text(
            f"open({str(tmp_path / ('RAN-' + module))!r}, 'w').write('the checkout ran')\n")
    (tmp_path / "action").mkdir()
    env = {"PATH": os.environ["PATH"], "RUNNER_TEMP": str(tmp_path), "ACTION_PATH": str(tmp_path / "action"),
           "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HOME": str(tmp_path)}
    proc = subprocess.run([shutil.which("bash"), "-e", "-c", _action_script("install")], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=120)
    ran = sorted(p.name for p in tmp_path.glob("RAN-*"))
    assert ran == [], (ran, proc.stderr[-500:])
    assert (tmp_path / "dspark-audit-venv" / "bin" / "python").exists(), proc.stderr[-500:]
    assert proc.returncode != 0 and "action" in proc.stderr, proc.stderr[-500:]   # pip refused the empty folder


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("code, writes, uploads, step_rc", [
    (0, True, True, 0), (1, True, True, 0),       # clean, findings: upload (1 fails the job after it)
    (2, False, False, 2), (3, False, False, 3),   # usage / internal error: fail now, upload nothing
    (1, False, False, 3),                          # "findings" but no SARIF: a crash, not an upload
])
def test_action_uploads_only_a_sarif_this_run_wrote(tmp_path, code, writes, uploads, step_rc):
    bash = shutil.which("bash")
    bin_dir = tmp_path / "dspark-audit-venv" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "dspark-audit"   # stands in for the audit: writes --output (or not), exits `code`
    write = 'echo {} > "$out"' if writes else ":"
    fake.write_text("#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --output ]; then out=$2; fi; shift; done\n"
                    f"{write}\nexit {code}\n")
    fake.chmod(0o755)
    (tmp_path / "stale.sarif").write_text('{"stale": true}')   # a file already at the path is not this run's
    output = tmp_path / "github_output"
    env = {"PATH": os.environ["PATH"], "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(output),
           "AUDIT_ROOT": ".", "AUDIT_ADAPTER": "auto", "AUDIT_FAIL_ON": "error", "AUDIT_BASELINE": "",
           "AUDIT_REPOSITORY": "", "AUDIT_SARIF": "stale.sarif"}
    proc = subprocess.run([bash, "-e", "-c", _action_script("audit")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=30)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert proc.returncode == step_rc and outputs["exit-code"] == str(code)
    assert (outputs.get("sarif-written") == "true") is uploads
    action = yaml.safe_load((REAL_ROOT / "action.yml").read_text())
    upload = next(s for s in action["runs"]["steps"] if "upload-sarif" in s.get("uses", ""))
    assert "steps.audit.outputs.sarif-written == 'true'" in upload["if"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_workflows_check_runs_zizmor_pedantic_on_github_the_action_and_its_caller(monkeypatch):
    from ci.github import generate as workflows

    seen = []
    monkeypatch.setattr(workflows, "_tool", lambda name, pip: (name, ""))
    monkeypatch.setattr(workflows.subprocess, "run",
                        lambda cmd, **kw: seen.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    assert workflows.zizmor_check(REAL_ROOT, [])[0]
    [cmd] = seen
    assert cmd[cmd.index("--persona") + 1] == "pedantic" and "--offline" in cmd
    assert {str(REAL_ROOT / p) for p in (".github", "action.yml", "docs/examples/dspark-audit-caller.yml")} <= set(cmd)


# ---------------------------------------------------------------- fork-on-self-hosted
def _fork_scan(tmp_path: Path, names: list[str], repository: str | None = "owner/repo"):
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    for name in names:
        shutil.copy(FORK_FIXTURES / name, wf / name)
    from ci.adapters import get_adapter

    adapter = get_adapter("sglang")
    if repository:
        adapter.context = {**adapter.context, "github.repository": repository}
    return [f for f in scan_workflows(tmp_path, adapter).input_findings if f[0] == "fork-on-self-hosted"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_fork_rule_flags_label_only_and_pull_request_target_and_accepts_guards_and_environments(tmp_path):
    found = _fork_scan(tmp_path, ["label-only.yml", "guarded.yml", "environment.yml", "target.yml"])
    flagged = sorted(message.split(":")[0] for _rule, message, _path, _line in found)
    assert flagged == [".github/workflows/label-only.yml", ".github/workflows/target.yml"], found
    assert any("pull_request_target" in m for _r, m, _p, _l in found)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_fork_rule_follows_local_reusable_workflows_to_their_self_hosted_jobs(tmp_path):
    """A pull_request workflow that calls a reusable workflow exposes that workflow's self-hosted jobs:
    flagged on the calling job when the call can run for a fork's push and switches the GPU job on;
    not when the calling job is guarded, or when the input that gates the GPU job keeps its default."""
    found = _fork_scan(tmp_path, ["gpu-callee.yml", "calls-gpu.yml", "calls-guarded.yml", "calls-without-gpu.yml"])
    caller, callee = ".github/workflows/calls-gpu.yml", ".github/workflows/gpu-callee.yml"
    assert [(path, message.split(": runs on")[0]) for _rule, message, path, _line in found] == [
        (caller, f"{caller}:tests -> {callee}:gpu")], found
    assert all(line > 0 for _rule, _message, _path, line in found)  # the calling job's line
    assert "['self-hosted', 'big-gpu-box'] under pull_request" in found[0][1]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_each_call_of_a_reusable_workflow_names_the_runner_it_resolves(tmp_path):
    found = _fork_scan(tmp_path, ["runner-callee.yml", "calls-two-runners.yml"])
    labels = {message.split(" -> ")[0].split(":")[1]: message.split("runner(s) ")[1].split(" under")[0]
              for _rule, message, _path, _line in found}
    assert labels == {"small": "['gpu-box-small']", "large": "['gpu-box-large']"}, found


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_project_workflows_keep_forks_off_the_gpu_runners_and_the_old_gate_is_flagged(tmp_path):
    own = [f for f in scan_workflows(REAL_ROOT, "dspark").input_findings if f[0] == "fork-on-self-hosted"]
    assert own == []
    text = (REAL_ROOT / ".github" / "workflows" / "per-commit.yml").read_text()
    old_if = ("github.event_name != 'pull_request' || contains(github.event.pull_request.labels.*.name, "
              "'run-gpu-ci')")
    doc = yaml.safe_load(text)
    gpu = [k for k, j in doc["jobs"].items() if "gpu" in str(j.get("runs-on"))]
    assert gpu
    for key in gpu:
        doc["jobs"][key]["if"] = old_if                  # the label alone, as before docs/fork-safety.md
    tree = tmp_path / "old"
    (tree / ".github" / "workflows").mkdir(parents=True)
    (tree / "ci").mkdir()
    shutil.copy(REAL_ROOT / "ci" / "hardware.yaml", tree / "ci" / "hardware.yaml")
    (tree / ".github" / "workflows" / "per-commit.yml").write_text(yaml.safe_dump(doc))
    flagged = {m.split(":")[1] for r, m, _p, _l in scan_workflows(tree, "dspark").input_findings
               if r == "fork-on-self-hosted"}
    assert flagged == set(gpu)



@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_call_to_a_reusable_workflow_the_tree_lacks_is_a_broken_workflow(tmp_path):
    """GitHub refuses a workflow whose job calls a local reusable workflow that is missing, lies outside
    .github/workflows/ or out of the tree: none of its jobs start. The audit says so for each call (unknown-
    suite, an error, at the calling job's line) instead of skipping the call, never looks outside the
    tree, and leaves a call to a present workflow alone; the full audit fails on it."""
    root, outside = tmp_path / "repo", tmp_path / "outside"
    wf = root / ".github" / "workflows"
    wf.mkdir(parents=True)
    (root / "ci").mkdir()
    outside.mkdir()
    (outside / "x.yml").write_text("on: workflow_call\njobs: {}\n")
    (root / "ci" / "stage.yml").write_text("on: workflow_call\njobs: {}\n")
    callee = ("on: workflow_call\npermissions: {}\njobs:\n  run:\n    runs-on: ubuntu-latest\n    steps:\n"
              "      - run: python3 run_suite.py --hw cuda --suite stage-a\n")
    (wf / "stage.yml").write_text(callee)
    calls = {"present": "./.github/workflows/stage.yml", "missing": "./.github/workflows/gone.yml",
             "elsewhere": "./ci/stage.yml", "escaping": "./../outside/x.yml"}
    jobs = "".join(f"  {name}:\n    uses: {uses}\n" for name, uses in calls.items())
    (wf / "pr.yml").write_text(f"name: pr\non: pull_request\npermissions: {{}}\njobs:\n{jobs}")
    scan = scan_workflows(root, "sglang")
    broken = {problem.split(" calls ")[0].split("job ")[1]: problem for problem in scan.problems}
    assert sorted(broken) == ["elsewhere", "escaping", "missing"], scan.problems
    assert "not in the audited tree" in broken["missing"]
    assert "directly in .github/workflows/" in broken["elsewhere"]
    assert "a path out of the audited tree" in broken["escaping"]
    lines = (wf / "pr.yml").read_text().splitlines()
    for name, problem in broken.items():
        assert problem.startswith(f".github/workflows/pr.yml:{lines.index(f'  {name}:') + 1}: "), problem
    (root / "test" / "registered").mkdir(parents=True)
    out = subprocess.run([sys.executable, "-m", "ci.audit.cli", "--root", str(root), "--adapter", "sglang",
                          "--format", "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=60)
    assert out.returncode == 1, out.stderr
    found = [f for f in json.loads(out.stdout)["findings"]
             if f["rule"] == "unknown-suite" and " calls " in f["message"]]
    assert len(found) == 3 and {f["severity"] for f in found} == {"error"}, found


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_fork_reachable_call_of_another_repositorys_workflow_is_named_as_a_note(tmp_path):
    """A reusable workflow of another repository is not fetched, so its runners are unknown: the
    fork-reachable call is a note that says so (not an error, not silence); the guarded call and the
    push-only call are not named; the full audit exits 0 on it at the default --fail-on error."""
    found = _fork_scan(tmp_path, ["calls-remote.yml"])
    assert [m.split(": calls")[0] for _r, m, _p, _l in found] == [
        ".github/workflows/calls-remote.yml:shared-gpu-tests -> "
        "example-org/shared-ci/.github/workflows/gpu-tests.yml@v3"], found
    assert "another repository under pull_request" in found[0][1] and found[0][3] > 0
    (tmp_path / "test" / "registered").mkdir(parents=True)
    out = subprocess.run([sys.executable, "-m", "ci.audit.cli", "--root", str(tmp_path), "--adapter", "sglang",
                          "--format", "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    notes = [f for f in json.loads(out.stdout)["findings"] if f["rule"] == "fork-on-self-hosted"]
    assert [(f["severity"], bool(f["why_unproven"])) for f in notes] == [("note", True)], notes


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_script_that_names_the_runner_past_the_read_limit_is_unreadable_input(tmp_path):
    """The shell reader reads a run: script up to MAX_SCRIPT characters. A script longer than that
    whose runner call (here a renamed suite, and a mask) sits past the cut would hide both: it is an
    unreadable-input error instead, at the step; a long script whose runner call comes before the cut
    and nothing after is read as before. Bounded: one subprocess, under LIMIT_S and LIMIT_MB."""
    from ci.github.shell_syntax import MAX_SCRIPT

    filler = "".join(f"echo line {i}\n" for i in range(MAX_SCRIPT // 12 + 10))
    assert len(filler) > MAX_SCRIPT
    steps = {"hidden": filler + "python3 run_suite.py --hw cuda --suite stage-renamed || true\n",
             "early": "python3 run_suite.py --hw cuda --suite stage-a\n" + filler}
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    for name, script in steps.items():
        doc = {"name": name, "on": "pull_request", "permissions": {},
               "jobs": {"j": {"runs-on": "ubuntu-latest", "steps": [{"name": "run suite", "run": script}]}}}
        (root / ".github" / "workflows" / f"{name}.yml").write_text(json.dumps(doc))
    scan = scan_workflows(root, "sglang")
    unreadable = [(path, message) for rule, message, path, _line in scan.input_findings if rule == "unreadable-input"]
    assert [path for path, _ in unreadable] == [".github/workflows/hidden.yml"], unreadable
    assert f"past the first {MAX_SCRIPT}" in unreadable[0][1]
    assert {r.target.split("/")[-1] for r in scan.refs if r.workflow.endswith("early.yml")} == {"stage-a"}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", LAUNCHER, "--root", str(root), "--adapter", "sglang", "--format",
                          "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=120)
    got = json.loads(out.stdout)
    assert got["rc"] == 1 and time.monotonic() - started < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, got["err"]
    assert any(f["rule"] == "unreadable-input" and "hidden.yml" in f["message"]
               for f in json.loads(got["out"])["findings"])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_a_workflow_of_thousands_of_jobs_is_audited_in_bounded_time(tmp_path):
    """One workflow under the 1 MiB cap holding 17,500 chained self-hosted jobs (each a fork warning):
    per job, the audit once looked at every job of the workflow and every finding already made, so
    this file took over two minutes; both are now once per workflow and a set lookup. One subprocess,
    under LIMIT_S and LIMIT_MB, every job judged."""
    n = 17500
    lines = ["on: pull_request", "permissions: {}", "jobs:", "  a0: {runs-on: ubuntu-latest, steps: [{run: e}]}"]
    lines += [f"  a{i}: {{runs-on: gpu, needs: a{i - 1}, steps: [{{run: e}}]}}" for i in range(1, n)]
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    (root / ".github" / "workflows" / "w.yml").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", LAUNCHER, "--root", str(root), "--adapter", "sglang", "--format",
                          "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=120)
    got = json.loads(out.stdout)
    took = time.monotonic() - started
    assert got["rc"] == 0 and took < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (took, got["maxrss_mb"], got["err"])
    findings = json.loads(got["out"])["findings"]
    assert len(findings) == n - 1 and {f["rule"] for f in findings} == {"fork-on-self-hosted"}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_json_nested_past_the_decoder_is_bad_input_not_a_defect(tmp_path, capsys):
    """A crafted baseline, durations file or fromJSON() argument nested 100,000 deep made Python's
    decoder raise RecursionError, which the audit reported as its own defect (exit 3). Each is now the
    input's fault: the baseline and the own tree's durations exit 2 in one line naming the file, and a
    workflow expression that cannot be decoded is unknown (the audit goes on)."""
    from registered.fixture_repo import FixtureRepo

    deep = "[" * 100_000 + "]" * 100_000
    root = _small_tree(tmp_path)
    (tmp_path / "baseline.json").write_text('{"version": 2, "adapter": "sglang", "entries": ' + deep + "}")
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang", "--baseline",
                           str(tmp_path / "baseline.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "baseline.json" in err and "nested too deeply" in err, err

    own = FixtureRepo(tmp_path / "own")
    own.test_file("test_a.py", """
        @register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
        def test_a(): pass
    """)
    own.generate_workflows()
    (own.root / "ci" / "durations.json").write_text(deep)
    assert audit_cli.main(["--root", str(own.root), "--adapter", "dspark"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "durations.json" in err and "nested too deeply" in err, err

    expr = "${{ fromJSON('" + "[" * 5000 + "]" * 5000 + "') }}"
    wf = (f"name: deep\non: pull_request\npermissions: {{}}\njobs:\n  j:\n    runs-on: ubuntu-latest\n"
          f"    if: {json.dumps(expr)}\n    steps:\n      - run: python3 run_suite.py --hw cuda --suite stage-a\n")
    (root / ".github" / "workflows" / "deep.yml").write_text(wf)
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang"]) in (0, 1)
    assert "internal error" not in capsys.readouterr().err


def _one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_crafted_expressions_are_unknown_within_bounds(tmp_path):
    """``if:`` expressions built to break the reader: 5,000 nested parentheses, 20,000 ``!``, 3,000
    nested calls (each exhausted Python's recursion: exit 3), and a context path of 80,000 members
    (a quadratic prefix search: 37 s). Deeper than MAX_NESTING is an ExpressionError, read as an
    unknown condition; a path past MAX_PATH_PARTS is unknown at once. One subprocess, within bounds,
    every step still judged (its suite is unknown-suite)."""
    from ci.github.expressions import MAX_NESTING, ExpressionError, evaluate

    shapes = {"parens": "(" * 5000 + "true" + ")" * 5000, "nots": "!" * 20000 + "true",
              "calls": "format(" * 3000 + "'x'" + ")" * 3000, "members": "github" + "['a']" * 80000}
    for name in ("parens", "nots", "calls"):
        with pytest.raises(ExpressionError, match=f"nested deeper than {MAX_NESTING}"):
            evaluate(shapes[name], {})
    depth = MAX_NESTING - 1   # parentheses inside the expression's own level: the deepest it reads
    assert evaluate("(" * depth + "true" + ")" * depth, {}) is True and evaluate("!" * depth + "false", {}) is True
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    for name, expr in shapes.items():
        doc = {"name": name, "on": "pull_request", "permissions": {},
               "jobs": {"j": {"runs-on": "ubuntu-latest", "if": "${{ " + expr + " }}",
                              "steps": [{"run": f"python3 run_suite.py --hw cuda --suite stage-{name}"}]}}}
        (root / ".github" / "workflows" / f"{name}.yml").write_text(json.dumps(doc))
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", LAUNCHER, "--root", str(root), "--adapter", "sglang", "--format",
                          "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=120)
    got = json.loads(out.stdout)
    took = time.monotonic() - started
    assert got["rc"] == 1 and took < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (took, got["err"])
    unknown = {f["message"].split("--suite ")[1].split(",")[0] for f in json.loads(got["out"])["findings"]
               if f["rule"] == "unknown-suite"}
    assert unknown == {f"stage-{name}" for name in shapes}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_a_registered_file_of_twenty_thousand_calls_is_read_in_bounded_time_and_memory(tmp_path):
    """A 1 MB registered file (under MAX_SOURCE_BYTES) of 20,000 one-line registrations, each its own
    suite: the reader once copied the rest of the file per call and the typo check compared every pair
    of suite names (past a minute at this size); the calls are now read in one forward pass, one tree
    at a time, and the typo check compares only one-file suites with bigger ones of similar length.
    One subprocess under LIMIT_S and LIMIT_MB; every registration is read, every suite reported unrun."""
    from ci.safe_files import MAX_SOURCE_BYTES

    n = 20_000
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    text = "".join(f"register_cuda_ci(est_time=60, suite='stage-{i}')\n" for i in range(n))
    assert MAX_SOURCE_BYTES * 0.9 < len(text) < MAX_SOURCE_BYTES
    (root / "test" / "registered" / "test_many.py").write_text(text)
    (root / ".github" / "workflows" / "ok.yml").write_text(_workflow("ok"))
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", LAUNCHER, "--root", str(root), "--adapter", "sglang"],
                         capture_output=True, text=True, cwd=REAL_ROOT, timeout=240)
    got = json.loads(out.stdout)
    took = time.monotonic() - started
    assert got["rc"] == 1 and took < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (took, got["maxrss_mb"], got["err"])
    dormant = [line for line in got["out"].splitlines() if line.strip().startswith("error   [dormant-suite]")]
    assert len(dormant) == n and "[unknown-suite]" in got["out"]   # ok.yml runs stage-a, which none registers


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_the_typo_check_compares_only_candidate_pairs_and_bounds_them(monkeypatch):
    """near_names compares a one-registration suite only with bigger suites of its schedule and
    hardware whose names are at most MAX_DISTANCE longer or shorter; past MAX_COMPARISONS candidate
    pairs it raises TooManyNames (the rule then says so in a note) instead of running for hours;
    the banded distance agrees with the full one."""
    import ci.registry.suite_names as names

    calls = []
    real = names.edit_distance
    monkeypatch.setattr(names, "edit_distance", lambda a, b, limit=2: calls.append((a, b)) or real(a, b, limit))
    sizes = {f"per-commit/cuda/stage-{i}": 1 for i in range(20_000)}
    sizes.update({"per-commit/cuda/kernels": 5, "per-commit/cuda/kernelz-long-name": 3, "nightly/cuda/kernel": 1})
    sizes["per-commit/cuda/kernel"] = 1
    got = names.near_names(sizes)
    assert got == [("per-commit/cuda/kernel", "per-commit/cuda/kernels", 1)], got
    assert len(calls) < 20_000 * 2, len(calls)   # not every pair (2e8): only names of close length
    monkeypatch.setattr(names, "MAX_COMPARISONS", 1000)
    big = {f"per-commit/cuda/s{i:05d}": 1 for i in range(2000)} | {"per-commit/cuda/s0000x": 2}
    with pytest.raises(names.TooManyNames):
        names.near_names(big | {f"per-commit/cuda/t{i:05d}": 2 for i in range(10)})
    assert real("kernles", "kernels") == 2 and real("a" * 5000, "a" * 4999 + "b") == 1
    assert real("abc", "xyz", 1) == 2 and real("", "ab") == 2 and real("flaw", "lawn") == 2


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_a_crafted_registered_file_is_capped_where_its_syntax_tree_would_exhaust_memory(tmp_path):
    """The audit parses a registered test file whole; Python's tree of 1 MiB of source peaks near
    200 MB, so such files are capped at MAX_SOURCE_BYTES (no test file comes near): just under the
    cap, 10,500 registered tests are read within LIMIT_MB; just over it, the file is an
    unreadable-registration error naming the cap, never parsed."""
    from ci.safe_files import MAX_SOURCE_BYTES
    from registered.fixture_repo import FixtureRepo

    def tests(count: int) -> str:
        return "from ci.registration import register\n\n" + "".join(
            f'@register(suite="s{i}", hardware="cpu", schedule="per-commit", est_time=1)\ndef test_{i}(): pass\n\n'
            for i in range(count))
    under = tests(10_500)
    assert MAX_SOURCE_BYTES * 0.85 < len(under) < MAX_SOURCE_BYTES
    for name, text, over in (("under", under, False), ("over", tests(14_000), True)):
        repo = FixtureRepo(tmp_path / name)
        repo.write("registered/test_many.py", text)
        (repo.root / ".github" / "workflows").mkdir(parents=True)
        shutil.copy(REAL_ROOT / ".github" / "workflows" / "per-commit.yml", repo.root / ".github" / "workflows")
        out = subprocess.run([sys.executable, "-c", LAUNCHER, "--root", str(repo.root), "--adapter", "dspark"],
                             capture_output=True, text=True, cwd=REAL_ROOT, timeout=240)
        got = json.loads(out.stdout)
        assert got["maxrss_mb"] < LIMIT_MB and got["rc"] in (1, 2), (name, got["maxrss_mb"], got["err"])
        capped = "over the 1048576-byte cap" in got["out"] + got["err"]
        assert capped == over, (name, got["out"][-2000:], got["err"])


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_huge_value_in_a_baseline_or_durations_file_is_named_in_a_short_line(tmp_path, capsys):
    """A baseline entry or a durations key of megabytes: the refusal itself quotes at most a short
    repr of it (messages never format unbounded structures; the CLI's 500-character cut is the last
    guard, not the first), and the command says so in one line, exit 2."""
    from ci.audit.baseline import BaselineError, parse_baseline
    from ci.registry.durations_file import DurationsError, parse

    big = "x" * 3_000_000
    for entries in ([big], [{"rule": big}], [{"rule": "r", "hardware": "", "suite": "", "schedule": "",
                                              "severity": big}]):
        text = json.dumps({"version": 2, "adapter": "sglang", "entries": entries})
        with pytest.raises(BaselineError) as refused:
            parse_baseline(text, "--baseline b.json")
        assert "entries[0]" in str(refused.value) and len(str(refused.value)) < 1000, len(str(refused.value))
    with pytest.raises(DurationsError) as refused:
        parse(json.dumps({"hardware": {"cpu": {big: -1}}}))
    assert len(str(refused.value)) < 1000, len(str(refused.value))
    root = _small_tree(tmp_path)
    (tmp_path / "baseline.json").write_text(json.dumps({"version": 2, "adapter": "sglang", "entries": [big]}))
    assert audit_cli.main(["--root", str(root), "--adapter", "sglang", "--baseline",
                           str(tmp_path / "baseline.json")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "entries[0]" in err and len(err) < 1000


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_finding_quoting_a_crafted_value_stays_readable_in_every_format(tmp_path):
    """A registration whose suite name is 500,000 characters (nothing runs it: dormant-suite): the
    finding quotes the name, so its message is cut at MAX_MESSAGE, the same in JSON and SARIF (the
    tables still carry the name; the output stays bounded by the 1 MiB input)."""
    from ci.audit.report import MAX_MESSAGE

    root = _small_tree(tmp_path)
    (root / "test" / "registered" / "test_big.py").write_text(
        f"register_cuda_ci(est_time=60, suite='{'x' * 500_000}')\n")
    for fmt in ("json", "sarif"):
        out = subprocess.run([sys.executable, "-m", "ci.audit.cli", "--root", str(root), "--adapter", "sglang",
                              "--format", fmt], capture_output=True, text=True, cwd=REAL_ROOT, timeout=60)
        assert out.returncode == 1, out.stderr
        doc = json.loads(out.stdout)
        messages = ([f["message"] for f in doc["findings"]] if fmt == "json"
                    else [r["message"]["text"] for r in doc["runs"][0]["results"]])
        big = [m for m in messages if "xxxxxxxx" in m]
        assert big and all(len(m) <= MAX_MESSAGE + 200 for m in big), [len(m) for m in big]
        assert len(out.stdout) < 4 * 1024 * 1024


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_partition_count_no_matrix_could_hold_is_named_not_counted(tmp_path):
    """``--auto-partition-size 999999999999`` in a step: the partition check counted every partition
    (it ran past any bound); past 256 (a GitHub matrix's most jobs) the step is unresolved, said in
    one warning, and the audit ends within bounds."""
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    (root / "test" / "registered" / "test_a.py").write_text("register_cuda_ci(est_time=60, suite='stage-a')\n")
    (root / ".github" / "workflows" / "w.yml").write_text(_workflow(
        "w", step="run suite").replace("--suite stage-a", "--suite stage-a --auto-partition-id 0 "
                                       "--auto-partition-size 999999999999"))
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", LAUNCHER, "--root", str(root), "--adapter", "sglang", "--format",
                          "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=120)
    got = json.loads(out.stdout)
    assert got["rc"] == 0 and time.monotonic() - started < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, got["err"]
    unresolved = [f["message"] for f in json.loads(got["out"])["findings"] if f["rule"] == "unresolved-step"]
    assert len(unresolved) == 1 and "at most 256 partitions" in unresolved[0], unresolved


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_shell_or_run_default_that_is_not_text_is_read_conservatively(tmp_path):
    """``shell: 7`` on a step and ``defaults: {run: 5}`` on a job were AttributeErrors: exit 3 (found by
    mutating the sglang fixtures). A non-string shell is now read as its text, a custom shell without
    ``-e``: a runner call followed by another command counts as masked (never a pass); a non-mapping
    ``defaults: run:`` is ignored. The audit exits 1 (the mask is a finding), not 3."""
    script = "python3 run_suite.py --hw cuda --suite stage-a\necho done\n"
    jobs = {"numeric": {"runs-on": "ubuntu-latest", "steps": [{"name": "run suite", "shell": 7, "run": script}]},
            "listed": {"runs-on": "ubuntu-latest", "defaults": {"run": {"shell": ["bash", "-e"]}},
                       "steps": [{"name": "run suite", "run": script}]},
            "scalar-defaults": {"runs-on": "ubuntu-latest", "defaults": {"run": 5},
                                "steps": [{"name": "run suite", "run": script}]}}
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    doc = {"name": "w", "on": "pull_request", "permissions": {}, "jobs": jobs}
    (root / ".github" / "workflows" / "w.yml").write_text(json.dumps(doc))
    scan = scan_workflows(root, "sglang")
    masked = {m.split(":")[1] for m in scan.masked}
    assert masked == {"numeric", "listed"}, scan.masked  # the default bash -e of "scalar-defaults" masks nothing
    out = subprocess.run([sys.executable, "-m", "ci.audit.cli", "--root", str(root), "--adapter", "sglang",
                          "--format", "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=120)
    assert out.returncode == 1 and "internal error" not in out.stderr, out.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_a_list_or_scalar_where_a_workflow_mapping_belongs_is_read_as_empty(tmp_path):
    """Found by mutating the sglang fixtures, each an exit 3 before: a job's ``steps: 5`` (the $GITHUB_ENV
    scan iterated it), a reusable workflow's ``workflow_call: inputs: text``, and a local composite
    action's ``inputs: [list]`` and ``runs: steps: 5``. Each reads as empty; the audit still sees the
    runner call beside them and exits 1 (its finding), not 3."""
    root = tmp_path / "repo"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "actions" / "odd").mkdir(parents=True)
    (root / "test" / "registered").mkdir(parents=True)
    call = "python3 run_suite.py --hw cuda --suite stage-renamed\n"
    caller = {"name": "caller", "on": "pull_request", "permissions": {}, "jobs": {
        "broken": {"runs-on": "ubuntu-latest", "steps": 5},
        "composite": {"runs-on": "ubuntu-latest", "steps": [{"uses": "./.github/actions/odd"}, {"run": call}]},
        "reuse": {"uses": "./.github/workflows/callee.yml"}}}
    callee = {"name": "callee", "on": {"workflow_call": {"inputs": "text"}}, "permissions": {},
              "jobs": {"j": {"runs-on": "ubuntu-latest", "steps": [{"run": call}]}}}
    action = {"name": "odd", "inputs": ["a", "b"], "runs": {"using": "composite", "steps": 5}}
    (root / ".github" / "workflows" / "caller.yml").write_text(json.dumps(caller))
    (root / ".github" / "workflows" / "callee.yml").write_text(json.dumps(callee))
    (root / ".github" / "actions" / "odd" / "action.yml").write_text(json.dumps(action))
    out = subprocess.run([sys.executable, "-m", "ci.audit.cli", "--root", str(root), "--adapter", "sglang",
                          "--format", "json"], capture_output=True, text=True, cwd=REAL_ROOT, timeout=120)
    assert out.returncode == 1 and "internal error" not in out.stderr, out.stderr
    findings = json.loads(out.stdout)["findings"]
    assert any("stage-renamed" in f["message"] for f in findings), findings
