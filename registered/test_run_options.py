"""One run-options object: gates read once at the edge, nothing below reads them again (issue 16 §2).

* ``RunOptions.resolve`` takes explicit values over the environment's gates and
  names a bad variable;
* once resolved, a whole engine run (reference, prefill, drafts, verify, pool
  checks) is immune to the environment: poisoning every gate variable after
  resolving changes nothing -- so no module below the edge re-reads it;
* the e2e library and the distributed comparison no longer import each other;
* library code asks ``impl.gates.active_gates()``: a run's gates inside
  ``gates_in_effect`` (innermost block wins), else the environment's, re-resolved
  only when a gate variable's raw value changes (docs/design.md §2.2).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

from ci.registration import register
from impl.gates import GATES, GateError, Gates, active_gates, gates_in_effect, override_gates, resolve_gates
from impl.config import SpecConfig
from impl.run_options import RunOptions

ROOT = pathlib.Path(__file__).resolve().parents[1]


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_resolve_prefers_explicit_values_and_names_bad_variables():
    env = {"DSPARK_SPEC_ALGO": "mtp", "DSPARK_KV_BACKEND": "paged", "DSPARK_CHECK": "on"}
    opts = RunOptions.resolve(env, kv_backend="unified", gamma=2)
    assert (opts.algorithm, opts.kv_backend, opts.check_mode, opts.gamma) == ("mtp", "unified", True, 2)
    assert opts.platform is None and opts.kernel_backend is None  # decided from the hardware at run time
    assert RunOptions.resolve({}).algorithm == GATES["spec_algorithm"].default
    with pytest.raises(GateError, match="environment variable DSPARK_PLATFORM='rocm'"):
        RunOptions.resolve({"DSPARK_PLATFORM": "rocm"})
    with pytest.raises(GateError, match="gate 'kv_backend': kv_backend 'ring'"):
        RunOptions(kv_backend="ring")
    with pytest.raises(ValueError, match="RunOptions.gamma must be an int >= 1"):
        RunOptions(gamma=0)
    with pytest.raises(TypeError, match=r"no option\(s\) \['colour'\]"):
        RunOptions.resolve({}, colour="red")
    with pytest.raises(AttributeError):
        opts.gamma = 3  # frozen
    assert resolve_gates({"DSPARK_KERNEL_BACKEND": "torch"}).kernel_backend == "torch"


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=15)
@pytest.mark.parametrize("algorithm, kv", [("dspark", "paged"), ("mtp", "unified")])
def test_a_resolved_run_never_reads_the_environment_again(algorithm, kv, monkeypatch):
    from impl.engine.run import run_case
    from impl.model.tiny_config import cpu_small

    options = RunOptions.resolve({}, algorithm=algorithm, kv_backend=kv, kernel_backend="torch", gamma=2, batch=3,
                                 num_slots=2, draft="noisy:0.3", max_new_tokens=4, seed=5, checked=True)
    for gate in GATES.values():  # any read below the edge now raises a GateError
        monkeypatch.setenv(gate.env_var, "poisoned")
    res = run_case(cpu_small(), options)
    assert res.lossless, res.mismatches
    eng = res.engine
    assert (eng.algorithm, eng.kv_backend, eng.state.target_pool.kind) == (algorithm, kv, kv)
    assert eng.checker.checks == eng.step_index > 0


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_engine_and_dist_case_take_run_options():
    from impl.distributed.launch import DistCase
    from impl.engine.engine import SpecEngine
    from impl.model.tiny_config import cpu_small

    with pytest.raises(TypeError, match="options must be a RunOptions"):
        SpecEngine(cpu_small(), {"algorithm": "dspark"})
    with pytest.raises(TypeError, match="DistCase.options must be a RunOptions"):
        DistCase(cpu_small(), [[1, 2]], None)
    with pytest.raises(ValueError, match="greedy eager decoding only"):
        DistCase(cpu_small(), [[1, 2]], RunOptions(graph=True))


def _imports(path: pathlib.Path, *, top_level: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in (tree.body if top_level else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_e2e_cli_and_library_do_not_import_each_other():
    library = [ROOT / "impl/engine/run.py", *(ROOT / "impl/distributed").glob("*.py"),
               *(ROOT / "impl/engine").glob("*.py")]
    for path in library:
        assert "impl.e2e" not in _imports(path), f"{path.relative_to(ROOT)} imports the CLI impl.e2e"
    assert not {m for m in _imports(ROOT / "impl/engine/run.py") if m.startswith("impl.distributed")}
    # the CLIs' fast-fail path is torch-free at import time
    for module in ("impl/run_options.py", "impl/cli_args.py", "impl/gates.py", "impl/engine/prompts.py",
                   "impl/engine/drafting.py", "impl/distributed/faults.py", "impl/e2e.py"):
        roots = {m.split(".")[0] for m in _imports(ROOT / module, top_level=True)}
        assert not roots & {"torch", "triton"}, f"{module} imports torch/triton at import time"


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_launch_cache_follows_the_run_kernel_backend(monkeypatch):
    """The ops' cached backend choice follows a run's ``use_kernel_backend`` block, not only the env."""
    from impl.kernels import _backend
    from impl.platform import use_kernel_backend

    monkeypatch.delenv(GATES["kernel_backend"].env_var, raising=False)
    outside = _backend._resolved_backend()
    with use_kernel_backend("torch"):
        assert _backend._resolved_backend() == "torch"
    with use_kernel_backend("triton-interpret"):
        assert _backend._resolved_backend() == "triton-interpret"
    assert _backend._resolved_backend() == outside


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_active_gates_follow_the_environment_outside_a_run(monkeypatch):
    """Outside every block: the environment's gates, a change seen on the next call, resolved once per value."""
    from impl.pools import make_pool
    from impl.validation import check_mode_enabled

    for gate in GATES.values():
        monkeypatch.delenv(gate.env_var, raising=False)
    assert active_gates() == Gates() and active_gates() is active_gates()  # cached, not re-validated
    monkeypatch.setenv("DSPARK_KV_BACKEND", "paged")
    monkeypatch.setenv("DSPARK_CHECK", "on")
    assert (active_gates().kv_backend, check_mode_enabled()) == ("paged", True)
    assert make_pool(SpecConfig(gamma=2, window=8), num_layers=1, device="cpu", max_positions=32).kind == "paged"
    monkeypatch.setenv("DSPARK_KV_BACKEND", "unified")
    monkeypatch.delenv("DSPARK_CHECK")
    assert (active_gates().kv_backend, check_mode_enabled()) == ("unified", False)
    for _ in range(2):  # a bad value raises on every call: errors are never cached
        monkeypatch.setenv("DSPARK_SPEC_ALGO", "eagle")
        with pytest.raises(GateError, match="environment variable DSPARK_SPEC_ALGO='eagle'"):
            active_gates()
    with override_gates(spec_algorithm="mtp"):  # a gate a block decides is not read from the environment
        assert active_gates().spec_algorithm == "mtp"
        monkeypatch.setenv("DSPARK_CHECK", "maybe")  # ... but the gates it leaves open are
        with pytest.raises(GateError, match="DSPARK_CHECK='maybe'"):
            check_mode_enabled()


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_gates_in_effect_override_the_environment_innermost_block_wins(monkeypatch):
    from impl.platform import kernel_backend, use_kernel_backend
    from impl.prefill_metadata import resolve_platform_and_algorithm
    from impl.validation import check_mode, check_mode_enabled

    for gate in GATES.values():  # a run's gates never read the environment
        monkeypatch.setenv(gate.env_var, "poisoned")
    run = RunOptions(algorithm="mtp", kv_backend="paged", kernel_backend="torch", checked=True).gates
    assert run == Gates(spec_algorithm="mtp", kv_backend="paged", kernel_backend="torch", check_mode="on")
    with gates_in_effect(run) as g:
        assert g is active_gates() is run
        assert (check_mode_enabled(), kernel_backend()) == (True, "torch")
        assert resolve_platform_and_algorithm("cuda", None) == ("cuda", "mtp")
        with gates_in_effect(Gates(kv_backend="unified")):  # nested run: wholly its own gates
            assert (active_gates().kv_backend, active_gates().spec_algorithm, check_mode_enabled()) == (
                "unified", "dspark", False)
            with check_mode(True), use_kernel_backend("torch"):  # single gates inside it
                assert (check_mode_enabled(), kernel_backend(), active_gates().kv_backend) == (True, "torch", "unified")
            assert (check_mode_enabled(), active_gates().kernel_backend) == (False, None)
        with check_mode(False):
            assert not check_mode_enabled() and active_gates().kv_backend == "paged"
        assert active_gates() is run
    with pytest.raises(GateError, match="DSPARK_PLATFORM='poisoned'"):  # outside: the environment again
        active_gates()
    with pytest.raises(TypeError, match="gates must be an impl.gates.Gates"):
        gates_in_effect({"check_mode": "on"})
    with pytest.raises(GateError, match="gate 'kv_backend': kv_backend 'ring'"):
        override_gates(kv_backend="ring")
    with pytest.raises(GateError, match="unknown gate 'colour'"):
        override_gates(colour="red")


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=1)
def test_e2e_cli_hands_the_kernel_backend_on_without_the_environment(monkeypatch):
    from impl.e2e import settle_hardware

    monkeypatch.delenv(GATES["kernel_backend"].env_var, raising=False)
    options = settle_hardware(RunOptions(), None, {})
    assert options.kernel_backend in ("triton", "torch")
    assert GATES["kernel_backend"].env_var not in __import__("os").environ
