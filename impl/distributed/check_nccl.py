"""Check DP-attention / TP-MLP decoding over NCCL on this machine's GPUs.

    python -m impl.distributed.check_nccl [--world-size 2] [--preset dsv4] [--steps 16]
                                          [--batch N] [--backend nccl|gloo] [--timeout 120]

Runs DSpark and MTP on the unified and the paged pool with ``--world-size``
ranks (one GPU each, NCCL; ``NCCL_NVLS_ENABLE=0``), ``--batch`` requests
(default 2 * world + 1, so ranks hold different numbers of requests and some
ranks idle while others still decode), and compares the tokens with the
single-rank engine and the reference decoder on GPU 0. Prints one table row per
case; exits 1 when any case differs.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from impl.distributed.compare import expected, prepare, table
from impl.distributed.launch import DistCase, launch, pick_backend
from impl.model.tiny_config import preset


def build_cases(cfg, *, batch: int, steps: int, seed: int, draft: str) -> list[DistCase]:
    from impl.e2e import make_prompts

    prompts = make_prompts(cfg, batch, cfg.gamma, seed)
    return [DistCase(cfg, prompts, steps, algorithm=algo, gamma=cfg.gamma, kv_backend=kv, num_slots=2, draft=draft,
                     seed=seed)
            for algo in ("dspark", "mtp") for kv in ("unified", "paged")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m impl.distributed.check_nccl", description=__doc__.split("\n\n")[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--preset", choices=["cpu-small", "dsv4"], default="dsv4")
    ap.add_argument("--steps", type=int, default=16, help="new tokens per request")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--draft", default="noisy:0.3", help="model | oracle | noisy:Q | random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--timeout", type=float, default=120.0, help="process-group timeout (s)")
    args = ap.parse_args(argv)
    backend = pick_backend(args.world_size, args.backend)
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    cfg = preset(args.preset, args.seed)
    batch = args.batch or 2 * args.world_size + 1
    cases = [prepare(c, device) for c in build_cases(cfg, batch=batch, steps=args.steps,
                                                     seed=args.seed, draft=args.draft)]
    start = time.perf_counter()
    results = launch(cases, args.world_size, backend=backend, timeout_s=args.timeout)
    dist_s = time.perf_counter() - start
    exps = [expected(c, device) for c in cases]
    text, ok = table(cases, results, exps)
    print(f"world_size={args.world_size} backend={backend} preset={args.preset} batch={batch} steps={args.steps} "
          f"draft={args.draft} gpus={torch.cuda.device_count()} distributed run {dist_s:.1f} s")
    print(text)
    print("all equal: " + ("yes" if ok else "NO"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
