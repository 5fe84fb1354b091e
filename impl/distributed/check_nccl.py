"""Check DP-attention / TP-MLP decoding over NCCL on this machine's GPUs.

    python -m impl.distributed.check_nccl [--world-size 2] [--preset dsv4] [--steps 16]
                                          [--batch N] [--backend nccl|gloo] [--timeout 120]

Runs DSpark and MTP on the unified and the paged pool with ``--world-size``
ranks (one GPU each, NCCL; ``NCCL_NVLS_ENABLE=0``), ``--batch`` requests
(default 2 * world + 1, so ranks hold different numbers of requests and some
ranks idle while others still decode), and compares the tokens with the
single-rank engine and the reference decoder on GPU 0. Prints one table row per
case; exits 1 when any case differs. ``--backend gloo`` runs the same on CPU
(minutes with the dsv4 preset; progress lines on stderr say which phase runs).
A mistake in the arguments (or NCCL without enough GPUs) is one line on stderr
and exit 2, before any work.
"""
from __future__ import annotations

import os
import sys
import time

from impl.cli_args import CliParser, Progress, bounded_float, bounded_int, fail
from impl.gates import GateError
from impl.run_options import RunOptions

PROG = "python -m impl.distributed.check_nccl"
ALGORITHMS_AND_KV = [(algo, kv) for algo in ("dspark", "mtp") for kv in ("unified", "paged")]


def build_cases(cfg, options: RunOptions, *, continuations=None):
    """One DistCase per (algorithm, KV backend), same prompts and options otherwise."""
    from impl.distributed.launch import DistCase
    from impl.engine.prompts import make_prompts

    prompts = make_prompts(cfg, options.batch, options.gamma_for(cfg.gamma), options.seed)
    return [DistCase(cfg, prompts, options.replace(algorithm=algo, kv_backend=kv), dict(continuations or {}))
            for algo, kv in ALGORITHMS_AND_KV]


def _parser() -> CliParser:
    ap = CliParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-size", type=bounded_int(2, 8), default=2)
    ap.add_argument("--preset", choices=["cpu-small", "dsv4"], default="dsv4")
    ap.add_argument("--steps", type=bounded_int(1, 256), default=16, help="new tokens per request")
    ap.add_argument("--batch", type=bounded_int(1, 64), default=None)
    ap.add_argument("--draft", default="noisy:0.3", help="model | oracle | noisy:Q | random")
    ap.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=0)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--timeout", type=bounded_float(0, 3600, low_open=True), default=120.0,
                    help="process-group timeout (s)")
    return ap


def _resolve(args) -> tuple:
    """The model config, the batch and the run options the arguments ask for (exit 2 on a bad one)."""
    from impl.engine.drafting import DraftSource
    from impl.model.tiny_config import preset

    try:
        DraftSource.parse(args.draft)
    except ValueError as err:
        fail(PROG, f"argument --draft: {err}")
    cfg = preset(args.preset, args.seed)
    batch = args.batch or 2 * args.world_size + 1
    try:
        options = RunOptions.resolve(os.environ, gamma=cfg.gamma, num_slots=2, draft=args.draft, seed=args.seed,
                                     batch=batch, max_new_tokens=args.steps)
    except GateError as err:
        fail(PROG, str(err))
    return cfg, batch, options


def _visible_gpus(args) -> int:
    """The GPUs torch sees; exit 2 when ``--backend nccl`` needs more than that."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.backend == "nccl" and gpus < args.world_size:
        fail(PROG, f"--backend nccl with --world-size {args.world_size} needs {args.world_size} GPUs, found {gpus} "
                   "(use --backend gloo to run on CPU)")
    return gpus


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    cfg, batch, options = _resolve(args)
    gpus = _visible_gpus(args)
    import torch

    from impl.distributed.compare import expected, prepare, table
    from impl.distributed.launch import launch, pick_backend

    backend = pick_backend(args.world_size, args.backend)
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    from impl.platform import default_kernel_backend

    progress, waiting = Progress("check_nccl"), Progress("check_nccl", every_s=15.0)
    kernels = options.kernel_backend or default_kernel_backend()
    progress(f"world_size={args.world_size} backend={backend} preset={args.preset} batch={batch} "
             f"steps={args.steps} draft={args.draft} kernel_backend={kernels}"
             f"{' (Triton interpreter: slow)' if kernels == 'triton-interpret' else ''}; "
             "reference continuations (reference decoder)", force=True)
    cases = build_cases(cfg, options)
    first = prepare(cases[0], device)  # every case shares prompts, gamma and steps: one reference run
    cases = build_cases(cfg, options, continuations=first.continuations)
    progress(f"distributed run: {len(cases)} cases on {args.world_size} ranks", force=True)
    start = time.perf_counter()
    results = launch(cases, args.world_size, backend=backend, timeout_s=args.timeout, progress=waiting)
    dist_s = time.perf_counter() - start
    exps = []
    for i, case in enumerate(cases):
        progress(f"expected tokens {i + 1}/{len(cases)}: single-rank engine + reference decoder", force=True)
        exps.append(expected(case, device))
    text, ok = table(cases, results, exps)
    print(f"world_size={args.world_size} backend={backend} preset={args.preset} batch={batch} steps={args.steps} "
          f"draft={args.draft} gpus={gpus} distributed run {dist_s:.1f} s")
    print(text)
    print("all equal: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
