"""What one full-row pass of the renorm radix select costs, per way of binning (GPU probe).

`python -m impl.bench.renorm_pass_probe [--rows 256] [--vocab 129280] [--out DIR]`

Every variant reads the whole [rows, vocab] fp32 matrix once, split into (chunk, row)
programs like the renorm kernels, and reduces it to a few numbers per program, so the
differences between variants are the binning arithmetic, not the memory traffic. The
table backs the design notes in impl/kernels/renorm/plan.py (docs/performance.md has the runs).
"""
from __future__ import annotations

import argparse
import json
import pathlib

import torch

from impl.kernels._backend import tl, triton


@triton.jit
def _probe_kernel(x_ptr, out_ptr, V, chunk_len, MODE: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    base = x_ptr + row.to(tl.int64) * V
    acc = tl.zeros([BLOCK], tl.float64)
    a1 = tl.zeros([BLOCK], tl.float64)
    a2 = tl.zeros([BLOCK], tl.float64)
    a3 = tl.zeros([BLOCK], tl.float64)
    counts = tl.zeros([NB], tl.int32)
    tile = tl.zeros([BLOCK, NB], tl.float64)
    bins = tl.arange(0, NB)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        ok = offs < end
        x = tl.load(base + offs, mask=ok, other=0.0)
        key = x.to(tl.int32, bitcast=True)
        match = ok & ((key >> 27) == 0x7)  # a prefix most keys of a probability row share
        if MODE == 0:  # fp64 sum: the memory floor
            acc += x.to(tl.float64)
        elif MODE == 1:  # masked count histogram of a 4-bit digit
            counts += tl.histogram((key >> 23) & (NB - 1), NB, mask=match)
        elif MODE == 2:  # unmasked count histogram of the whole exponent
            counts += tl.histogram((key >> 23) & (NB - 1), NB)
        elif MODE == 3:  # the v2 trick: off-prefix keys into an extra half of bins
            counts += tl.histogram(tl.where(match, (key >> 23) & (NB // 2 - 1), NB // 2), NB)
        elif MODE == 4:  # fp64 one-hot tile [BLOCK, NB] (v2 top-p)
            d = (key >> 23) & (NB - 1)
            tile += tl.where(match[:, None] & (d[:, None] == bins[None, :]), x.to(tl.float64)[:, None], 0.0)
        elif MODE == 5:  # four separate fp64 accumulators, one per 2-bit digit
            d = (key >> 23) & 3
            xd = tl.where(match, x.to(tl.float64), 0.0)
            acc += tl.where(d == 0, xd, 0.0)
            a1 += tl.where(d == 1, xd, 0.0)
            a2 += tl.where(d == 2, xd, 0.0)
            a3 += tl.where(d == 3, xd, 0.0)
        elif MODE == 6:  # fp64 sums below three thresholds (cumulative form of mode 5)
            xd = tl.where(match, x.to(tl.float64), 0.0)
            acc += tl.where(key < 0x39000000, xd, 0.0)
            a1 += tl.where(key < 0x3A000000, xd, 0.0)
            a2 += tl.where(key < 0x3B000000, xd, 0.0)
            a3 += xd
        else:  # read + write of the kept entries (the write pass)
            y = tl.where(key >= 0x3A000000, x.to(tl.float64) * 1.25, 0.0)
            tl.store(out_ptr + 64 + row.to(tl.int64) * V + offs, y.to(tl.float32), mask=ok)
    total = (tl.sum(acc + a1 + a2 + a3, axis=0) + tl.sum(counts, axis=0).to(tl.float64)
             + tl.sum(tl.sum(tile, axis=1), axis=0))
    tl.store(out_ptr + row * 64 + chunk % 64, total)


MODES = {
    "fp64 sum (floor)": (0, 1), "hist 16 masked": (1, 16), "hist 32 masked": (1, 32), "hist 64 masked": (1, 64),
    "hist 256 masked": (1, 256), "hist 256 unmasked": (2, 256), "hist 512 (v2 trick)": (3, 512),
    "fp64 one-hot tile x4": (4, 4), "fp64 4 accumulators": (5, 1), "fp64 3 thresholds": (6, 1),
    "write pass (read+write)": (7, 1),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=129280)
    parser.add_argument("--out", type=pathlib.Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("renorm_pass_probe needs a GPU (it times compiled kernels)")
    gen = torch.Generator().manual_seed(0)
    x = torch.softmax(torch.randn(args.rows, args.vocab, generator=gen) * 3, -1).cuda()
    out = torch.empty(args.rows * args.vocab + 64 * max(args.rows, 64) + 64, dtype=torch.float64, device="cuda")
    floor_bytes = x.numel() * 4
    results = []
    for block, warps, programs in [(1024, 4, 528), (2048, 8, 528), (1024, 8, 1056), (4096, 8, 528)]:
        steps = triton.cdiv(args.vocab, block)
        chunks = max(1, min(steps, triton.cdiv(programs, args.rows), 64))
        chunk_len = block * triton.cdiv(steps, chunks)
        grid = (triton.cdiv(args.vocab, chunk_len), args.rows)
        for name, (mode, nb) in MODES.items():
            if mode == 4 and block > 1024:
                continue
            fn = lambda: _probe_kernel[grid](x, out, args.vocab, chunk_len, MODE=mode, NB=nb, BLOCK=block,  # noqa: E731
                                             num_warps=warps)
            try:
                us = triton.testing.do_bench(fn, warmup=10, rep=50) * 1e3
            except Exception as exc:  # a variant that does not compile is reported, not fatal
                print(f"{name:26s} block {block} warps {warps}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            nbytes = floor_bytes * (2 if mode == 7 else 1)
            results.append(dict(variant=name, block=block, warps=warps, programs=grid[0] * grid[1], us=us,
                                gbps=nbytes / us / 1e3))
            print(f"{name:26s} block {block:5d} warps {warps} programs {grid[0] * grid[1]:5d}: "
                  f"{us:8.1f} us {nbytes / us / 1e3:7.0f} GB/s")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "renorm_pass_probe.json").write_text(json.dumps(
            dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
                 rows=args.rows, vocab=args.vocab, results=results), indent=1))


if __name__ == "__main__":
    main()
