"""``pytest --ci-job ID`` typed at the repository root, exactly as README.md and docs/contributing.md show it.

No path and no ``-p`` on the command line: the root ``conftest.py`` must load the registry
plugin before pytest parses ``--ci-job``. Each test runs the ``pytest`` program next to this
interpreter in a subprocess (no torch is imported by the fixture's tests).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

PYTEST = Path(sys.executable).with_name("pytest")
PASSING = '''\
@register(suite="root-cmd", hardware="cpu", schedule="per-commit", est_time=1)
def test_runs():
    assert sum(range(4)) == 6


@register(suite="other", hardware="cpu", schedule="per-commit", est_time=1)
def test_not_in_the_job():
    raise AssertionError("a test of another job ran")
'''


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    program = [str(PYTEST)] if PYTEST.is_file() else [sys.executable, "-m", "pytest"]
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY"}
    env["PYTHONPATH"] = os.pathsep.join([str(REAL_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run([*program, "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _fixture(tmp_path: Path) -> FixtureRepo:
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    shutil.copy(REAL_ROOT / "conftest.py", tmp_path / "conftest.py")     # the real root conftest, nothing else
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["registered"]\n'
                                 'addopts = "-ra --strict-markers"\n')
    repo.test_file("test_root.py", PASSING)
    return repo


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_documented_ci_job_command_runs_the_job_from_the_root(tmp_path):
    _fixture(tmp_path)
    proc = _pytest(tmp_path, "--ci-job", "per-commit/cpu/root-cmd")
    out = proc.stdout + proc.stderr
    assert "unrecognized arguments" not in out, out
    assert proc.returncode == 0, out
    assert "1 passed" in proc.stdout and "accounting OK: 1 passed" in proc.stdout, out
    proc = _pytest(tmp_path, "--ci-job", "per-commit/cpu/nope")      # a wrong id is still a usage error
    assert proc.returncode == 4 and "per-commit/cpu/nope" in proc.stdout + proc.stderr
