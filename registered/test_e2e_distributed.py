"""Multi-rank end to end: DP attention + tensor-parallel MLP over torch.distributed (docs/design.md §7.5).

Each test starts real rank processes (``torch.multiprocessing``, spawn) that
join a process group on a free local port -- gloo on CPU, NCCL on GPUs -- so
tests run in parallel under xdist. Pinned:

* tokens of 2 and 4 ranks == the single-rank engine == the reference decoder,
  for DSpark and MTP on the unified and the paged pool, with ranks that idle
  (4 ranks / 3 requests: rank 3 never has work; 2 ranks / 5 requests, one
  slot each: rank 1 runs out of requests first) and ranks that join at
  different steps; pools are checked after every step (checked mode);
* the TP MLP alone equals the single-rank MLP for uneven row counts, 0 included,
  and ranks that reach different control points get a LockstepError;
* a rank that raises mid-forward makes every rank fail with an error naming it,
  within seconds; a crashed or hung rank ends the run within a bounded time too.

Most cases run the data-moving ops through the torch backend (speed on the
2-core CI machine); one runs them through the Triton interpreter.
"""
from __future__ import annotations

import time

import pytest
import torch

from ci.registration import register
from impl.distributed.compare import expected, prepare
from impl.distributed.dp_engine import requests_of_rank
from impl.distributed.launch import DistCase, DistributedRunError, launch, merged_outputs
from impl.distributed.lockstep import FaultPlan
from impl.engine.prompts import make_prompts
from impl.model.tiny_config import cpu_small, dsv4_geometry
from impl.run_options import RunOptions
from registered.skips import requires_gpus

MIN_MARGIN = 1e-3
GAMMA = 3
MAX_NEW = 6


def _cases(cfg, prompts, *, max_new=MAX_NEW, gamma=GAMMA, slots=1, checked=True, device="cpu"):
    # noisy drafts make commit lengths vary over 1..gamma+1 (partial commits, idle steps);
    # DSpark/unified proposes with the draft model itself
    return [prepare(DistCase(cfg, prompts, RunOptions.resolve(
                algorithm=algo, gamma=gamma, kv_backend=kv, num_slots=slots, max_new_tokens=max_new,
                draft="model" if (algo, kv) == ("dspark", "unified") else "noisy:0.3", checked=checked, seed=1)),
                    device)
            for algo in ("dspark", "mtp") for kv in ("unified", "paged")]


def _check_equal(cases, results, world_size, device="cpu"):
    for case, per_rank in zip(cases, results):
        exp = expected(case, device)
        label = f"{case.options.algorithm}/{case.options.kv_backend}/{case.options.draft} on {world_size} ranks"
        assert exp.min_margin > MIN_MARGIN, f"{label}: near-tie in the reference ({exp.min_margin})"
        assert exp.single == exp.reference, f"{label}: the single-rank engine itself is not lossless"
        got = merged_outputs(per_rank)
        assert got == exp.single, f"{label}: tokens differ from the single-rank engine"
        assert got == exp.reference, f"{label}: tokens differ from the reference decoder"
        assert all(len(t) == case.max_new_tokens for t in got.values())
        # every rank served exactly its round-robin share and stayed in lock step
        for r in per_rank:
            assert sorted(r.outputs) == requests_of_rank(len(case.prompts), r.rank, world_size)
            lens = [c for steps in r.accept_lens.values() for c in steps]
            assert all(1 <= c <= case.gamma + 1 for c in lens)
        assert len({r.engine_steps for r in per_rank}) == 1
        assert any(r.idle_phases > 0 for r in per_rank), f"{label}: no rank ever idled"


