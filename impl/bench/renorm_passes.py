"""HBM passes of the renorm select (GPU): bytes each launch reads and writes, against one read
plus one write of the rows (the floor), with the measured time and bandwidth.

    python -m impl.bench.renorm_passes [--batches 1,64,256] [--json FILE]

Per launch of the plan (impl/kernels/renorm/plan.py), after one real call whose per-row state says
which rows were compacted (and how many candidates each copied, from which key on) and whose
segment maxima (one int32 per 32 entries, the first pass's map, where the tuning has it for the
op: RenormTuning.segment_maxima) say which segments a threshold skips (without the map, the
compaction and the write read whole rows):
  first pass        reads every row, writes its segment maxima;
  compact (try a)   for the rows not compacted by an earlier try: reads their maxima and the
                    segments whose largest key is >= the range's lo (top-p's first try weighs
                    every key: the full rows), writes the candidates it copies; a row this try did
                    not take is charged every segment (its lo is not kept: an upper bound); a
                    first try that splits the rows it did not take (SPLIT_UNFIT) reads those again;
  4-way pass        (skip-compacted) reads the rows not compacted yet;
  small-batch pass  reads a compacted row's candidates, else its full row (also the gather);
  finish            reads a compacted row's candidates once (later passes shrink, cache-resident),
                    a row that never fit its full row (at least once: counted once);
  write             reads the maxima and the segments whose largest key is >= the pivot, writes
                    every row.
Partials, state words and parameters (a few KB) are left out. ``passes`` = bytes / (2 x rows x
vocab x 4); ``floor_us`` = a copy of the same rows (one read + one write) timed the same way
(CUDA-graph replay), so ``us / floor_us`` is how far the call is from the floor and
``passes x floor_us`` what the bytes alone would cost at copy speed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from impl.cli_args import CliParser, int_list

VOCAB = 129280
SETTINGS = (("top_k", 50), ("top_k", 1000), ("top_p", 0.9), ("top_p", 0.95))


def launch_bytes(plan, state, vocab: int, seg_max) -> list[tuple[str, int, int]]:
    """(launch, bytes read, bytes written) for each launch of ``plan`` given the per-row ``state``
    (int64 [rows, STATE_W], on the host) and segment maxima (int32 [rows, segments]) a call left."""
    import torch

    from impl.kernels.renorm import kernels as rk

    row = vocab * 4
    seg = int(rk.SEG)
    at = state[:, int(rk.COMPACTED)].tolist()  # the try that compacted each row, 0: never
    ncand = state[:, int(rk.NCAND)].tolist()
    rows = len(at)
    out, tries = [], 0
    seg_bytes = torch.tensor([4 * min(seg, vocab - j) for j in range(0, vocab, seg)], dtype=torch.int64)
    map_bytes = 4 * len(seg_bytes)

    def from_key(r: int, key: int) -> int:
        """Row r's bytes in the segments whose largest key is >= key, and its map."""
        return map_bytes + int(seg_bytes[seg_max[r] >= key].sum())

    def compacted_before(t: int) -> list[bool]:
        return [0 < a < t for a in at]

    for launch in plan.launches:
        kind = launch.args
        if kind == "first":
            out.append(("first pass", rows * row, rows * map_bytes if launch.meta["SEG_MAP"] else 0))
        elif kind == "probe":  # top-p's probe: SAMPLE entries of each chunk
            _, chunk_len, chunks = launch.sizes
            sampled = sum(min(launch.meta["SAMPLE"], vocab - c * chunk_len) for c in range(chunks))
            out.append(("probe", rows * 4 * sampled, 0))
        elif kind == "compact":
            tries += 1
            live = [r for r, done in enumerate(compacted_before(tries)) if not done]
            if launch.meta["MASSES"] or not launch.meta["SEG_MAP"]:
                read = len(live) * row
                if launch.meta.get("SPLIT_UNFIT"):  # the rows this try did not take, read again to split them
                    read += sum(row for r in live if at[r] != tries)
            else:
                read = sum(from_key(r, int(state[r, int(rk.COMPACTED_FROM)]) if at[r] == tries else 0) for r in live)
            copied = sum(4 * n for a, n in zip(at, ncand) if a == tries)
            out.append((f"compact (try {tries})", read, copied))
        elif kind == "pass" and launch.meta.get("SKIP_COMPACTED"):
            live = sum(1 for done in compacted_before(tries + 1) if not done)
            out.append(("4-way pass (uncompacted rows)", live * row, 0))
        elif kind in ("pass", "gather"):
            read = sum(4 * n if a else row for a, n in zip(at, ncand))
            out.append((kind, read, 0))
        else:  # finish
            read = sum(4 * n if a else row for a, n in zip(at, ncand))
            out.append(("finish", read, 0))
    if plan.write.meta["SEG_MAP"]:
        out.append(("write", sum(from_key(r, int(state[r, int(rk.LO)])) for r in range(rows)), rows * row))
    else:
        out.append(("write", rows * row, rows * row))
    return out


