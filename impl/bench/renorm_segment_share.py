"""What share of a row the compaction and the write would read through the segment maxima (CPU model, no kernels).

    python -m impl.bench.renorm_segment_share [--rows 32] [--vocab 129280] [--k 50,1000] [--p 0.9,0.95]
                                              [--json FILE]

The compaction reads the segments (SEG entries) whose largest key is >= the start of its range, the
write the segments whose largest key is >= the pivot (impl/kernels/renorm/kernels.py). This computes,
on the bench's inputs (softmax(3 x randn) rows), the share of segments and the candidates per row for
three ways of choosing that start:

  two-octave bucket   v11's first pass: fixed buckets two octaves wide, the one holding the pivot;
  one-octave bucket   the same with buckets one octave wide: top-k's first pass from v12 (the start
                      the kernels compact from, checked in registered/test_bench_renorm_segment_share.py);
  k-th segment max    the k-th largest segment maximum, a lower bound of the pivot (k segments each
                      hold a key at or above it), computed from the map alone (none with fewer than
                      k segments).

For top-p (--p) the same shares from the first pass's bucket start and from the pivot: its kept set
is spread over most segments, which is why top-p does not use the map (its first pass keeps two-octave
buckets, and may keep one more where its fp32 rounding bound leaves the pivot's bucket open). Top-p's
pivot here is the rule of docs/design.md §3.9 summed in fp64.

It predicts bytes, not time: the GPU measurements are docs/performance.md's.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from impl.cli_args import CliParser, bounded_int, float_list, int_list


def _bucket_start(key, octaves: int, buckets: int):
    """Start key of the first-pass bucket holding ``key``: buckets ``octaves`` wide from 2^-24 up."""
    import torch

    from impl.kernels.renorm import kernels as rk

    base = int(rk.FIRST_BASE)  # the key of 2^-26: bucket 0 is everything below base + one bucket
    shift = 22 + octaves  # one octave is 1 << 23 in key space
    t = ((key - base) >> shift).clamp(0, buckets - 1)
    return torch.where(t == 0, torch.zeros_like(key), base + (t << shift))


def _top_p_pivot(probs, p: float):
    """Per row, top-p's pivot key by the rule of docs/design.md §3.9 in fp64 (the oracle's exact sums
    would pick the same pivot on these rows but a sort in Fractions over 129280 entries takes minutes)."""
    import torch

    p32 = float(torch.tensor(p, dtype=torch.float32))
    ascending = probs.double().sort(-1).values
    target = (1 - p32) * ascending.sum(-1, keepdim=True)
    at = (ascending.cumsum(-1) < target).sum(-1, keepdim=True).clamp(max=probs.shape[1] - 1)
    return ascending.gather(1, at).float().view(torch.int32)[:, 0]


def measure(rows: int = 32, vocab: int = 129280, ks=(50, 1000), seed: int = 0, ps=()) -> list[dict]:
    import torch

    from impl.kernels.renorm import kernels as rk

    seg = int(rk.SEG)
    gen = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(rows, vocab, generator=gen) * 3, -1)
    keys = probs.view(torch.int32)
    pad = -vocab % seg  # key 0 pads the last segment: below every threshold but 0
    seg_max = torch.nn.functional.pad(keys, (0, pad)).view(rows, -1, seg).amax(-1)
    out = []
    for k in ks:
        pivot = keys.topk(k, dim=1).values[:, -1]
        # fewer than k segments bound nothing: every key may be a candidate
        kth = (seg_max.topk(k, dim=1).values[:, -1] if k <= seg_max.shape[1] else torch.zeros_like(pivot))
        starts = {"two-octave bucket": _bucket_start(pivot, 2, 8), "one-octave bucket": _bucket_start(pivot, 1, 16),
                  "k-th segment max": kth}
        for name, start in starts.items():
            out.append(dict(k=k, start=name, segments_read=(seg_max >= start[:, None]).float().mean().item(),
                            candidates_per_row=(keys >= start[:, None]).sum(1).float().mean().item(),
                            below_pivot=bool((start <= pivot).all())))
        out.append(dict(k=k, start="the pivot (the write)",
                        segments_read=(seg_max >= pivot[:, None]).float().mean().item(),
                        candidates_per_row=(keys >= pivot[:, None]).sum(1).float().mean().item(), below_pivot=True))
    for p in ps:  # top-p: the map cannot skip what its candidates are spread over
        pivot = _top_p_pivot(probs, p)
        starts = {"two-octave bucket": _bucket_start(pivot, 2, 8), "one-octave bucket": _bucket_start(pivot, 1, 16),
                  "the pivot (the write)": pivot}
        for name, start in starts.items():
            out.append(dict(p=p, start=name, segments_read=(seg_max >= start[:, None]).float().mean().item(),
                            candidates_per_row=(keys >= start[:, None]).sum(1).float().mean().item(),
                            below_pivot=bool((start <= pivot).all())))
    return out


def table(rows: list[dict]) -> str:
    from impl.table import format_table

    body = [[f"k={r['k']}" if "k" in r else f"p={r['p']}", r["start"], f"{100 * r['segments_read']:.1f}%",
             f"{r['candidates_per_row']:.0f}"] for r in rows]
    return format_table(["case", "threshold", "segments read", "candidates per row"], body)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.renorm_segment_share", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=bounded_int(1, 4096), default=32)
    ap.add_argument("--vocab", type=bounded_int(1, 1 << 20), default=129280)
    ap.add_argument("--k", type=int_list(1, 1 << 20), default=(50, 1000), help="e.g. 50,1000")
    ap.add_argument("--p", type=float_list(0.0, 1.0), default=(0.9, 0.95), help="top-p cases, e.g. 0.9,0.95")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if max(args.k) > args.vocab:
        ap.error(f"--k: every k must be at most --vocab ({args.vocab}), got {max(args.k)}")
    rows = measure(args.rows, args.vocab, args.k, ps=args.p)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
