"""Small things a new user notices (issue 24 §8), each checked the way the user meets it.

``python -m impl.sync_policy`` takes no arguments; ``impl.bench --help`` names its real command;
``dir(impl)`` lists the public ops; a smoke benchmark writes outside the source tree; ``e2e --algo
none`` prints no speculative fields; the lint row of docs/ci.md's session table matches pyproject.toml; and
``python -m ci.github.generate --check`` finds actionlint and zizmor in the running interpreter's venv.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile

import pytest

from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo


def _run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REAL_ROOT, capture_output=True, text=True, timeout=300,
                          **kwargs)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=2)
def test_sync_policy_cli_takes_no_arguments():
    proc = _run("-m", "impl.sync_policy", "--bogus")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip() == "python -m impl.sync_policy: error: unrecognized arguments: --bogus"
    proc = _run("-m", "impl.sync_policy", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m impl.sync_policy"), proc.stdout
    assert "decision" not in proc.stdout, "--help printed the table"
    proc = _run("-m", "impl.sync_policy")
    assert proc.returncode == 0 and proc.stdout.startswith("platform  algorithm"), proc.stdout[:200]


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=4)
def test_bench_help_names_the_command_and_errors_are_one_line():
    proc = _run("-m", "impl.bench", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m impl.bench "), proc.stdout[:200]
    proc = _run("-m", "impl.bench", "--only", "bogus")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("python -m impl.bench: error: --only: unknown selection bogus")


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=2)
def test_dir_of_impl_lists_the_public_api_without_importing_torch():
    code = ("import sys, impl, impl.engine; names = dir(impl); "
            "missing = [n for n in impl.__all__ if n not in names] + [n for n in impl.engine.__all__ "
            "if n not in dir(impl.engine)]; print(missing, 'torch' in sys.modules, 'lazy_exports' in names)")
    proc = _run("-c", code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] False True", proc.stdout   # every export listed, nothing imported, nothing lost


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_lazy_export_is_resolved_once():
    """An engine reads ``impl.top_k_renorm`` every step: after the first use it is a plain attribute of
    the package (no module ``__getattr__``, no import machinery), and the same object as the module's."""
    code = ("import impl, impl.kernels.renorm as r; impl.__getattr__ = None; "
            "print(impl.top_k_renorm is r.top_k_renorm)")  # a hook call now would fail: None is not callable
    proc = _run("-c", code)
    assert proc.returncode != 0 and "TypeError" in proc.stderr, "the package must resolve on first use"
    code = ("import impl, impl.kernels.renorm as r; first = impl.top_k_renorm; impl.__getattr__ = None; "
            "print(impl.top_k_renorm is first is r.top_k_renorm, 'top_k_renorm' in vars(impl))")
    proc = _run("-c", code)
    assert proc.returncode == 0 and proc.stdout.strip() == "True True", proc.stdout + proc.stderr


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=2)
def test_smoke_benchmark_results_default_outside_the_source_tree(tmp_path, monkeypatch, capsys):
    import impl.bench.__main__ as bench

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    row = {"op": "top_k_renorm", "shape": "2x8", "rows": 2, "variant": "project", "us": 2.0, "bytes": 64,
           "gbps": 0.03, "frac_of_copy": 0.5, "project_speedup": 1.0, "timer": "wall clock"}
    monkeypatch.setattr(bench, "measure", lambda sweep, device, only: [dict(row), {**row, "variant": "copy"}])
    results = REAL_ROOT / "bench-results"
    before = sorted(p.name for p in results.iterdir()) if results.is_dir() else []
    assert bench.main(["--smoke", "--only", "top_k"]) == 0
    written = list((tmp_path / "dspark-bench-smoke").glob("*/bench.json"))
    assert len(written) == 1, capsys.readouterr().out
    assert f"wrote {written[0]}" in capsys.readouterr().out
    assert (sorted(p.name for p in results.iterdir()) if results.is_dir() else []) == before
    assert bench.default_results_dir("full", "2026-12-01", "NVIDIA H200") == results / "NVIDIA-H200"


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=8)
def test_e2e_without_speculation_prints_no_gamma_draft_or_accept_length():
    proc = _run("-m", "impl.e2e", "--algo", "none", "--steps", "3", "--batch", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = proc.stdout.splitlines()[0]
    assert config.startswith("config: preset=cpu-small algo=none kv=unified"), config
    assert "gamma=" not in proc.stdout and "draft=" not in proc.stdout and "accept length" not in proc.stdout
    assert "lossless: yes" in proc.stdout


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_e2e_speculation_fields_stay_for_dspark():
    from impl.e2e import speculation_fields
    from impl.run_options import RunOptions

    assert speculation_fields(RunOptions.resolve({}, algorithm="dspark", draft="oracle"), 5) == " gamma=5 draft=oracle"
    assert speculation_fields(RunOptions.resolve({}, algorithm="none"), 5) == ""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_readme_lint_row_matches_the_ruff_configuration():
    pyproject = (REAL_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    lint = pyproject.split("[tool.ruff.lint]", 1)[1].split("\n[", 1)[0]
    ruff = {"line-length": int(re.search(r"^line-length = (\d+)", pyproject, re.M)[1]),
            "lint": {"ignore": re.findall(r'"([A-Z]+\d+)"', re.search(r"^ignore = \[(.*?)\]", lint, re.M | re.S)[1])}}
    row = next(line for line in (REAL_ROOT / "docs" / "ci.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `nox -s lint") and "ruff:" in line)   # the session table's row
    ignored = re.search(r"ignored: ([A-Z0-9, ]+)\)", row)
    assert ignored, f"the lint row must list the ignored rules: {row}"
    assert sorted(c.strip() for c in ignored[1].split(",")) == sorted(ruff["lint"]["ignore"]), row
    assert f"at {ruff['line-length']} columns" in row, row
    for code in re.findall(r"\b([A-Z]\d{3})\b off", row):
        assert code in ruff["lint"]["ignore"], f"the README says {code} is off, but ruff checks it"
    if "E501" not in ruff["lint"]["ignore"]:
        assert "(E501) enforced" in row, row


FAKE_TOOL = """#!/bin/sh
echo "$(basename "$0") ran" >> "$FAKE_TOOL_LOG"
exit 0
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_workflows_check_finds_linters_in_the_running_venv_not_only_on_path(tmp_path):
    """A venv whose bin/ holds actionlint and zizmor, run by its own python with a PATH that lacks bin/."""
    repo = FixtureRepo(tmp_path / "repo")
    repo.test_file("test_a.py", """
        @register(suite="unit", hardware="cpu", schedule="per-commit", est_time=1)
        def test_a():
            pass
    """)
    repo.generate_workflows()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    for tool in ("actionlint", "zizmor"):
        (venv / "bin" / tool).write_text(FAKE_TOOL)
        (venv / "bin" / tool).chmod(0o755)
    site = [p for p in sys.path if p.endswith("site-packages")]
    log = tmp_path / "tools.log"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join([str(REAL_ROOT), *site]), "FAKE_TOOL_LOG": str(log),
           "HOME": str(tmp_path)}
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "ci.github.generate", "--check",
                           "--root", str(repo.root)],
                          cwd=REAL_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "not installed" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(log.read_text().split("\n")[:-1]) == ["actionlint ran", "zizmor ran"]


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
