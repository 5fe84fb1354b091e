"""Launch a DP-attention / TP-MLP run: one process per rank through ``torch.multiprocessing``.

``launch(cases, world_size)`` starts ``world_size`` processes (spawn), each
calling ``init_process_group`` over TCP on a free local port -- gloo on CPU,
NCCL with one GPU per rank when the machine has enough GPUs -- with a
``timeout`` so a stuck collective errors out. Each rank runs every
:class:`DistCase` in order (one process group, several engines) and writes its
:class:`RankResult` list to a temporary folder that the launcher reads back.

Failures: a rank that raises makes every rank raise :class:`RankFailure`
naming it (:mod:`impl.distributed.lockstep`); the launcher turns the first
process error into :class:`DistributedRunError` whose message carries the
child's ``RankFailure`` line, and kills the ranks if the whole run passes
``deadline_s`` (no hang, whatever happens inside).

``NCCL_NVLS_ENABLE=0`` is a default of this launcher (NVLink multicast off).
"""
from __future__ import annotations

import datetime
import os
import pickle
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from impl.distributed.dp_engine import DpEngine, RankResult
from impl.distributed.lockstep import FaultPlan
from impl.model.tiny_config import TinyConfig
from impl.run_options import RunOptions

ENV_DEFAULTS = {"NCCL_NVLS_ENABLE": "0"}
for _k, _v in ENV_DEFAULTS.items():
    os.environ.setdefault(_k, _v)


@dataclass
class DistCase:
    """One engine run on every rank (greedy): prompts are split round robin across ranks.

    ``options`` (resolved at the edge) carries every choice; ``options.num_slots`` is per
    rank (default 2) and ``options.max_new_tokens`` the tokens per request."""

    cfg: TinyConfig
    prompts: list[list[int]]
    options: RunOptions
    continuations: dict[int, list[int]] = field(default_factory=dict)
    fault: FaultPlan | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.options, RunOptions):
            raise TypeError(f"DistCase.options must be a RunOptions, got {type(self.options).__name__}")
        if self.options.sampling is not None or self.options.graph:
            raise ValueError("distributed runs support greedy eager decoding only (no sampling, no graph)")

    @property
    def max_new_tokens(self) -> int:
        return self.options.max_new_tokens

    @property
    def num_slots(self) -> int:
        return self.options.num_slots or 2

    @property
    def gamma(self) -> int:
        return self.options.gamma_for(self.cfg.gamma)


class DistributedRunError(RuntimeError):
    """A rank process failed (or the run passed its deadline)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_backend(world_size: int, backend: str | None = None) -> str:
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() >= world_size else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if backend == "nccl" and torch.cuda.device_count() < world_size:
        raise ValueError(f"nccl with world_size {world_size} needs that many GPUs, found {torch.cuda.device_count()}")
    return backend


def _rank_main(rank: int, world_size: int, port: int, backend: str, timeout_s: float, cases: list[DistCase],
               out_dir: str) -> None:
    for k, v in ENV_DEFAULTS.items():
        os.environ.setdefault(k, v)
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    results = []
    for case in cases:
        eng = DpEngine(case.cfg, case.options.replace(device=str(device)), fault=case.fault,
                       num_slots=case.num_slots, continuations=case.continuations or None)
        eng.add_requests(case.prompts, case.max_new_tokens)
        results.append(eng.run())
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(results, f)
    dist.barrier(device_ids=[rank]) if backend == "nccl" else dist.barrier()
    dist.destroy_process_group()


def _summarise(err: BaseException) -> str:
    """The most telling line of a child's traceback: its RankFailure, else its last line."""
    text = str(err)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "RankFailure:" in ln:
            return ln[ln.index("RankFailure:"):]
    return lines[-1] if lines else repr(err)


def launch(cases: list[DistCase], world_size: int, *, backend: str | None = None, timeout_s: float = 60.0,
           deadline_s: float = 900.0, progress: Callable[[str], None] | None = None) -> list[list[RankResult]]:
    """Run ``cases`` on ``world_size`` ranks; returns ``results[case][rank]``.

    ``progress(text)`` is called while waiting (about 4 times a second; the caller throttles)."""
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, got {world_size!r}")
    backend = pick_backend(world_size, backend)
    with tempfile.TemporaryDirectory(prefix="dspark-dist-") as out_dir:
        ctx = mp.start_processes(_rank_main, args=(world_size, free_port(), backend, timeout_s, cases, out_dir),
                                 nprocs=world_size, join=False, start_method="spawn")
        end = time.monotonic() + deadline_s
        running = list(range(world_size))
        try:
            while True:
                # ranks alive just before join looks (join terminates the others when one failed):
                # a hung rank shows up here
                running = [rank for rank, p in enumerate(ctx.processes) if p.exitcode is None]
                if ctx.join(timeout=0.25):
                    break
                if progress is not None:
                    progress(f"ranks still running: {running}, {time.monotonic() - end + deadline_s:.0f} s")
                if time.monotonic() > end:
                    raise DistributedRunError(f"distributed run passed its deadline of {deadline_s:.0f} s "
                                              f"(ranks still running: {running}); ranks killed")
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as err:
            others = [rank for rank in running if rank != err.error_index]
            raise DistributedRunError(f"{_summarise(err)}\n(rank {err.error_index} exited first; ranks still "
                                      f"running then: {others})\n--- child traceback ---\n{err}") from None
        finally:
            for p in ctx.processes:  # only ours; a no-op for processes that already exited
                if p.is_alive():
                    p.terminate()
                    p.join(5)
        per_rank = []
        for rank in range(world_size):
            with open(os.path.join(out_dir, f"rank{rank}.pkl"), "rb") as f:
                per_rank.append(pickle.load(f))
    return [[per_rank[r][c] for r in range(world_size)] for c in range(len(cases))]


launch_distributed = launch  # the name impl/__init__ exports


def merged_outputs(results: list[RankResult]) -> dict[int, list[int]]:
    """rid -> tokens over all ranks of one case (each rid lives on exactly one rank)."""
    out: dict[int, list[int]] = {}
    for res in results:
        for rid, toks in res.outputs.items():
            if rid in out:
                raise ValueError(f"request {rid} finished on more than one rank")
            out[rid] = toks
    return dict(sorted(out.items()))
