"""How far top-k's launches, the first pass, the compaction and the write, are from their bytes alone.

    python -m impl.bench.renorm_launch_floors [--rows 256] [--vocab 129280] [--k 1000] [--json FILE]

On the peer benchmark's rows (softmax(3 x randn), every row's k = --k), one top-k call is planned
and run as the API runs it; then each launch below is timed alone as CUDA-graph replays (50 launches
a graph, median of 20 replays; wall clock through the interpreter on CPU), on the (chunk, row) grid,
BLOCK and warps the plan gives that launch:

  first pass              the plan's first launch, re-launched alone (it rewrites every state word
                          it reads, so it can repeat)
  read floor              the first pass's grid and [BLOCK // SEG, SEG] tiles, reading every entry
                          and summing it: what the first pass would cost for its bytes alone
  read, keys, maxima      the same plus the first pass's key cleaning and its segment maxima: the
                          first pass without its per-bucket counters
  write                   the plan's write, re-launched alone after a full select (it reads only
                          the state; its output is checked against the call's before timing)
  zero-fill floor         the write's grid and tiles storing zeros: a write that read nothing
  copy floor              the write's grid and tiles reading and storing every entry
  first pass + compaction the plan's first two launches re-launched together (the first pass resets
                          the state the compaction reads); the compaction's own cost is this row
                          minus the first pass's
  gather floor            the segments the compaction read (those whose largest key reaches the
                          row's range start), listed on the host and read BLOCK // SEG a program
                          (one load each, no loop) and summed: the compaction's bytes alone, in its
                          access pattern but with all of them in flight at once (BLOCK x warps:
                          the compaction's shape and a 4-warp one)

The floors are kernels of this module, written to do only what their names say (their tests check
each one entry by entry); a launch's time minus its floors' is what it costs beyond its bytes
(docs/performance.md, "How far renorm is from the floor").
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from impl.cli_args import CliParser, bounded_int
from impl.kernels._backend import tl, triton
from impl.kernels.renorm import kernels as rk


@triton.jit
def _read_floor_kernel(src_ptr, seg_ptr, out_ptr, V, chunk_len, KEYS: tl.constexpr, BLOCK: tl.constexpr):
    # Read a (chunk, row) program's entries in [BLOCK // SEG, SEG] tiles and sum them (KEYS: clean
    # them into keys, store each segment's largest key and keep the largest, as the first pass does).
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    src = src_ptr + row.to(tl.int64) * V
    seg_dst = seg_ptr + row.to(tl.int64) * tl.cdiv(V, rk.SEG)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    ROWS: tl.constexpr = BLOCK // rk.SEG
    segs = tl.arange(0, ROWS)
    tile = segs[:, None] * rk.SEG + tl.arange(0, rk.SEG)[None, :]
    acc = tl.zeros([ROWS, rk.SEG], tl.float32)
    top = tl.zeros([ROWS, 1], tl.int32)  # the first pass's own [ROWS, 1] running maximum (no broadcast)
    for off in range(start, end, BLOCK):
        offs = off + tile
        if KEYS:
            _, key = rk._load_keys(src + offs, offs < end)
            seg_max = tl.max(key, axis=1)
            tl.store(seg_dst + off // rk.SEG + segs, seg_max, mask=off + segs * rk.SEG < end)
            top = tl.maximum(top, seg_max[:, None])
        else:
            acc += tl.load(src + offs, mask=offs < end, other=0.0)
    if KEYS:
        tl.store(out_ptr + row * tl.num_programs(0) + chunk, tl.max(top).to(tl.float32, bitcast=True))
    else:
        tl.store(out_ptr + row * tl.num_programs(0) + chunk, tl.sum(acc))


@triton.jit
def _store_floor_kernel(src_ptr, dst_ptr, V, chunk_len, COPY: tl.constexpr, BLOCK: tl.constexpr):
    # Store a (chunk, row) program's entries in [BLOCK // SEG, SEG] tiles: zeros, or (COPY) the source's.
    chunk = tl.program_id(0)
    row = tl.program_id(1)
    base = row.to(tl.int64) * V
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    ROWS: tl.constexpr = BLOCK // rk.SEG
    tile = tl.arange(0, ROWS)[:, None] * rk.SEG + tl.arange(0, rk.SEG)[None, :]
    for off in range(start, end, BLOCK):
        offs = off + tile
        y = tl.zeros([ROWS, rk.SEG], tl.float32)
        if COPY:
            y = tl.load(src_ptr + base + offs, mask=offs < end, other=0.0)
        tl.store(dst_ptr + base + offs, y, mask=offs < end)


@triton.jit
def _gather_floor_kernel(src_ptr, starts_ptr, out_ptr, n, V, BLOCK: tl.constexpr):
    # Read this program's BLOCK // SEG listed segments (starts_ptr: each one's first entry in the
    # flattened rows, n of them in all) in one [BLOCK // SEG, SEG] tile and store their sum.
    ROWS: tl.constexpr = BLOCK // rk.SEG
    i = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = i < n
    first = tl.load(starts_ptr + i, mask=live, other=0)
    col = tl.arange(0, rk.SEG)[None, :]
    ok = live[:, None] & ((first % V)[:, None] + col < V)  # a row's last segment may be short
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.load(src_ptr + first[:, None] + col, mask=ok, other=0.0)))


def listed_segment_starts(seg, lo, vocab: int):
    """The first entry (in the flattened rows) of every segment whose largest key ``seg[row, j]`` is
    at least its row's ``lo``: what the compaction reads."""
    import torch

    row, j = torch.nonzero(seg >= lo[:, None].to(seg.dtype), as_tuple=True)
    return row.to(torch.int64) * vocab + j.to(torch.int64) * int(rk.SEG)