@register(suite="e2e-distributed", hardware="cpu", schedule="per-commit", est_time=60)
@pytest.mark.parametrize("world_size, batch", [(2, 5), (4, 3)])
def test_dp_tp_matches_single_rank_and_reference(world_size, batch, monkeypatch):
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")  # inherited by the rank processes
    cfg = cpu_small()
    prompts = make_prompts(cfg, batch, GAMMA, seed=3)
    cases = _cases(cfg, prompts)
    results = launch(cases, world_size, backend="gloo", timeout_s=60)
    _check_equal(cases, results, world_size)
    if world_size == 4:  # 3 requests: rank 3 has none and idles through every phase
        for per_rank in results:
            idle = per_rank[3]
            assert not idle.outputs and idle.busy_steps == 0 and idle.idle_phases >= idle.engine_steps
    else:  # 3 vs 2 requests, one slot per rank: rank 1 finishes first and then idles
        for per_rank in results:
            assert per_rank[1].busy_steps < per_rank[1].engine_steps


@register(suite="e2e-distributed", hardware="cpu", schedule="per-commit", est_time=30)
def test_dp_tp_under_triton_interpreter():
    """The same equality with the pools' Triton kernels run by the interpreter (CPU CI's default)."""
    cfg = cpu_small()
    prompts = make_prompts(cfg, 3, 2, seed=5)
    opts = RunOptions.resolve(algorithm="dspark", gamma=2, kv_backend="unified", kernel_backend="triton-interpret",
                              num_slots=1, max_new_tokens=4, draft="noisy:0.3", checked=True)
    cases = [prepare(DistCase(cfg, prompts, opts))]
    results = launch(cases, 2, backend="gloo", timeout_s=120)
    _check_equal(cases, results, 2)


def _tp_mlp_rank(rank, world_size, port, counts, out_dir):
    """Rank body for the TP-MLP test (module level: spawn pickles it by name)."""
    import datetime
    import os

    import torch.distributed as dist

    from impl.distributed.lockstep import Lockstep
    from impl.distributed.tp_mlp import TensorParallelMlp
    from impl.model.mlp import Mlp
    from impl.model.weights import target_weights

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=30))
    cfg = cpu_small()
    full = target_weights(cfg).layers[0].mlp
    tp = TensorParallelMlp(full, cfg.eps, Lockstep("cpu"))
    errors = []
    for call, per_rank in enumerate(counts):
        gen = torch.Generator().manual_seed(100 * call + rank)
        h = torch.randn(per_rank[rank], cfg.hidden, generator=gen) * 3
        got = tp(h)
        want = Mlp(full, cfg.eps)(h)
        if got.shape != want.shape:
            errors.append(f"call {call}: shape {list(got.shape)} != {list(want.shape)}")
        elif got.numel() and not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
            errors.append(f"call {call}: max error {(got - want).abs().max().item():.3g}")
        elif got.numel() and torch.equal(got, torch.zeros_like(got)):
            errors.append(f"call {call}: all zeros")
    # ranks that reach different control points must be told so, not left to mismatch collectives
    from impl.distributed.lockstep import LockstepError

    try:
        tp.lockstep.exchange("prefill" if rank == 0 else "decode", 1)
        errors.append("diverged control points went unnoticed")
    except LockstepError as exc:
        if "left lock step" not in str(exc):
            errors.append(f"unclear lock-step error: {exc}")
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
        f.write("\n".join(errors))
    dist.destroy_process_group()


@register(suite="e2e-distributed", hardware="cpu", schedule="per-commit", est_time=12)
def test_tp_mlp_equals_single_rank_mlp_and_lockstep_is_checked(tmp_path):
    import torch.multiprocessing as mp

    from impl.distributed.launch import free_port

    counts = [(3, 5), (0, 4), (2, 0), (7, 7), (0, 0)]  # rows per rank per call; 0 = an idle rank
    mp.spawn(_tp_mlp_rank, args=(2, free_port(), counts, str(tmp_path)), nprocs=2, join=True)
    for rank in range(2):
        errors = (tmp_path / f"rank{rank}.txt").read_text()
        assert not errors, f"rank {rank}: {errors}"


