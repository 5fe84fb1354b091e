"""The installed distribution: one import name (``dspark_suite``), no tests, and ``dspark-audit``
working from a wheel in a clean virtual environment with pyyaml only (issue: the house, v2)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
import venv
import zipfile

from ci.registration import register
from ci.tools.wheel_namespace import NAMESPACE, PACKAGES, rewrite_source
from registered.fixture_repo import REAL_ROOT
from registered.test_ci_audit_adopt import cli, json_findings, write_tree

SAMPLE = '''"""doc: import ci.audit stays as prose"""
from __future__ import annotations
import ci.audit_rules  # noqa: F401  (side effect)
import reference as R
import os, impl.kernels as K
from ci.audit import run_audit
from ci import safe_files
from .sibling import thing
REGISTER_MODULE = "ci.registration"


def late():
    import impl
    return impl, "impl.kernels"
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_rewrite_moves_imports_under_the_namespace_and_keeps_everything_else():
    out = rewrite_source(SAMPLE)
    assert out.splitlines()[0] == SAMPLE.splitlines()[0]   # prose untouched
    assert "import dspark_suite.ci.audit_rules; from dspark_suite import ci  # noqa: F401  (side effect)" in out
    assert "import dspark_suite.reference as R" in out and "import os, dspark_suite.impl.kernels as K" in out
    assert "from dspark_suite.ci.audit import run_audit" in out and "from dspark_suite.ci import safe_files" in out
    assert "from .sibling import thing" in out
    assert 'REGISTER_MODULE = "ci.registration"' in out          # names of audited code are data
    assert "    import dspark_suite.impl; from dspark_suite import impl\n" in out
    assert '"impl.kernels"' in out
    assert rewrite_source(out) == out                              # a second build changes nothing


def _absolute_project_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in PACKAGES]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PACKAGES:
            found.append(node.module)
    return found


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_every_module_rewritten_parses_and_imports_nothing_outside_the_namespace():
    checked = 0
    for package in PACKAGES:
        for path in sorted((REAL_ROOT / package).rglob("*.py")):
            out = rewrite_source(path.read_text(encoding="utf-8"))
            assert _absolute_project_imports(out) == [], path
            checked += 1
    assert checked > 100


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_declared_packages_are_exactly_the_folders():
    config = tomllib.loads((REAL_ROOT / "pyproject.toml").read_text())
    declared = set(config["tool"]["setuptools"]["packages"])
    folders = {f"{NAMESPACE}." + ".".join(p.relative_to(REAL_ROOT).parts)
               for package in PACKAGES for p in [REAL_ROOT / package, *(REAL_ROOT / package).rglob("*")]
               if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py")) or p.name == "schemas"}
    assert declared == folders
    assert config["project"]["scripts"]["dspark-audit"] == f"{NAMESPACE}.ci.audit.cli:main"


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=10)
def test_the_wheel_installs_one_name_and_runs_the_audit_with_pyyaml_only(tmp_path):
    wheels = tmp_path / "wheels"
    work = tmp_path / "src"   # a copy, so the checkout's build/ folder is never touched
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REAL_ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = REAL_ROOT / name
        if source.is_file() and not source.is_symlink():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_bytes(source.read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(work)], check=True, timeout=300)
    (wheel,) = wheels.glob("*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {NAMESPACE, wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}

    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)   # pip below drives it from outside (--python)
    python = env / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "-q", str(wheel)], check=True, timeout=300, env=clean)
    installed = subprocess.run([*pip, "list", "--format=freeze"], capture_output=True, text=True, check=True,
                               env=clean).stdout
    names = {line.split("==")[0].lower() for line in installed.splitlines()}
    assert {"torch", "triton", "numpy"}.isdisjoint(names) and "pyyaml" in names

    taken = subprocess.run([str(python), "-c", "import ci"], capture_output=True, text=True, cwd=tmp_path,
                           env=clean)
    assert taken.returncode != 0 and "No module named 'ci'" in taken.stderr   # the name stays the user's

    tree = write_tree(tmp_path / "tree", with_new=True)   # two dormant suites: exit 1
    (tree / "ci").mkdir()   # the user's own `ci` folder does not shadow the installed audit
    (tree / "ci" / "__init__.py").write_text("raise SystemExit('the user folder was imported')\n")
    installed = subprocess.run([str(env / "bin" / "dspark-audit"), "--root", str(tree), "--format", "json"],
                               capture_output=True, text=True, cwd=tree, env=clean, timeout=120)
    checkout = cli("--root", str(tree), "--format", "json")
    assert installed.returncode == checkout.returncode == 1, installed.stderr
    assert json_findings(installed) == json_findings(checkout) and len(json_findings(installed)) == 2
