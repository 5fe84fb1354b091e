"""nox's reuse flags never delete or install a shared environment (issue 24 §4).

A copy of the noxfile runs in a throw-away directory whose ``.nox/shared-tools`` holds a fake
``bin/python``: it answers the health check, prints what ``-m ruff`` would do, and fails loudly on
``-m pip`` (an install) -- so a session that installs, or deletes the env, cannot pass unseen.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import subprocess
import sys
import warnings

import pytest

from ci.registration import register
from registered.fixture_repo import REAL_ROOT

FAKE_PYTHON = """#!/bin/sh
case "$*" in
  *"-m pip"*) echo "PIP INSTALL ATTEMPTED" >&2; exit 7 ;;
  *"-m ruff"*) echo "fake ruff ran"; exit 0 ;;
esac
exit 0
"""


@functools.lru_cache(maxsize=1)
def _requirements_hash() -> str:
    """The hash the noxfile keys an env by (the copy reads the same pyproject.toml)."""
    spec = importlib.util.spec_from_file_location("dspark_noxfile_reuse", REAL_ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():   # its sessions may already be registered in this process
        warnings.simplefilter("ignore", FutureWarning)
        spec.loader.exec_module(module)
    return module._requirements_hash()


def _project(tmp_path, *, stamp_key_changes: dict | None = None, with_env: bool = True):
    """tmp_path with the real noxfile and pyproject.toml, and (with_env) a shared-tools env whose stamp
    holds the key this noxfile computes, updated by ``stamp_key_changes``."""
    for name in ("noxfile.py", "pyproject.toml"):
        shutil.copy(REAL_ROOT / name, tmp_path / name)
    if not with_env:
        return None
    env = tmp_path / ".nox" / "shared-tools"
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    key = {"system_site": False, "requirements": _requirements_hash(), **(stamp_key_changes or {})}
    (env / "dspark-env.json").write_text(json.dumps({"key": key, "extras": ["lint", "workflows"]}))
    return env


def _nox(tmp_path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nox", *flags, "-s", "lint"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


def _error_lines(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("nox: error:")]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("flags", [["-R"], ["--no-install", "-r"], ["--no-install"]])
def test_nox_started_from_another_interpreter_reuses_the_env_as_is(tmp_path, flags):
    """A stamp written when another interpreter ran nox (the old key held it): nothing deleted, nothing
    installed, the session runs in the env."""
    env = _project(tmp_path, stamp_key_changes={"python": "/elsewhere/bin/python3"})
    proc = _nox(tmp_path, *flags)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fake ruff ran" in proc.stdout + proc.stderr
    assert "PIP INSTALL ATTEMPTED" not in proc.stderr and "rebuilding" not in proc.stderr
    assert (env / "bin" / "python").read_text() == FAKE_PYTHON


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("flags, named", [(["-R"], "-R/--no-install"), (["--no-install"], "-R/--no-install"),
                                          (["-r"], "-r/--reuse-existing-virtualenvs")])
def test_a_changed_key_under_a_reuse_flag_is_one_line_and_exit_2(tmp_path, flags, named):
    env = _project(tmp_path, stamp_key_changes={"requirements": "an older pyproject.toml"})
    before = sorted(p.name for p in env.rglob("*"))
    proc = _nox(tmp_path, *flags)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = _error_lines(proc)
    assert lines == [f"nox: error: .nox/shared-tools: its key changed (requirements); {named} never deletes an "
                     "environment: run without it to rebuild"], proc.stderr
    assert sorted(p.name for p in env.rglob("*")) == before, "the environment was touched"
    assert "PIP INSTALL ATTEMPTED" not in proc.stderr and "fake ruff ran" not in proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_no_install_without_an_env_refuses_instead_of_creating_one(tmp_path):
    _project(tmp_path, with_env=False)
    proc = _nox(tmp_path, "-R")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert _error_lines(proc) == ["nox: error: .nox/shared-tools: does not exist; -R/--no-install never installs: "
                                  "run without it once to create it"], proc.stderr
    assert not (tmp_path / ".nox" / "shared-tools").exists()