def _last_workspace(top_p: bool, rows: int):
    from impl.kernels.renorm import workspace

    for ws in reversed(list(workspace._WORKSPACES.values())):
        if ws.plan.top_p == top_p and ws.state.shape[0] == rows:
            return ws
    raise RuntimeError("no renorm workspace after the call (the eager path keeps one per plan)")


def measure(batches=(1, 64, 256), vocab: int = VOCAB) -> list[dict]:
    import torch

    import impl
    from impl.bench import timing
    from impl.kernels.renorm import workspace

    out = []
    for bs in batches:
        gen = torch.Generator().manual_seed(bs)
        probs = torch.softmax(torch.randn(bs, vocab, generator=gen) * 3, -1).cuda()  # as the bench's cases
        dst = torch.empty_like(probs)
        floor_us = timing.graph_replay_us(lambda: dst.copy_(probs))
        for op, value in SETTINGS:
            top_p = op == "top_p"
            param = torch.full((bs,), value, dtype=torch.float32 if top_p else torch.int32, device="cuda")
            fn = getattr(impl, f"{op}_renorm")
            workspace._WORKSPACES.clear()
            workspace._FAST_INDEX.clear()
            fn(probs, param)
            ws = _last_workspace(top_p, bs)
            per_launch = launch_bytes(ws.plan, ws.state.cpu(), vocab, ws.seg.cpu())
            total = sum(r + w for _, r, w in per_launch)
            us = timing.graph_replay_us(lambda f=fn, p=param: f(probs, p))
            row = dict(op=f"{op}_renorm", shape=f"{bs}x{vocab} fp32 {op[-1]}={value}", batch=bs, variant="project",
                       launches=len(per_launch),
                       per_launch=[dict(launch=n, read=r, written=w) for n, r, w in per_launch],
                       bytes=total, passes=round(total / (2 * bs * vocab * 4), 3), graph_us=round(us, 2),
                       floor_us=round(floor_us, 2), x_floor=round(us / floor_us, 2),
                       achieved_gbps=round(total / us / 1e3, 1), metric="hbm-passes")
            out.append(row)
            print(f"  passes {row['shape']}: {row['passes']} passes, {us:.1f} us (floor {floor_us:.1f}), "
                  f"{row['achieved_gbps']} GB/s", file=sys.stderr, flush=True)
    return out


def table(rows: list[dict]) -> str:
    from impl.table import format_table

    body = [[r["shape"], str(r["launches"]), f"{r['bytes'] / 1e6:.1f}", f"{r['passes']:.2f}", f"{r['graph_us']:.1f}",
             f"{r['floor_us']:.1f}", f"{r['x_floor']:.2f}", f"{r['achieved_gbps']:.0f}",
             f"{r['passes'] * r['floor_us']:.1f}"] for r in rows]
    return format_table(["renorm case", "launches", "MB moved", "HBM passes", "graph us", "floor us (copy)",
                         "x floor", "GB/s achieved", "passes x floor us"], body)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.renorm_passes", description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int_list(1, 1 << 16), default=(1, 64, 256), help="rows per case, e.g. 1,64,256")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("renorm_passes needs a GPU (it reads a real call's state and times it)")
    rows = measure(args.batches)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
