"""Where an eager call's host time goes (GPU): per-call host microseconds, do_bench medians,
Triton's own launch cost, and a cProfile of one renorm call.

`python impl/bench/eager_host.py [--impl-root DIR] [--json FILE]`

``--impl-root`` imports ``impl`` from another checkout (e.g. an export of the previous
commit) so "before" and "after" run the same probe in one session. Host time per call is
the wall clock of N back-to-back calls without a sync, divided by N (the GPU runs behind);
the do_bench median (L2 flushed between calls, as the peer benchmark times) is what a user
sees when the host is the bottleneck.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

REPO_ROOT = Path(__file__).resolve().parents[2]


@triton.jit
def _store_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


def _host_us(fn, n: int = 300) -> float:
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = time.perf_counter() - t0
    torch.cuda.synchronize()
    return 1e6 * host / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl-root", help="import impl from this directory")
    ap.add_argument("--json", help="write the numbers here")
    args = ap.parse_args()
    sys.path.insert(0, args.impl_root or str(REPO_ROOT))
    import torch
    import triton.testing

    import impl

    print(f"impl from {impl.__file__}")
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    probs = torch.softmax(torch.randn(1, 129280, device=dev, generator=gen) * 3, -1)
    k = torch.full((1,), 50, dtype=torch.int32, device=dev)
    p = torch.full((1,), 0.9, device=dev)
    rows, dim = 16384, 512
    kv = torch.randn(rows, dim, device=dev, generator=gen).bfloat16()
    loc = torch.randperm(4 * rows, device=dev, generator=gen)[:rows].int()
    unified = torch.empty(4 * rows, dim, dtype=torch.bfloat16, device=dev)
    weight = torch.ones(dim, device=dev)
    cos = torch.rand(4096, 32, device=dev, generator=gen)
    sin = torch.rand(4096, 32, device=dev, generator=gen)
    positions = torch.randint(0, 4096, (rows,), device=dev, generator=gen)

    scratch = torch.empty(16, device=dev)
    cases = {
        "top_k_renorm 1x129280 k=50 (tensor)": lambda: impl.top_k_renorm(probs, k),
        "top_p_renorm 1x129280 p=0.9 (tensor)": lambda: impl.top_p_renorm(probs, p),
        "scatter_into_unified 16384x512": lambda: impl.scatter_into_unified(kv, loc, unified),
        "fused_norm_rope_ 16384x512": lambda: impl.fused_norm_rope_(kv, weight, 1e-6, cos, sin, positions, rope_dim=64),
        "triton launch, 3 args (kernel[grid])": lambda: _store_one[(1,)](scratch, 3, BLOCK=16),
    }
    out = {}
    for name, fn in cases.items():
        host = _host_us(fn)
        med = 1e3 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        out[name] = {"host_us_per_call": round(host, 1), "do_bench_median_us": round(med, 1)}
        print(f"{name:40s} host {host:7.1f} us/call   do_bench median {med:7.1f} us", flush=True)
    prof = cProfile.Profile()
    fn = cases["top_p_renorm 1x129280 p=0.9 (tensor)"]
    prof.enable()
    for _ in range(200):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
    print(text.getvalue()[-4000:])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