@register(suite="e2e-distributed", hardware="cpu", schedule="per-commit", est_time=25)
@pytest.mark.parametrize("world_size, batch, fault", [
    (2, 4, FaultPlan(rank=1, step=2, mlp_call=1)),  # mid-forward on a busy rank
    (4, 3, FaultPlan(rank=3, step=1, mlp_call=0)),  # on the idle rank, inside an idle forward
])
def test_rank_failure_fails_every_rank_naming_it(world_size, batch, fault, monkeypatch):
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    cfg = cpu_small()
    options = RunOptions.resolve(algorithm="mtp", gamma=GAMMA, kv_backend="paged", num_slots=1, max_new_tokens=MAX_NEW)
    case = DistCase(cfg, make_prompts(cfg, batch, GAMMA, seed=3), options, fault=fault)
    start = time.monotonic()
    with pytest.raises(DistributedRunError) as info:
        launch([case], world_size, backend="gloo", timeout_s=60, deadline_s=120)
    elapsed = time.monotonic() - start
    first_line = str(info.value).splitlines()[0]
    print(f"{elapsed:.1f} s: {first_line}")
    assert first_line.startswith(f"RankFailure: rank {fault.rank} failed at step {fault.step}"), first_line
    assert "InjectedFault" in first_line
    assert elapsed < 60, f"ranks took {elapsed:.0f} s to fail"


@register(suite="e2e-distributed", hardware="cpu", schedule="per-commit", est_time=25)
@pytest.mark.parametrize("mode", ["exit", "hang"])
def test_crashed_or_hung_rank_ends_the_run(mode, monkeypatch):
    """No control message comes from a dead or stuck rank: the launcher (exit) or the
    process group's timeout (hang) must still end every rank within a bounded time."""
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    cfg = cpu_small()
    options = RunOptions.resolve(algorithm="dspark", gamma=GAMMA, kv_backend="unified", num_slots=1,
                                 max_new_tokens=MAX_NEW)
    case = DistCase(cfg, make_prompts(cfg, 2, GAMMA, seed=3), options,
                    fault=FaultPlan(rank=1, step=1, mlp_call=0, mode=mode))
    start = time.monotonic()
    with pytest.raises(DistributedRunError) as info:
        launch([case], 2, backend="gloo", timeout_s=60 if mode == "exit" else 15, deadline_s=90)
    elapsed = time.monotonic() - start
    text = str(info.value)
    print(f"{elapsed:.1f} s: {text.splitlines()[0]}")
    if mode == "exit":
        assert "process 1 terminated with exit code 3" in text
    else:  # the stuck rank is still running when its peer's collective times out
        assert "deadline" not in text.splitlines()[0], "the process-group timeout should fire before the deadline"
        assert "ranks still running then: [1]" in text
    assert elapsed < 60


@register(suite="e2e-distributed", hardware="mi35x-8", schedule="nightly", est_time=600)
@requires_gpus(2)
def test_dp_tp_nccl_matches_single_rank_and_reference():
    """DSV4 geometry over NCCL/RCCL, world size = min(8, GPUs); runnable by hand on 2 GPUs."""
    world_size = min(8, torch.cuda.device_count())
    cfg = dsv4_geometry()
    prompts = make_prompts(cfg, 2 * world_size - 1, cfg.gamma, seed=0)  # the last rank gets one request fewer
    cases = _cases(cfg, prompts, max_new=16, gamma=cfg.gamma, slots=1, checked=False, device="cuda:0")
    results = launch(cases, world_size, backend="nccl", timeout_s=300)
    _check_equal(cases, results, world_size, device="cuda:0")


@register(suite="e2e-distributed", hardware="cpu", schedule="per-commit", est_time=1)
def test_fault_plan_and_split_inputs():
    assert FaultPlan.parse("1:3") == FaultPlan(1, 3)
    assert FaultPlan.parse("2:0:4:exit") == FaultPlan(2, 0, 4, "exit")
    for bad in ("1", "a:b", "1:-2", "1:2:3:explode"):
        with pytest.raises(ValueError, match="fault"):
            FaultPlan.parse(bad)
    assert requests_of_rank(7, 1, 3) == [1, 4]
    assert sorted(i for r in range(3) for i in requests_of_rank(7, r, 3)) == list(range(7))
    from impl.distributed.tp_mlp import shard_bounds

    assert [shard_bounds(128, r, 4) for r in range(4)] == [(0, 32), (32, 64), (64, 96), (96, 128)]
    with pytest.raises(ValueError, match="divisible"):
        shard_bounds(100, 0, 3)
