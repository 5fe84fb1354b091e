"""Collection of @register(...) by syntax tree: import forms, node ids, errors with file:line."""
from __future__ import annotations

import subprocess
import sys

import pytest

from ci.registry.collect import CollectionError
from registered.fixture_repo import REAL_ROOT, FixtureRepo
from ci.registry.jobs import load_registry
from ci.registration import register

GOOD = dict(suite="s", hardware="cpu", schedule="per-commit", est_time=1)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
def test_every_import_form_is_recognised(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("registered/test_forms.py", """
        import ci.registration
        import ci.registration as regmod
        from ci import registration
        from ci.registration import register as reg
        from ci.registration import register

        @register(suite="a", hardware="cpu", schedule="per-commit", est_time=1)
        def test_plain(): pass

        @reg(suite="b", hardware=["cpu", "h200-1"], schedule="nightly", est_time=2.5)
        def test_alias(): pass

        @regmod.register(suite="c", hardware=("mi35x-8",), schedule="nightly", est_time=9)
        class TestModuleAlias:
            def test_m(self): pass

        @ci.registration.register(suite="d", hardware="cpu", schedule="per-commit", est_time=1)
        async def test_dotted(): pass

        class TestMethods:
            @registration.register(suite="e", hardware="cpu", schedule="per-commit", est_time=1)
            def test_one(self): pass
    """)
    regs = {r.node_id: r for r in load_registry(tmp_path).collection.registrations}
    f = "registered/test_forms.py"
    assert set(regs) == {f"{f}::test_plain", f"{f}::test_alias", f"{f}::TestModuleAlias",
                         f"{f}::test_dotted", f"{f}::TestMethods::test_one"}
    assert regs[f"{f}::test_alias"].hardware == ("cpu", "h200-1")
    assert regs[f"{f}::test_alias"].est_time == 2.5
    assert regs[f"{f}::TestModuleAlias"].suite == "c"
    assert regs[f"{f}::test_plain"].line == 8


# (source under `from ci.registration import register`, line of the problem, words the message must contain)
BAD_CASES = {
    "non-literal argument": ("HW = 'cpu'\n@register(suite='s', hardware=HW, schedule='per-commit', est_time=1)\n"
                             "def test_x(): pass\n",
                             4, ["hardware", "literal", "'HW'"]),
    "unknown hardware": ("@register(suite='s', hardware='mi999-1', schedule='per-commit', est_time=1)\n"
                         "def test_x(): pass\n",
                         3, ["unknown hardware label 'mi999-1'"]),
    "unknown schedule": ("@register(suite='s', hardware='cpu', schedule='weekly', est_time=1)\ndef test_x(): pass\n",
                         3, ["unknown schedule", "'weekly'"]),
    "unknown gate var": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1,\n"
                         "          env={'v': {'DSPARK_NOPE': 'x'}})\ndef test_x(): pass\n",
                         3, ["DSPARK_NOPE", "not a gate"]),
    "non-gate var in variant": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1,\n"
                                "          env={'v': {'HOME': '/'}})\ndef test_x(): pass\n",
                                3, ["'HOME'", "not a gate"]),
    "bad gate value": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1,\n"
                       "          env={'v': {'DSPARK_KV_BACKEND': 'ring'}})\ndef test_x(): pass\n",
                       3, ["DSPARK_KV_BACKEND='ring'", "kv_backend"]),
    "missing argument": ("@register(suite='s', hardware='cpu', schedule='per-commit')\ndef test_x(): pass\n",
                         3, ["missing required", "est_time"]),
    "positional argument": ("@register('s', hardware='cpu', schedule='per-commit', est_time=1)\ndef test_x(): pass\n",
                            3, ["keyword arguments only"]),
    "unknown argument": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1, gpus=2)\n"
                         "def test_x(): pass\n",
                         3, ["unknown argument 'gpus'"]),
    "zero est_time": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=0)\ndef test_x(): pass\n",
                      3, ["est_time=0", "positive"]),
    "duplicate variant key": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1,\n"
                              "          env={'v': {'DSPARK_CHECK': 'on'}, 'v': {'DSPARK_CHECK': 'off'}})\n"
                              "def test_x(): pass\n",
                              4, ["duplicate key 'v'"]),
    "hardware listed twice": ("@register(suite='s', hardware=['cpu', 'cpu'], schedule='per-commit', est_time=1)\n"
                              "def test_x(): pass\n",
                              3, ["listed twice"]),
    "not called": ("@register\ndef test_x(): pass\n", 3, ["must be called"]),
    "non-test function": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                          "def helper(): pass\n",
                          3, ["'helper'", "only collects functions named test"]),
    "non-test class": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                       "class Helper: pass\n",
                       3, ["Helper", "classes named Test"]),
    "nested function": ("def test_outer():\n"
                        "    @register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                        "    def test_inner(): pass\n", 4, ["test_inner", "module-level"]),
    "same test twice in one job": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                   "@register(suite='s', hardware=['h200-1', 'cpu'], schedule='per-commit', "
                                   "est_time=1)\n"
                                   "def test_x(): pass\n", 4, ["duplicate", "per-commit/cpu/s", "test_dup.py:3"]),
    "class and its method in one job": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                        "class TestC:\n"
                                        "    @register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                        "    def test_m(self): pass\n",
                                        5, ["duplicate", "TestC::test_m", "test_dup.py:3"]),
    "variant env conflict": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1, "
                             "env={'v': {'DSPARK_CHECK': 'on'}})\n"
                             "def test_a(): pass\n"
                             "@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1, "
                             "env={'v': {'DSPARK_CHECK': 'off'}})\n"
                             "def test_b(): pass\n", 5, ["per-commit/cpu/s[v]", "another registration"]),
    "one function defined twice": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                   "def test_x(): pass\n"
                                   "@register(suite='t', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                   "def test_x(): pass\n", 6, ["test_x is defined again", "first at line 4",
                                                               "one pytest node id"]),
    "one method defined twice": ("class TestC:\n"
                                 "    @register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                 "    def test_m(self): pass\n"
                                 "    def test_m(self): pass\n", 6, ["TestC::test_m is defined again"]),
    "registered name rebound": ("@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                                "def test_x(): pass\n"
                                "test_x = None\n", 5, ["test_x is rebound here", "defined at line 4"]),
    "look-alike decorator": ("class fake:\n    @staticmethod\n    def register(**kw): return lambda f: f\n"
                             "@fake.register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\n"
                             "def test_x(): pass\n", 6, ["'fake.register' is not ci.registration.register"]),
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_registration_is_a_clear_error_with_file_and_line(tmp_path, case):
    source, line, words = BAD_CASES[case]
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_dup.py", source)
    with pytest.raises(CollectionError) as info:
        load_registry(tmp_path)
    problems = [p for p in info.value.problems if p.startswith(f"registered/test_dup.py:{line}:")]
    assert problems, f"no problem reported at line {line}: {info.value.problems}"
    assert any(all(w in p for w in words) for p in problems), (words, info.value.problems)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_register_outside_a_test_file_is_an_error(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("registered/helpers.py", """
        from ci.registration import register

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_hidden(): pass
    """)
    with pytest.raises(CollectionError, match=r"registered/helpers.py:4: .*pytest does not collect"):
        load_registry(tmp_path)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_syntax_error_is_reported_with_its_line(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("registered/test_broken.py", "def test_x(:\n    pass\n")
    with pytest.raises(CollectionError, match=r"registered/test_broken.py:1: syntax error"):
        load_registry(tmp_path)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_unregistered_tests_are_listed_not_errors(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_mix.py", """
        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_registered(): pass

        def test_forgotten(): pass

        def helper(): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        class TestCovered:
            def test_inside(self): pass

        class TestHalf:
            @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
            def test_yes(self): pass
            def test_no(self): pass

        class TestNone:
            def test_a(self): pass
    """)
    repo.write("registered/util.py", "def test_like_name_in_helper_module(): pass\n")
    unregistered = {t.node_id: t.line for t in load_registry(tmp_path).collection.unregistered}
    f = "registered/test_mix.py"
    assert unregistered == {f"{f}::test_forgotten": 7, f"{f}::TestHalf::test_no": 18, f"{f}::TestNone": 20}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_disabled_registrations_make_no_job_but_are_kept(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.test_file("test_off.py", """
        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        @register(suite="s", hardware="mi35x-8", schedule="nightly", est_time=1,
                  disabled={"reason": "ROCm 7.2 hang, issue #12", "until": "2099-01-01"})
        def test_x(): pass
    """)
    registry = load_registry(tmp_path)
    assert list(registry.jobs) == ["per-commit/cpu/s"]
    assert [(d.node_id, d.disabled["reason"]) for d in registry.disabled] == [
        ("registered/test_off.py::test_x", "ROCm 7.2 hang, issue #12")]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_real_registry_collects_and_audits_without_importing_torch():
    code = ("import sys, ci.registry.jobs, ci.audit.own, ci.github.generate, impl.gates\n"
            "r = ci.registry.jobs.load_registry('.')\n"
            "ci.audit.own.run_audit('.')\n"
            "ci.github.generate.generate(r)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'numpy'))\n"
            "assert not bad, bad\n"
            "print(len(r.jobs))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REAL_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout.strip()) >= 1


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_two_test_files_pytest_imports_under_one_module_name(tmp_path):
    repo = FixtureRepo(tmp_path)
    body = "@register(suite='s', hardware='cpu', schedule='per-commit', est_time=1)\ndef test_x(): pass\n"
    repo.test_file("gpu/test_same.py", body)
    repo.test_file("cpu/test_same.py", body)
    with pytest.raises(CollectionError, match=r"registered/gpu/test_same.py:1: pytest imports it as module "
                                              r"'test_same', like registered/cpu/test_same.py"):
        load_registry(tmp_path)
    repo.write("registered/gpu/__init__.py", "")
    repo.write("registered/cpu/__init__.py", "")
    assert len(load_registry(tmp_path).collection.registrations) == 2