def measure(rows: int = 256, vocab: int = 129280, k: int = 1000, seed: int = 0, device: str | None = None,
            tuning=None) -> list[dict]:
    """One row per launch or floor: its µs, the (chunk, row) grid and its (BLOCK, warps). ``tuning``:
    a RenormTuning (tests pass small shapes), else the default."""
    import torch

    from impl.bench.timing import graph_replay_us
    from impl.kernels.renorm import DEFAULT_TUNING, top_k_renorm
    from impl.kernels._backend import ptx_ok
    from impl.kernels.renorm.plan import _plan_for
    from impl.kernels.renorm.workspace import _launch_all
    from impl.platform import default_device

    dev = device or default_device()
    gen = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(rows, vocab, generator=gen) * 3, -1).to(dev)
    ks = torch.full((rows,), k, dtype=torch.int32, device=dev)
    tuning = tuning or DEFAULT_TUNING
    plan = _plan_for(rows, vocab, False, True, tuning, False, ptx_ok(probs))  # the API's stores, no PDL
    first, write = plan.launches[0], plan.write
    if not first.meta["SEG_MAP"] or not write.meta["SEG_MAP"]:
        raise ValueError(f"--rows {rows} do not take the segment maxima, whose tiles the floors model: "
                         f"expected at least {tuning.segment_maxima_rows} rows")
    want = top_k_renorm(probs, ks, tuning=tuning)
    out = torch.full_like(probs, float("nan"))  # poisoned: the re-launched write must cover every entry
    ws = _launch_all(probs, None, ks, plan, out)
    chunk_len = first.sizes[1]
    if write.sizes[1] != chunk_len or write.grid != first.grid:
        raise AssertionError("the write and the first pass no longer share their (chunk, row) grid")

    def launch(step, *head):
        step.kernel[step.grid](*head, *ws.args(step, False), **step.meta)

    rows_out = []

    def timed(name: str, fn, shape) -> None:
        rows_out.append({"launch": name, "us": round(graph_replay_us(fn), 2), "grid": list(first.grid),
                         "block": shape[0], "warps": shape[1]})

    first_shape = (first.meta["BLOCK"], first.meta["num_warps"])
    write_shape = (write.meta["BLOCK"], write.meta["num_warps"])
    # the write first: the first pass's re-launch rewrites the state (the pivot, the kept mass) it reads
    launch(write, probs, out)
    if not torch.equal(out.view(torch.int32), want.view(torch.int32)):
        raise AssertionError("the re-launched write differs from the call's output")
    timed("write", lambda: launch(write, probs, out), write_shape)
    sums = torch.empty(rows * first.grid[0], device=dev)
    seg = torch.empty_like(ws.seg)
    sink = torch.empty_like(probs)
    grid = first.grid
    timed("zero-fill floor", lambda: _store_floor_kernel[grid](probs, sink, vocab, chunk_len, COPY=False,
                                                               BLOCK=write_shape[0], num_warps=write_shape[1]),
          write_shape)
    timed("copy floor", lambda: _store_floor_kernel[grid](probs, sink, vocab, chunk_len, COPY=True,
                                                          BLOCK=write_shape[0], num_warps=write_shape[1]), write_shape)
    timed("first pass", lambda: launch(first, probs, ks, 0), first_shape)
    timed("read floor", lambda: _read_floor_kernel[grid](probs, seg, sums, vocab, chunk_len, KEYS=False,
                                                         BLOCK=first_shape[0], num_warps=first_shape[1]), first_shape)
    timed("read, keys, maxima", lambda: _read_floor_kernel[grid](probs, seg, sums, vocab, chunk_len, KEYS=True,
                                                                 BLOCK=first_shape[0], num_warps=first_shape[1]),
          first_shape)
    if not torch.equal(seg, ws.seg):
        raise AssertionError("the floor's segment maxima differ from the first pass's")
    compact = plan.launches[1]
    if compact.args != "compact":
        raise AssertionError("the plan's second launch is no longer the compaction")
    compact_shape = (compact.meta["BLOCK"], compact.meta["num_warps"])
    timed("first pass + compaction", lambda: (launch(first, probs, ks, 0), launch(compact, probs, ks, 0)),
          compact_shape)
    lo = ws.state[:, int(rk.COMPACTED_FROM)]
    if not bool((ws.state[:, int(rk.COMPACTED)] == 1).all()):
        raise AssertionError("a row did not fit the first compaction: its reads are not the listed segments'")
    starts = listed_segment_starts(ws.seg, lo, vocab)
    for shape in dict.fromkeys([compact_shape, (1024, 4)]):
        programs = -(-starts.numel() // (shape[0] // int(rk.SEG)))
        out_sums = torch.empty(max(programs, 1), device=dev)
        timed("gather floor", lambda shape=shape, programs=programs, out_sums=out_sums: _gather_floor_kernel[
            (programs,)](probs, starts, out_sums, starts.numel(), vocab, BLOCK=shape[0], num_warps=shape[1]), shape)
        rows_out[-1].update(grid=[programs], segments=starts.numel(),
                            segment_share=round(starts.numel() / ws.seg.numel(), 4))
    for r in rows_out:
        r.update(rows=rows, vocab=vocab, k=k, mb=round(probs.numel() * 4 / 1e6, 1))
    compaction = next(r["us"] for r in rows_out if r["launch"] == "first pass + compaction") - next(
        r["us"] for r in rows_out if r["launch"] == "first pass")
    rows_out.append({"launch": "compaction (difference)", "us": round(compaction, 2), "grid": list(first.grid),
                     "block": compact_shape[0], "warps": compact_shape[1], "rows": rows, "vocab": vocab, "k": k,
                     "mb": rows_out[0]["mb"]})
    return rows_out


def table(rows: list[dict]) -> str:
    lines = [f"{'launch':24s}  {'us':>8s}  {'BLOCK x warps':>13s}  grid (chunks, rows) or (programs,)"]
    for r in rows:
        share = f"  {r['segments']} segments, {100 * r['segment_share']:.1f}% of them" if "segments" in r else ""
        lines.append(f"{r['launch']:24s}  {r['us']:8.1f}  {str(r['block']) + ' x ' + str(r['warps']):>13s}  "
                     f"{tuple(r['grid'])}{share}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.renorm_launch_floors", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=bounded_int(1, 1 << 16), default=256)
    ap.add_argument("--vocab", type=bounded_int(64, 1 << 24), default=129280)
    ap.add_argument("--k", type=bounded_int(1, 1 << 24), default=1000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    try:
        rows = measure(args.rows, args.vocab, args.k)
    except ValueError as e:
        ap.error(str(e))
    print(f"top-k {args.rows} x {args.vocab}, k = {args.k}: graph us per launch")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
