"""Two runs in one checkout: a second nox waits for a shared env another installs, then reuses it (or
refuses with one line past its wait); a second run of a job shard refuses to touch the first one's
results; an output path that is a symlink is refused (noxfile module docstring, docs/design.md §8.6).

Real processes: nox on a copy of the noxfile whose ``.nox/shared-tools`` holds a fake ``bin/python``
(its ``pip`` logs each install and waits for a go file), and the suite runner on a fixture repository.
"""
from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from ci.registration import register
from ci.runner.run_lock import hold
from registered.fixture_repo import REAL_ROOT, FixtureRepo

FAKE_PYTHON = """#!/bin/sh
here="$(dirname "$0")/../.."
case "$*" in
  *"-m pip"*) echo "pip $$" >> "$here/pip.log"
              while [ ! -e "$here/go" ]; do sleep 0.05; done; exit 0 ;;
  *"-m ruff"*) echo "fake ruff ran"; exit 0 ;;
esac
exit 0
"""


@functools.lru_cache(maxsize=1)
def _requirements_hash() -> str:
    """The hash the noxfile keys an env by (the copy reads the same pyproject.toml)."""
    spec = importlib.util.spec_from_file_location("dspark_noxfile_locks", REAL_ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():   # its sessions may already be registered in this process
        warnings.simplefilter("ignore", FutureWarning)
        spec.loader.exec_module(module)
    return module._requirements_hash()


def _project(tmp_path: Path) -> Path:
    """The real noxfile and pyproject.toml; a shared-tools env with the right key whose extras are missing."""
    for name in ("noxfile.py", "pyproject.toml"):
        shutil.copy(REAL_ROOT / name, tmp_path / name)
    env = tmp_path / ".nox" / "shared-tools"
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    key = {"system_site": False, "requirements": _requirements_hash()}
    (env / "dspark-env.json").write_text(json.dumps({"key": key, "extras": []}))
    return env


def _lint(tmp_path: Path, name: str, **env: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / f"{name}.log"
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-s", "lint"], cwd=tmp_path, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, env={**os.environ, **env}, start_new_session=True)
    return proc, log


def _until(condition, seconds: float, procs: list[subprocess.Popen], what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            raise AssertionError(what)
        time.sleep(0.05)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_a_second_nox_waits_for_the_env_another_installs_then_reuses_it(tmp_path):
    _project(tmp_path)
    pip_log = tmp_path / ".nox" / "pip.log"
    first, first_log = _lint(tmp_path, "first")
    _until(pip_log.is_file, 60, [first], "the first nox never started its install")
    second, second_log = _lint(tmp_path, "second")
    _until(lambda: "waiting up to" in second_log.read_text(), 30, [first, second],
           "the second nox did not wait for the install in progress")
    (tmp_path / ".nox" / "go").touch()
    assert first.wait(60) == 0, first_log.read_text()
    assert second.wait(60) == 0, second_log.read_text()
    text = second_log.read_text()
    assert "nox: .nox/shared-tools: another nox is installing it; waiting up to 1800 s" in text, text
    assert ".nox/shared-tools: up to date (lint, workflows); nothing installed" in text, text
    assert "fake ruff ran" in text and "rebuilding" not in text
    assert len(pip_log.read_text().splitlines()) == 1, "installed twice"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_a_nox_that_waited_too_long_for_an_env_refuses_with_one_line(tmp_path):
    env = _project(tmp_path)
    (tmp_path / ".nox" / "go").touch()
    fd = os.open(f"{env}.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)          # another nox is installing it
        proc = subprocess.run([sys.executable, "-m", "nox", "-s", "lint"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=60, env={**os.environ, "DSPARK_ENV_LOCK_WAIT_S": "1"})
    finally:
        os.close(fd)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("nox: error:")] == [
        "nox: error: .nox/shared-tools: another nox still installs it after 1 s (DSPARK_ENV_LOCK_WAIT_S); "
        "run again when it has finished"], proc.stderr
    assert not (tmp_path / ".nox" / "pip.log").exists() and "fake ruff ran" not in proc.stdout


QUICK = """
@register(suite="quick", hardware="cpu", schedule="per-commit", est_time=1)
def test_quick():
    pass
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_a_second_run_of_a_job_shard_and_a_symlinked_output_are_refused_with_one_line(tmp_path):
    repo = FixtureRepo(tmp_path / "repo")
    repo.test_file("test_quick.py", QUICK)
    folder = repo.root / "ci-results" / "per-commit_cpu_quick"
    folder.mkdir(parents=True)
    with hold(folder / ".lock-1-of-1", "the first run"):      # another run of the same job shard is in flight
        busy = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/quick", "--workers", "1")
    assert busy.returncode == 2, busy.stdout + busy.stderr
    assert busy.stderr.splitlines() == [
        f"[ci] error: {folder} (job per-commit/cpu/quick shard 1/1) is in use by another run (pid {os.getpid()}); "
        "refusing to mix with or delete its results: run again when it has ended"], busy.stderr
    assert sorted(p.name for p in folder.iterdir()) == [], "the refused run touched the results"

    target = tmp_path / "outside.md"
    target.write_text("not the runner's")
    (folder / "summary-1-of-1.md").symlink_to(target)
    linked = repo.run_module("ci.runner.run_suite", "--job", "per-commit/cpu/quick", "--workers", "1")
    assert linked.returncode == 2, linked.stdout + linked.stderr
    assert linked.stderr.splitlines() == [
        f"[ci] error: {folder / 'summary-1-of-1.md'}: is a symlink; refusing to write through it "
        "(remove it or choose another --results folder)"], linked.stderr
    assert target.read_text() == "not the runner's"
    assert sorted(p.name for p in folder.iterdir()) == ["summary-1-of-1.md"]
