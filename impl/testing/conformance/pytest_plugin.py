"""pytest entry of the conformance kit, for an engine's own CI:

    pytest -p impl.testing.conformance.pytest_plugin --engine sglang --engine-root PATH [--engine-ops a,b]

One test per op and metadata builder the adapter maps (``test_conformance[<op>]``): it fails on a core difference
(printing the report's lines for that op: the case, the first differing element, the shrunk
call), passes with the out-of-contract differences printed, and is skipped when the engine does
not provide the op at this commit. Without explicit paths the plugin collects only its own
tests (``engine_tests.py``), never the engine's test suite. The tests are collected from a copy in
a temporary folder, not from this package's folder: under an editable install that folder lies
inside this project's checkout, whose root ``conftest.py`` (the project's own CI plugin) pytest
would otherwise load into the engine's session. The kit executes the engine's code: the engine
root must be trusted (docs/conformance.md). This module is the kit's only pytest import; pytest
loads it, nothing in impl/ does.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).with_name("engine_tests.py")
_COPY = pytest.StashKey[Path]()


def pytest_addoption(parser):
    group = parser.getgroup("conformance", "run the dspark-suite op table against an engine's kernels")
    group.addoption("--engine", default=None, help="engine adapter name (sglang, fixture, fixture-buggy)")
    group.addoption("--engine-root", default=None,
                    help="the engine's source root, trusted: its code is executed (sglang: its repository root "
                         "or its python/ directory)")
    group.addoption("--engine-ops", default="",
                    help="comma-separated op or metadata builder names (default: every mapped one)")
    group.addoption("--engine-no-isolate", action="store_true",
                    help="load and run the engine's code in the pytest process (faster; a crashing kernel then "
                         "ends the session)")


def pytest_configure(config):
    if not config.getoption("engine"):
        return
    if config.getoption("engine_root") is None:
        raise pytest.UsageError("--engine needs --engine-root PATH (the engine's source root)")
    folder = Path(tempfile.mkdtemp(prefix="dspark-conformance-"))
    config.stash[_COPY] = folder
    tests = folder / "test_dspark_conformance.py"
    shutil.copyfile(TESTS, tests)
    if not _paths_given(config):  # no paths given: our tests only, never the engine's suite
        config.args[:] = [str(tests)]
    else:
        config.args.append(str(tests))


def pytest_unconfigure(config):
    folder = config.stash.get(_COPY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _paths_given(config) -> bool:
    """Whether the command line named test paths (pytest < 7.4 cannot say: then only the kit's tests run)."""
    sources = getattr(pytest.Config, "ArgsSource", None)
    return sources is not None and config.args_source == sources.ARGS


def pytest_generate_tests(metafunc):
    if "conformance_op" not in metafunc.fixturenames:
        return
    from impl.testing.conformance.engines import get_engine
    name = metafunc.config.getoption("engine")
    if not name:
        metafunc.parametrize("conformance_op", [], ids=[])
        return
    try:
        engine = get_engine(name)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    wanted = [o for o in metafunc.config.getoption("engine_ops").split(",") if o]
    ops = [name for name in [a.op for a in engine.ops] + [m.name for m in engine.metadata]
           if not wanted or name in wanted]
    metafunc.parametrize("conformance_op", ops, ids=ops)


@pytest.fixture(scope="session")
def conformance_engine(request):
    from impl.testing.conformance.engines import get_engine, resolve_root
    engine = get_engine(request.config.getoption("engine"))
    root = resolve_root(Path(request.config.getoption("engine_root")), engine.package)
    if root is None:
        raise pytest.UsageError(f"--engine-root must hold the {engine.package} package ({engine.root_hint})")
    return engine, str(root), not request.config.getoption("engine_no_isolate")
