"""SIGTERM to nox and Ctrl-C reach the suite runner, which stops pytest, names the unfinished tests and
leaves nothing behind (docs/design.md §8.6).

Real processes and real signals: ``python -m nox -s suite -- --job ...`` on a throw-away repository whose
``.nox/shared-torch`` is a stand-in that runs this interpreter (so nothing is installed). The sleeping
test writes the pids of the runner, pytest and a child that ignores SIGINT (like a stuck worker or a
spawned rank), and a file where torch's ``pytorch-errorfile-*`` would go; after the signal none of them
may remain.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ci.registration import register
from registered.fixture_repo import PYPROJECT, REAL_ROOT, FixtureRepo

SLEEPY = """
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


@register(suite="sleepy", hardware="cpu", schedule="per-commit", est_time=1)
def test_quick():
    pass


@register(suite="sleepy", hardware="cpu", schedule="per-commit", est_time=1)
def test_sleeps():
    child = subprocess.Popen([sys.executable, "-c",
                              "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(120)"])
    errorfile = Path(tempfile.gettempdir()) / "pytorch-errorfile-fixture.pickle"
    errorfile.write_text("what a failing torch rank leaves")
    Path(__file__).with_name("pids.txt").write_text(f"{os.getppid()} {os.getpid()} {child.pid} {errorfile}")
    time.sleep(120)


@register(suite="sleepy", hardware="cpu", schedule="per-commit", est_time=1)
def test_after():
    pass
"""

JOB = "per-commit/cpu/sleepy"


def _noxfile_module(root: Path):
    spec = importlib.util.spec_from_file_location("dspark_noxfile_signals", root / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():   # its sessions may already be registered in this process
        warnings.simplefilter("ignore", FutureWarning)
        spec.loader.exec_module(module)
    return module


def _repo(tmp_path: Path) -> FixtureRepo:
    """A fixture repository whose shared-torch env is this interpreter, stamped as up to date."""
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.write("pyproject.toml", PYPROJECT + '[project]\nname = "fixture"\nversion = "0"\ndependencies = []\n')
    repo.test_file("test_sleepy.py", SLEEPY)
    nf = _noxfile_module(tmp_path)
    env = tmp_path / ".nox" / "shared-torch"
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    key = {**nf.torch_env_key(), "system_site": nf.GPU_MACHINE, "requirements": nf._requirements_hash()}
    (env / "dspark-env.json").write_text(json.dumps({"key": key, "extras": ["test"]}))
    return repo


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a parent that never reaps counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().count(" ") == 3:
            return path.read_text()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    out, err = proc.communicate()
    raise AssertionError(f"the sleeping test never started:\n{out}\n{err}")


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
@pytest.mark.parametrize("how, expect_rc, name", [("sigterm-to-nox", 143, "SIGTERM"),
                                                  ("ctrl-c-to-the-group", 130, "SIGINT")])
def test_a_signal_to_nox_stops_the_suite_names_the_unfinished_tests_and_leaves_nothing(tmp_path, how, expect_rc,
                                                                                       name):
    repo = _repo(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "nox", "-s", "suite", "--", "--job", JOB, "--workers", "1",
                             "--kill-grace", "5"], cwd=tmp_path, env=repo.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    runner, pytest_pid, child, errorfile = _wait_for(tmp_path / "registered" / "pids.txt", proc, 90).split()
    folder = tmp_path / "ci-results" / "per-commit_cpu_sleepy"
    running = sorted(p.name for p in folder.iterdir())   # streams under temporary names until complete
    assert running == [".lock-1-of-1", ".report-1-of-1.jsonl.partial"], running   # pytest's JUnit comes at its end
    if how == "sigterm-to-nox":
        os.kill(proc.pid, signal.SIGTERM)               # what a CI cancel or `kill` sends to nox alone
    else:
        os.killpg(proc.pid, signal.SIGINT)              # Ctrl-C: the terminal's foreground group (nox + runner)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == expect_rc, out + err
    assert f"[ci] stopped: the runner received {name}; exit {expect_rc}" in out + err, out + err   # nox merges them
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(int(p)) for p in (runner, pytest_pid, child)):
        time.sleep(0.05)
    assert [p for p in (runner, pytest_pid, child) if _alive(int(p))] == [], "left running"
    assert not Path(errorfile).exists() and not Path(errorfile).parent.exists(), "temporary files left behind"
    assert Path(errorfile).parent.name.startswith("dspark-job-")
    assert sorted(p.name for p in folder.iterdir()) == ["durations-1-of-1.json", "junit-1-of-1.xml",
                                                         "report-1-of-1.jsonl", "summary-1-of-1.md"]
    summary = (folder / "summary-1-of-1.md").read_text()
    assert f"**Unfinished** (the runner received {name})" in summary, summary
    assert "- started, no result: `registered/test_sleepy.py::test_sleeps`" in summary, summary
    assert "- not started: `registered/test_sleepy.py::test_after`" in summary, summary
    suite = ET.parse(folder / "junit-1-of-1.xml").getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["ci.stopped"] == f"the runner received {name}"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["test_quick"].find("failure") is None
    assert "did not finish" in cases["test_sleeps"].find("failure").get("message")
    assert "not started" in cases["test_after"].find("skipped").get("message")
    assert cases["job-finished"].find("failure") is not None
