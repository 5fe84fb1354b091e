"""Rule collection-parity: the tests pytest collects from registered/ are exactly the ones the registry knows."""
from __future__ import annotations

import datetime as dt

from ci.audit.own import run_audit
from ci.registry.jobs import load_registry
from ci.audit.parity import compare, parse_collect_output, pytest_collected
from ci.registration import register
from registered.fixture_repo import REAL_ROOT, FixtureRepo


def registered_map(root) -> dict[str, str]:
    out: dict[str, str] = {}
    for reg in load_registry(root).collection.registrations:
        out.setdefault(reg.node_id, reg.where)
    return out


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_compare_is_pure_and_reports_both_directions(tmp_path):
    (tmp_path / "registered").mkdir()
    (tmp_path / "registered" / "test_a.py").write_text("from registered.helpers import test_shared\n\n\n"
                                                       "def test_p(x): pass\n")
    registered = {"registered/test_a.py::test_p": "registered/test_a.py:3",
                  "registered/test_a.py::TestK": "registered/test_a.py:9"}
    collected = ["registered/test_a.py::test_p[1]", "registered/test_a.py::test_p[2]",
                 "registered/test_a.py::test_shared"]
    assert compare(collected, registered, tmp_path) == [
        "registered/test_a.py:1: pytest collects registered/test_a.py::test_shared, which no registration covers "
        "(imported, generated or inherited tests run unregistered)",
        "registered/test_a.py:9: registered/test_a.py::TestK is registered, but pytest collects no test from it "
        "(not collectable: __init__, __test__ = False, a name pytest ignores...)",
    ]
    assert compare(collected[:2], {"registered/test_a.py::test_p": "x:1"}, tmp_path) == []
    assert parse_collect_output("a.py::t\nb.py::C::m[1]\n\n3 tests collected\n") == ["a.py::t", "b.py::C::m[1]"]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_j_what_the_syntax_tree_misses_pytest_sees(tmp_path):
    repo = FixtureRepo(tmp_path)
    repo.write("registered/shared.py", "def test_shared():\n    assert True\n")
    repo.test_file("test_mix.py", """
        from registered.shared import test_shared   # pytest runs it here, unregistered

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        def test_ok(): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        class TestNeverCollected:
            def __init__(self):
                pass

            def test_m(self): pass

        @register(suite="s", hardware="cpu", schedule="per-commit", est_time=1)
        class TestOptedOut:
            __test__ = False

            def test_m(self): pass
    """)
    repo.generate_workflows()
    collected = pytest_collected(repo.root, env=repo.env())
    assert "registered/test_mix.py::test_ok" in collected
    report = run_audit(repo.root, today=dt.date(2026, 12, 1), collected=collected)
    f = "registered/test_mix.py"
    assert report.violations["collection-parity"] == [
        f"{f}:4: pytest collects {f}::test_shared, which no registration covers "
        "(imported, generated or inherited tests run unregistered)",
        f"{f}:9: {f}::TestNeverCollected is registered, but pytest collects no test from it "
        "(not collectable: __init__, __test__ = False, a name pytest ignores...)",
        f"{f}:16: {f}::TestOptedOut is registered, but pytest collects no test from it "
        "(not collectable: __init__, __test__ = False, a name pytest ignores...)",
    ]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=30)
def test_j_the_repository_collects_exactly_its_registrations():
    """pytest's own collection of registered/ (imports torch) against the syntax-tree registry."""
    collected = pytest_collected(REAL_ROOT)
    assert len(collected) > 100
    assert compare(collected, registered_map(REAL_ROOT), REAL_ROOT) == []
