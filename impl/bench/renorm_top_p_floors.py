"""Where top-p's first compaction spends its time: the launch against floors on its own grid and shape.

    python -m impl.bench.renorm_top_p_floors [--rows 256] [--vocab 129280] [--p 0.9] [--json FILE]

On the peer benchmark's rows (softmax(3 x randn), every row's p = --p), one top-p call is planned and
run as the API runs it; then each row below is timed alone as CUDA-graph replays (50 launches a graph,
median of 20 replays; wall clock through the interpreter on CPU):

  write                   the plan's write, re-launched alone after the call (checked against its output)
  copy floor              the write's grid and tiles reading and storing every entry
  first pass              the plan's first launch, re-launched alone
  read floor              the first pass's grid and tiles, reading every entry and summing it
  first pass + compaction the first two launches together; the compaction's own cost is this row minus
                          the first pass's ("compaction (difference)")
  and on the compaction's (chunk, row) grid, BLOCK, warps and walk (a step ahead, its grid reversed):
  compaction read         reading every entry and summing it in fp32
  + exact masses          cleaning the entries into keys and summing, in each step's reduction, the exact
                          fp64 masses below the row's range and of the rest, as the compaction does
  + range count           and counting the keys in the row's range in that same reduction: the
                          compaction without its copies, its prologue and its ticket
  fp32 masses + count     the row above with the masses in fp32 (not exact; what fp64 costs)

The floor kernels do only what their names say; the masses and counts they store are checked against
the compaction's own partial words and a count on the host before anything is timed
(docs/performance.md, "How far renorm is from the floor").
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from impl.bench.renorm_launch_floors import _read_floor_kernel, _store_floor_kernel
from impl.cli_args import CliParser, bounded_int
from impl.kernels._backend import tl, triton
from impl.kernels.renorm import kernels as rk

WORKS = ("compaction read", "+ exact masses", "+ range count", "fp32 masses + count")


@triton.jit
def _weigh_floor_kernel(src_ptr, bounds_ptr, out_ptr, V, chunk_len, WORK: tl.constexpr, BLOCK: tl.constexpr,
                        REVERSED: tl.constexpr):
    # Walk a (chunk, row) program's entries as top-p's first compaction does (BLOCK a step, the next step's
    # load issued before this step's work) and do WORK's share of its work (WORKS above, by index).
    chunk, row = rk._chunk_and_row(REVERSED)
    src = src_ptr + row.to(tl.int64) * V
    lo = tl.load(bounds_ptr + 2 * row)
    hi = tl.load(bounds_ptr + 2 * row + 1)
    start = chunk * chunk_len
    end = tl.minimum(start + chunk_len, V)
    idx = tl.arange(0, BLOCK)
    ahead = tl.load(src + start + idx, mask=start + idx < end, other=0.0)
    acc = tl.zeros([BLOCK], tl.float32)
    below = tl.zeros([], tl.float64)
    rest = tl.zeros([], tl.float64)
    count = tl.zeros([], tl.int32)
    for off in range(start, end, BLOCK):
        offs = off + idx
        raw = ahead
        ahead = tl.load(src + offs + BLOCK, mask=offs + BLOCK < end, other=0.0)
        if WORK == 0:
            acc += raw
        else:
            x, key = rk._clean(raw)  # masked lanes loaded 0: key 0, below every range but lo = 0's
            if WORK == 3:
                part_below = tl.where(key < lo, x, 0.0)
                part_rest = x - part_below
            else:
                part_below, part_rest = rk._below_and_rest(x, key, lo)
            if WORK == 1:
                step_below, step_rest = tl.reduce((part_below, part_rest), 0, rk._add_two)
            else:
                in_range = ((offs < end) & (key >= lo) & (key < hi)).to(tl.int32)
                n, step_below, step_rest = tl.reduce((in_range, part_below, part_rest), 0, rk._add_three)
                count += n
            below += step_below
            rest += step_rest
    out = out_ptr + (row * tl.num_programs(0) + chunk) * 3
    if WORK == 0:
        tl.store(out, tl.sum(acc, axis=0).to(tl.float64))
    else:
        tl.store(out, below)
        tl.store(out + 1, rest)
        tl.store(out + 2, count.to(tl.float64))


def measure(rows: int = 256, vocab: int = 129280, p: float = 0.9, seed: int = 0, device: str | None = None,
            tuning=None) -> list[dict]:
    """One row per launch or floor: its µs, the (chunk, row) grid and its (BLOCK, warps). ``tuning``:
    a RenormTuning (tests pass small shapes), else the default."""
    import torch

    from impl.bench.timing import graph_replay_us
    from impl.kernels._backend import ptx_ok
    from impl.kernels.renorm import DEFAULT_TUNING, top_p_renorm
    from impl.kernels.renorm.plan import _plan_for
    from impl.kernels.renorm.workspace import _launch_all
    from impl.platform import default_device

    dev = device or default_device()
    gen = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(rows, vocab, generator=gen) * 3, -1).to(dev)
    ps = torch.full((rows,), p, dtype=torch.float32, device=dev)
    tuning = tuning or DEFAULT_TUNING
    plan = _plan_for(rows, vocab, True, True, tuning, False, ptx_ok(probs))  # the API's stores, no PDL
    first, compact, write = plan.launches[0], plan.launches[1], plan.write
    if first.args != "first" or compact.args != "compact" or not compact.meta["MASSES"]:
        raise ValueError(f"--rows {rows}: the plan does not open with the first pass and the compaction that weighs "
                         "every entry (expected top-p's default plan, without the probe)")
    if compact.meta["STEP_SUMS"] != 1 or compact.meta["REGIONS"]:
        raise ValueError(f"--rows {rows}: the compaction does not sum its masses in each step's reduction, "
                         "the walk the floors model")
    want = top_p_renorm(probs, ps, tuning=tuning)
    out = torch.full_like(probs, float("nan"))  # poisoned: the re-launched write must cover every entry
    ws = _launch_all(probs, None, ps, plan, out)

    def launch(step, *head):
        step.kernel[step.grid](*head, *ws.args(step, False), **step.meta)

    rows_out = []

    def timed(name: str, fn, step) -> None:
        rows_out.append({"launch": name, "us": round(graph_replay_us(fn), 2), "grid": list(step.grid),
                         "block": step.meta["BLOCK"], "warps": step.meta["num_warps"]})

    launch(write, probs, out)  # the write first: re-launching the first pass rewrites the state it reads
    if not torch.equal(out.view(torch.int32), want.view(torch.int32)):
        raise AssertionError("the re-launched write differs from the call's output")
    timed("write", lambda: launch(write, probs, out), write)
    sink = torch.empty_like(probs)
    wblock, wwarps, chunk_len = write.meta["BLOCK"], write.meta["num_warps"], first.sizes[1]
    timed("copy floor", lambda: _store_floor_kernel[write.grid](probs, sink, vocab, chunk_len, COPY=True,
                                                                BLOCK=wblock, num_warps=wwarps), write)
    timed("first pass", lambda: launch(first, probs, ps, 0.0), first)
    sums = torch.empty(rows * first.grid[0], device=dev)
    seg = torch.empty(rows, -(-vocab // int(rk.SEG)), dtype=torch.int32, device=dev)
    timed("read floor", lambda: _read_floor_kernel[first.grid](probs, seg, sums, vocab, chunk_len, KEYS=False,
                                                               BLOCK=first.meta["BLOCK"],
                                                               num_warps=first.meta["num_warps"]), first)
    launch(first, probs, ps, 0.0)
    bounds = ws.state[:, [int(rk.LO), int(rk.HI)]].to(torch.int32).contiguous()  # the range the compaction reads
    chunks = compact.grid[0]
    part = ws.part.view(torch.float64).view(rows, chunks, -1)
    part[:, :, [int(rk.BELOW_SLOT), int(rk.REST_SLOT)]] = float("nan")  # poisoned: the compaction must rewrite them
    launch(compact, probs, ps, 0.0)
    masses = part[:, :, [int(rk.BELOW_SLOT), int(rk.REST_SLOT)]].clone()
    timed("first pass + compaction", lambda: (launch(first, probs, ps, 0.0), launch(compact, probs, ps, 0.0)),
          compact)
    keys = probs.view(torch.int32).clamp(min=0).view(rows, -1)
    lo, hi = bounds[:, :1].to(keys.device), bounds[:, 1:].to(keys.device)
    counts = torch.nn.functional.pad(((keys >= lo) & (keys < hi)).to(torch.float64), (0, chunks * chunk_len - vocab))
    counts = counts.view(rows, chunks, chunk_len).sum(-1)
    floor_out = torch.empty(rows * chunks * 3, dtype=torch.float64, device=dev)
    meta = {"BLOCK": compact.meta["BLOCK"], "num_warps": compact.meta["num_warps"],
            "REVERSED": compact.meta["REVERSED"]}
    for work, name in enumerate(WORKS):
        def run(work=work):
            _weigh_floor_kernel[compact.grid](probs, bounds, floor_out, vocab, chunk_len, WORK=work, **meta)
        run()
        got = floor_out.view(rows, chunks, 3)
        if work in (1, 2) and not torch.equal(got[:, :, :2], masses):
            raise AssertionError(f"{name}: the floor's masses differ from the compaction's partial words")
        if work >= 2 and not torch.equal(got[:, :, 2], counts):
            raise AssertionError(f"{name}: the floor's range counts differ from the host's")
        timed(name, run, compact)
    for r in rows_out:
        r.update(rows=rows, vocab=vocab, p=p, mb=round(probs.numel() * 4 / 1e6, 1))
    by_name = {r["launch"]: r["us"] for r in rows_out}
    rows_out.append({**rows_out[-1], "launch": "compaction (difference)",
                     "us": round(by_name["first pass + compaction"] - by_name["first pass"], 2)})
    return rows_out


def table(rows: list[dict]) -> str:
    lines = [f"{'launch':24s}  {'us':>8s}  {'BLOCK x warps':>13s}  grid (chunks, rows)"]
    for r in rows:
        lines.append(f"{r['launch']:24s}  {r['us']:8.1f}  {str(r['block']) + ' x ' + str(r['warps']):>13s}  "
                     f"{tuple(r['grid'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.renorm_top_p_floors", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=bounded_int(1, 1 << 16), default=256)
    ap.add_argument("--vocab", type=bounded_int(64, 1 << 24), default=129280)
    ap.add_argument("--p", type=float, default=0.9)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not 0.0 < args.p < 1.0:
        ap.error(f"--p: expected a probability in (0, 1), got {args.p}")
    try:
        rows = measure(args.rows, args.vocab, args.p)
    except ValueError as e:
        ap.error(str(e))
    print(f"top-p {args.rows} x {args.vocab}, p = {args.p}: graph us per launch")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
