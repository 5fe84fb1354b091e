"""ci.runner.pytest_plugin's shape: one plugin object per process in the plugin manager, no mutable module state,
its hookspec in ci/runner/pytest_hookspecs.py and pytest's private JUnit writer reached only through
ci/runner/junit_shim.py."""
from __future__ import annotations

import ast
import subprocess
import sys

import ci.runner.pytest_plugin as plugin_module
from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo

TESTS = '''\
@register(suite="obj", hardware="cpu", schedule="per-commit", est_time=1)
def test_one():
    assert 1 + 1 == 2
'''
CONFTEST = '''\
def pytest_collection_finish(session):
    plugin = session.config.pluginmanager.get_plugin("dspark-ci")
    job = plugin.job.job_id if plugin is not None and plugin.job is not None else None
    print(f"PLUGIN {type(plugin).__name__} job={job} suites={sorted(plugin.suites) if plugin else None}")
'''


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=8)
def test_the_plugin_is_an_object_in_the_plugin_manager_with_its_job(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("impl/gates.py", (REAL_ROOT / "impl" / "gates.py").read_text(encoding="utf-8"))
    repo.write("conftest.py", 'pytest_plugins = ["ci.runner.pytest_plugin"]\n\n' + CONFTEST)
    repo.test_file("test_obj.py", TESTS)

    def pytest(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", *args],
                              cwd=tmp_path, env=repo.env(), capture_output=True, text=True, timeout=300, check=False)

    for args, job in ((["--ci-job", "per-commit/cpu/obj"], "per-commit/cpu/obj"), (["registered"], None)):
        proc = pytest(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        want = f"PLUGIN CiPytestPlugin job={job} suites=['registered/test_obj.py::test_one']"
        assert want in proc.stdout, proc.stdout


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_no_mutable_module_state_hookspec_apart_and_junit_privates_behind_the_shim():
    mutable = {name: type(v).__name__ for name, v in vars(plugin_module).items()
               if not name.startswith("__") and isinstance(v, (list, dict, set, bytearray))}
    assert not mutable, f"module-level mutable state in ci.runner.pytest_plugin: {mutable}"
    source = (REAL_ROOT / "ci" / "runner" / "pytest_plugin.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Global)], "a `global` statement"
    assert "@pytest.hookspec" not in source, "hookspecs live in ci/runner/pytest_hookspecs.py"
    privates = [n.module for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("_pytest")]
    assert not privates and "node_reporters_ordered" not in source and "xml_key" not in source
    shim = (REAL_ROOT / "ci" / "runner" / "junit_shim.py").read_text(encoding="utf-8")
    assert "_pytest.junitxml" in shim
