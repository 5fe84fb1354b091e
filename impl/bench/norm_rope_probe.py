"""Fused RMSNorm + RoPE at 1M x 512 bf16 against both copy ceilings, and a launch-shape sweep (GPU).

`python -m impl.bench.norm_rope_probe [--rows 1048576]`

Ceilings: ``copy_ same-size kv`` is torch's copy_ of a kv-shaped bf16 tensor (1 GiB read +
1 GiB write at 1M rows: the HBM floor, the cos/sin table stays in L2); ``copy (counted
bytes)`` is the bench's copy row: a uint8 copy moving the bytes the bench counts for the op
(kv read + write, the 8-byte position and the rope_dim fp32 cos/sin values each row reads).
Each line is a do_bench median (L2 flushed between calls).
"""
from __future__ import annotations

import argparse

import torch
import triton.testing

import impl
from impl.kernels import norm_rope


def _us(fn) -> float:
    return 1e3 * triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1 << 20)
    args = ap.parse_args()
    rows, dim, rope_dim, max_pos = args.rows, 512, 64, 4096
    gen = torch.Generator(device="cuda").manual_seed(0)
    kv = torch.randn(rows, dim, device="cuda", generator=gen).bfloat16()
    weight = 1 + 0.1 * torch.randn(dim, device="cuda", generator=gen)
    cos = torch.rand(max_pos, rope_dim // 2, device="cuda", generator=gen)
    sin = torch.rand(max_pos, rope_dim // 2, device="cuda", generator=gen)
    positions = torch.randint(0, max_pos, (rows,), device="cuda", generator=gen)
    counted = rows * dim * 2 * 2 + rows * (8 + rope_dim * 4)
    src8 = torch.randint(0, 255, (counted // 2,), device="cuda", dtype=torch.uint8, generator=gen)
    dst8, same = torch.empty_like(src8), torch.empty_like(kv)
    base = {
        "copy_ same-size kv": _us(lambda: same.copy_(kv)),
        "copy (counted bytes)": _us(lambda: dst8.copy_(src8)),
        "project": _us(lambda: impl.fused_norm_rope_(kv, weight, 1e-6, cos, sin, positions, rope_dim=rope_dim)),
    }
    for name, us in base.items():
        print(f"{name:28s} {us:8.1f} us  {base['copy_ same-size kv'] / us:6.1%} of copy_ same-size  "
              f"{base['copy (counted bytes)'] / us:6.1%} of counted-bytes copy", flush=True)
    args_ = (kv, weight, cos, sin, positions, rows, 1, max_pos, 1e-6)
    for per_program, warps in ((1, 1), (1, 2), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8)):
        grid = (triton.cdiv(rows, per_program),)
        us = _us(lambda: norm_rope._norm_rope_kernel[grid](*args_, D=dim, ROPE=rope_dim, ROWS=per_program,
                                                             BLOCK_D=dim, num_warps=warps))
        print(f"kernel {per_program} rows/program x {warps} warps {us:8.1f} us  "
              f"{base['copy_ same-size kv'] / us:6.1%} of copy_ same-size", flush=True)


if __name__ == "__main__":
    main()
