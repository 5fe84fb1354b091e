"""noxfile: arguments routed per session when several are named; one shared env keyed by its pins."""
from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ci.registration import register
from registered.fixture_repo import REAL_ROOT


@functools.lru_cache(maxsize=1)
def _noxfile():
    spec = importlib.util.spec_from_file_location("dspark_noxfile", REAL_ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Refused(Exception):
    pass


def _session(name: str, posargs: list[str], named: list[str] | None):
    def error(message):
        raise Refused(message)
    runner = SimpleNamespace(global_config=SimpleNamespace(sessions=named))
    return SimpleNamespace(name=name, posargs=posargs, _runner=runner, error=error)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("named, posargs, expect", [
    (["audit", "workflows"], ["--check"], {"audit": [], "workflows": ["--check"]}),
    (["audit", "workflows"], ["--today", "2026-12-01", "--check"],
     {"audit": ["--today", "2026-12-01"], "workflows": ["--check"]}),
    (["workflows", "suite"], ["--check", "--group", "per-commit/cpu", "--shard", "1/3"],
     {"workflows": ["--check"], "suite": ["--group", "per-commit/cpu", "--shard", "1/3"]}),
    (["lint", "pr"], ["--hardware=cpu"], {"lint": [], "pr": ["--hardware=cpu"]}),
    (None, ["--job", "x"], {"suite": ["--job", "x"]}),            # one session: everything
])
def test_posargs_are_routed_to_the_sessions_that_take_them(named, posargs, expect):
    nf = _noxfile()
    for name, args in expect.items():
        assert nf.session_args(_session(name, posargs, named)) == args, name


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name, named, posargs, words", [
    ("audit", None, ["--check"], "unknown argument(s) ['--check']"),
    ("audit", ["audit", "workflows"], ["--bogus"], "accepted by none of the sessions"),
    ("nightly_mi35x", None, ["--emulat"], "unknown argument(s) ['--emulat']"),
])
def test_arguments_no_session_takes_are_refused(name, named, posargs, words):
    with pytest.raises(Refused, match=re.escape(words)):
        _noxfile().session_args(_session(name, posargs, named))


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
def test_refusals_happen_before_any_install(tmp_path):
    # a copy of the noxfile in an empty directory: any install attempt would fail loudly
    (tmp_path / "noxfile.py").write_text((REAL_ROOT / "noxfile.py").read_text())
    proc = subprocess.run([sys.executable, "-m", "nox", "-s", "audit", "--", "--bogus"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "unknown argument(s) ['--bogus']" in proc.stderr, proc.stderr
    assert not (tmp_path / ".nox").exists(), "refused before creating an environment"


FAKE_PYTHON = """#!/bin/sh
case "$*" in
  *"-m pip"*) exit 0 ;;
  *"-m nox"*) echo "pr: fake totals"; exit $FAKE_NOX_EXIT ;;
  *) echo "Python 3.fake" ;;
esac
"""


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
@pytest.mark.parametrize("nox_exit, expect", [(0, 0), (5, 1), (1, 1)])
def test_ci_entry_point_fails_on_any_nonzero_nox_exit(tmp_path, nox_exit, expect):
    from ci.registry.catalog import load_catalog

    assert f'NOX_PIN="nox=={load_catalog(REAL_ROOT).nox}"' in (REAL_ROOT / ".ci" / "run").read_text()
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "FAKE_NOX_EXIT": str(nox_exit), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(["bash", str(REAL_ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == expect, proc.stdout + proc.stderr
    assert "pr: fake totals" in proc.stdout.splitlines()[-1 if expect == 0 else -2]
