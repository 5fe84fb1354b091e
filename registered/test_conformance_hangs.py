"""The conformance kit never waits on engine code for ever.

The kit runs an engine's functions in spawned children; a child that sends nothing for
``--case-timeout`` seconds (loading the engine's module, one case, one metadata builder) is stopped
(SIGTERM, then SIGKILL) and that case is reported as hung, a failure; the next child starts at the
following case. Checked with a crafted engine tree whose function sleeps on one sample, a module that
sleeps at import, and a child that never writes.
"""
from __future__ import annotations

import multiprocessing as mp
import time

from ci.registration import register
from impl.testing.conformance import runner
from impl.testing.conformance.__main__ import main
from impl.testing.conformance.adapter import Arg, EngineAdapter, OpAdapter
from impl.testing.conformance.isolate import HUNG, next_message
from impl.testing.op_table import OPS_BY_NAME

TIMEOUT = 20.0  # generous for a spawn and `import torch` on a busy 2-core CI machine

SLEEPY = '''
import time


def put_rows(*, kv, loc, unified):
    if kv.shape[1] == 40:  # the odd-width sample: never returns
        time.sleep(3600)
    for i, target in enumerate(loc.tolist()):
        if 0 <= target < unified.shape[0]:
            unified[target] = kv[i]
'''


def _engine(package: str) -> EngineAdapter:
    return EngineAdapter(package, package, (OpAdapter("scatter_into_unified", f"{package}.k", "put_rows",
                                                      (Arg("kv"), Arg("loc"), Arg("unified"))),))


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=45)
def test_a_hung_case_is_stopped_reported_and_the_rest_still_run(tmp_path):
    (tmp_path / "sleepy").mkdir()
    (tmp_path / "sleepy" / "k.py").write_text(SLEEPY)
    engine = _engine("sleepy")
    started = time.monotonic()
    result = runner.run_op(engine, engine.ops[0], str(tmp_path), "cpu", kinds=("sample",), isolate=True,
                           case_timeout=TIMEOUT)
    took = time.monotonic() - started
    by_name = {c.name: c for c in result.cases}
    assert list(by_name) == [s.name for s in OPS_BY_NAME["scatter_into_unified"].samples(False)]
    hung = by_name["odd-width-D40"]
    assert hung.status == "raises" and hung.detail.startswith(f"sent nothing for {TIMEOUT:g} s (hung"), hung.detail
    others = [c for c in result.cases if c.name != "odd-width-D40"]
    assert others and all(c.status == "agree" for c in others), [(c.name, c.detail) for c in others]
    assert result.verdict == "raises differently" and result.failed  # exit 1 from the CLI
    assert took < TIMEOUT + 60, f"the run took {took:.0f} s: the hung child was not stopped in time"


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=25)
def test_a_module_that_hangs_at_import_is_a_load_error_exit_1(tmp_path, capsys):
    (tmp_path / "sleepy").mkdir()
    (tmp_path / "sleepy" / "__init__.py").write_text("")
    (tmp_path / "sleepy" / "k.py").write_text("import time\ntime.sleep(3600)\n")
    engine = _engine("sleepy")
    result = runner.run_op(engine, engine.ops[0], str(tmp_path), "cpu", kinds=("sample",), isolate=True,
                           case_timeout=TIMEOUT)
    assert result.verdict == "load error" and result.failed
    assert result.detail.startswith(f"loading sent nothing for {TIMEOUT:g} s (hung"), result.detail


def _silent(conn) -> None:
    """A child that holds its end of the pipe and never writes."""
    time.sleep(3600)
    conn.close()


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=5)
def test_a_silent_child_is_stopped_within_the_timeout():
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_silent, args=(send,))
    child.start()
    send.close()
    started = time.monotonic()
    assert next_message(receive, child, 1.0) is HUNG
    assert not child.is_alive() and child.exitcode is not None
    assert time.monotonic() - started < 1.0 + 2.0 + 5.0  # the timeout, SIGTERM's grace, slack


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_a_case_timeout_that_is_not_positive_is_refused_up_front(tmp_path, capsys):
    for bad in ("0", "-1", "nan"):
        assert main(["--engine", "fixture", "--root", str(tmp_path), "--case-timeout", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: --case-timeout must be a positive number") and err.count("\n") == 1, err
