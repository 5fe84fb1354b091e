"""Tiny throw-away repositories for testing the registry tooling (used by registered/test_ci_*.py).

A fixture repo has the real hardware catalog and noxfile, a torch-free ``registered/skips.py``,
empty ``impl``/``reference`` packages and whatever test files a test writes. The
ci code runs against it through ``--root``; subprocesses get the real repository
on PYTHONPATH so that fixture tests can ``from ci.registration import register``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REAL_ROOT = Path(__file__).resolve().parent.parent

SKIP_HELPERS = '''
def skip_message(key):
    return f"[registered:{key}] {SKIP_REASONS[key]['text']}"


def registered_skip(key):
    pytest.skip(skip_message(key))


def requires_gpu():
    return pytest.mark.skipif(True, reason=skip_message("needs-gpu"))
'''


def skips_source(reasons: str, more_helpers: str = "") -> str:
    """A fixture ``registered/skips.py``: ``SKIP_REASONS`` with the given entries (dict body lines), the
    helpers every fixture has (skip_message, registered_skip, requires_gpu) and ``more_helpers``."""
    return f"import pytest\n\nSKIP_REASONS = {{\n{reasons}}}\n\n{SKIP_HELPERS}{more_helpers}"


SKIPS_SOURCE = skips_source('''\
    "needs-gpu": {"text": "needs a CUDA or ROCm device", "skips_when": "gpus<1"},
    "needs-hip": {"text": "needs a real ROCm device", "skips_when": "vendor!=amd"},
''')

PYPROJECT = '''\
[tool.pytest.ini_options]
addopts = "-ra"
'''


class FixtureRepo:
    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "ci").mkdir(parents=True, exist_ok=True)
        shutil.copy(REAL_ROOT / "ci" / "hardware.yaml", self.root / "ci" / "hardware.yaml")
        shutil.copy(REAL_ROOT / "noxfile.py", self.root / "noxfile.py")   # the audit reads its `suite` session
        self.write("registered/__init__.py", "")
        self.write("registered/skips.py", SKIPS_SOURCE)
        self.write("impl/__init__.py", "_LAZY = {}\n")
        self.write("reference/__init__.py", "")
        self.write("pyproject.toml", PYPROJECT)

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    def test_file(self, name: str, body: str) -> Path:
        """Write ``registered/<name>`` with ``from ci.registration import register`` on top."""
        return self.write(f"registered/{name}", "from ci.registration import register\n\n" + textwrap.dedent(body))

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REAL_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.pop("GITHUB_STEP_SUMMARY", None)
        env.update(extra)
        return env

    def run_module(self, module: str, *args: str, **env: str) -> subprocess.CompletedProcess:
        """``python -m <module> --root <fixture> ARGS`` from the real repository root."""
        return subprocess.run([sys.executable, "-m", module, "--root", str(self.root), *args],
                              cwd=REAL_ROOT, env=self.env(**env), capture_output=True, text=True, timeout=300)

    def generate_workflows(self) -> None:
        from ci.registry.jobs import load_registry
        from ci.github.generate import generate, write

        write(self.root, generate(load_registry(self.root)))
