"""How often top-p's probe guesses a range the compaction keeps, per row family, against the first pass's range.

    python -m impl.bench.renorm_probe_guess [--rows 32] [--batch 256] [--p 0.9,0.95] [--families NAMES]
                                            [--vocab 129280] [--probe-budget N] [--probe-sample N] [--no-trim]
                                            [--json FILE]

Runs the real kernels (compiled on a GPU, Triton's interpreter on CPU: ``TRITON_INTERPRET=1``), only the
launch that picks the range: the probe (impl/kernels/renorm/probe.py) under ``probe_range``, the first pass
under the default tuning, each on the plan of a ``--batch``-row call (its chunks, sample and scratch), over
``--rows`` rows of each family of impl/bench/renorm_inputs.py. Then, in fp64 on the host, what the first
compaction would find:

  trim      the share of rows whose range the probe ends at its guess of the pivot's end (probe_trim), not
            at the row's end;
  held      the pivot is >= the probe's lo (the exact mass below lo under (1 - p) x the row's mass, or lo 0);
  ends      the pivot is below the range's end (the exact mass below it reaches the target with the
            compaction's margin, kernels.py TRIM_MARGIN), or the range is not trimmed;
  fit       every program's keys in [lo, end) fit its row of the finish's layout (the scratch's slots / chunks;
            a program reads the blocks of the compaction's BLOCK entries dealt to it in turn);
  taken     all three: the probed compaction takes the row; any other row falls back to the passes after it;
  cands     keys in [lo, end) in a row (the finish's work), median and largest over the rows;
  first     the first pass's candidates (keys in its range, CHOSEN_COUNT), median, and the share of rows
            whose range fits the scratch;
  kept      keys >= the pivot (the least any exact range holds), median.
  reads     a model of the finish's work on a row: the candidates each of its 4-way passes reads (the keys
            still in range), summed until at most finish_sort remain, median over the rows; for the first
            pass's range (the default) and the probe's (its first split ending at the probe's SPLIT_END).

It predicts routes and candidate counts, not time: timings come from renorm_kernel_profile and
renorm_versions on the GPU.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
import sys
from pathlib import Path

from impl.bench.renorm_inputs import FAMILIES
from impl.cli_args import CliParser, bounded_int, float_list

VOCAB = 129280


def first_launch(probs, p, tuning, batch: int):
    """Run the plan's first launch (probe or first pass) over ``probs``; returns (state, plan)."""
    import torch

    from impl.kernels.renorm import plan as rplan
    from impl.kernels.renorm import kernels as rk

    plan = rplan._plan(batch, probs.shape[1], True, True, tuning)
    launch = plan.launches[0]
    rows = probs.shape[0]
    state = torch.zeros((rows, int(rk.STATE_W)), dtype=torch.int64, device=probs.device)
    part = torch.zeros((rows, plan.chunks, int(rk.PART_W)), dtype=torch.float64, device=probs.device)
    seg = torch.zeros((rows, -(-probs.shape[1] // int(rk.SEG))), dtype=torch.int32, device=probs.device)
    grid = (rows,) if launch.args == "probe" else (launch.grid[0], rows)
    bufs = (state, state.view(torch.float64)) if launch.args == "probe" else (seg, part, state,
                                                                              state.view(torch.float64))
    meta = {**launch.meta, "PDL": False}
    meta.pop("launch_pdl", None)
    launch.kernel[grid](probs, p, 0.0, *bufs, *launch.sizes, **meta)
    return state, plan


def finish_reads(keys, x, lo: int, hi: int, first_end: int, level: float, target: float,
                 stop: int) -> tuple[int, int, int]:
    """(candidates read, final lo, final hi): the finish's passes over the keys in [lo, hi) of one row (int64
    keys, fp64 masses x; the rule of kernels.py _choose): 4-way splits, the first of [lo, first_end) with the
    rest in its last sub-range, until at most ``stop`` remain or the range is one key."""
    reads, end = 0, first_end
    inside = (keys >= lo) & (keys < hi)
    while hi - lo > 1 and int(inside.sum()) > stop:
        reads += int(inside.sum())
        s = 0
        while (end - lo - 1) >> s >= 4:
            s += 1
        d = ((keys - lo) >> s).clamp(max=3)
        mass = [float(x[inside & (d == b)].sum()) for b in range(4)]
        top = max([b for b in range(4) if mass[b] > 0], default=0)
        best = max(b for b in range(4) if b == 0 or (b <= top and level + sum(mass[:b]) < target))
        level += sum(mass[:best])
        lo, hi = lo + (best << s), hi if best == 3 else min(lo + ((best + 1) << s), hi)
        inside, end = inside & (keys >= lo) & (keys < hi), hi
    return reads, lo, hi


def measure(rows: int = 32, batch: int = 256, ps=(0.9, 0.95), families=None, seed: int = 0,
            vocab: int = VOCAB, **probe) -> list[dict]:
    """One dict a (family, p). ``probe``: RenormTuning changes for the probe (probe_budget, probe_sample)."""
    import torch

    from impl.kernels.renorm import DEFAULT_TUNING
    from impl.kernels.renorm import kernels as rk

    device = "cuda" if torch.cuda.is_available() else "cpu"
    probe_tuning = dataclasses.replace(DEFAULT_TUNING, probe_range=(False, True), one_attempt_rows=1 << 30,
                                       **probe)
    results = []
    for name in families or FAMILIES:
        probs = FAMILIES[name][1](rows, vocab, torch.Generator().manual_seed(seed)).to(device)
        x = probs.double().cpu()
        keys = probs.cpu().view(torch.int32)
        for pv in ps:
            p = torch.full((rows,), pv, device=device)
            state, plan = first_launch(probs, p, probe_tuning, batch)
            compact = plan.launches[1].meta
            regions, layout = compact["REGIONS"], compact["LAYOUT_BLOCK"]
            room = (plan.cap // layout) * (layout // regions)
            lo, hi = state[:, int(rk.LO)].cpu(), state[:, int(rk.HI)].cpu()
            p32 = float(torch.tensor(pv, dtype=torch.float32))
            clean = torch.where(torch.isfinite(x) & (x > 0), x, torch.zeros_like(x))
            total = clean.sum(1)
            below = torch.where(keys < lo[:, None], clean, torch.zeros_like(clean)).sum(1)
            held = (lo == 0) | (below < (1 - p32) * total)
            trimmed = hi < int(rk.KEY_END)
            below_end = torch.where(keys < hi[:, None], clean, torch.zeros_like(clean)).sum(1)
            ends = ~trimmed | (below_end >= (1 - p32) * total + total * rk.TRIM_MARGIN.value)
            in_range = ((keys >= lo[:, None]) & (clean > 0) | (lo[:, None] == 0)) & (keys < hi[:, None])
            owner = (torch.arange(vocab) // compact["BLOCK"]) % plan.chunks  # the compaction's dealt blocks
            per_program = torch.stack([in_range[:, owner == c].sum(1) for c in range(plan.chunks)], 1)
            fit = per_program.max(1).values <= room
            cands = in_range.sum(1)
            first_state, first_plan = first_launch(probs, p, DEFAULT_TUNING, batch)
            first_cands = first_state[:, int(rk.CHOSEN_COUNT)].cpu()
            ascending = clean.sort(1).values
            at = (ascending.cumsum(1) < ((1 - p32) * total)[:, None]).sum(1, keepdim=True).clamp(max=vocab - 1)
            kept = (clean >= ascending.gather(1, at)).sum(1)
            stop = DEFAULT_TUNING.finish_sort[1]
            probe_reads, first_reads = [], []
            for r in range(rows):
                level, goal = float(below[r]), (1 - p32) * float(total[r])
                row_keys = keys[r].to(torch.int64)
                top_key = int(row_keys.max())
                probe_reads.append(finish_reads(row_keys, clean[r], int(lo[r]), min(int(hi[r]), top_key + 1),
                                                int(state[r, int(rk.SPLIT_END)]), level, goal, stop)[0])
                f_lo, f_hi = int(first_state[r, int(rk.LO)]), int(first_state[r, int(rk.HI)])
                f_level = float(torch.where(row_keys < f_lo, clean[r], torch.zeros_like(clean[r])).sum())
                first_reads.append(finish_reads(row_keys, clean[r], f_lo, f_hi, f_hi, f_level, goal, stop)[0])
            results.append({
                "family": name, "p": pv, "rows": rows, "batch": batch, "vocab": vocab, "room": room,
                "probe_budget": probe_tuning.probe_budget, "probe_sample": probe_tuning.probe_sample,
                "regions": regions,
                "probe_trim": probe_tuning.probe_trim, "trimmed": float(trimmed.double().mean()),
                "held": float(held.double().mean()), "ends": float(ends.double().mean()),
                "fit": float(fit.double().mean()), "taken": float((held & ends & fit).double().mean()),
                "cands_median": statistics.median(cands.tolist()), "cands_max": int(cands.max()),
                "first_median": statistics.median(first_cands.tolist()),
                "first_fit": float((first_cands <= first_plan.cap).double().mean()),
                "kept_median": statistics.median(kept.tolist()),
                "reads_probe_median": statistics.median(probe_reads),
                "reads_first_median": statistics.median(first_reads), "device": device})
    return results


def _table(results: list[dict]) -> str:
    lines = [f"{'family':13s} {'p':>5s} {'trim':>6s} {'held':>6s} {'ends':>6s} {'fit':>6s} {'taken':>6s} "
             f"{'cands':>8s} {'max':>7s} {'first':>7s} {'fits':>6s} {'kept':>7s} {'reads':>7s} {'first':>7s}"]
    for r in results:
        lines.append(f"{r['family']:13s} {r['p']:5.2f} {r['trimmed']:6.0%} {r['held']:6.0%} {r['ends']:6.0%} "
                     f"{r['fit']:6.0%} {r['taken']:6.0%} "
                     f"{r['cands_median']:8.0f} {r['cands_max']:7d} {r['first_median']:7.0f} {r['first_fit']:6.0%} "
                     f"{r['kept_median']:7.0f} {r['reads_probe_median']:7.0f} {r['reads_first_median']:7.0f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = CliParser(prog="python -m impl.bench.renorm_probe_guess", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=bounded_int(1, 4096), default=32, help="rows of each family")
    parser.add_argument("--batch", type=bounded_int(1, 1 << 16), default=256,
                        help="the call whose plan (chunks, sample, scratch) the launches take")
    parser.add_argument("--p", type=float_list(0.0, 1.0), default=(0.9, 0.95))
    parser.add_argument("--vocab", type=bounded_int(1024, 1 << 20), default=VOCAB)
    parser.add_argument("--probe-budget", type=bounded_int(0, 1 << 20), default=None,
                        help="RenormTuning.probe_budget (default: the tuning's)")
    parser.add_argument("--probe-sample", type=bounded_int(32, 1 << 16), default=None,
                        help="RenormTuning.probe_sample, a power of two (default: the tuning's)")
    parser.add_argument("--no-trim", action="store_true", help="RenormTuning.probe_trim False")
    parser.add_argument("--families", default=None, help=f"comma-separated, of {', '.join(FAMILIES)}")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    families = args.families.split(",") if args.families else None
    unknown = [f for f in families or () if f not in FAMILIES]
    if unknown:
        parser.error(f"--families: unknown {unknown}; expected names from {list(FAMILIES)}")
    probe = {name: value for name, value in (("probe_budget", args.probe_budget), ("probe_sample", args.probe_sample))
             if value is not None}
    if args.no_trim:
        probe["probe_trim"] = False
    try:
        results = measure(args.rows, args.batch, args.p, families, vocab=args.vocab, **probe)
    except ValueError as err:  # a tuning the probe refuses (a sample not a power of two)
        parser.error(str(err))
    print(f"# top-p's probe at {args.batch} rows' plan, {args.rows} rows a family, probe_budget "
          f"{results[0]['probe_budget']}, probe_sample {results[0]['probe_sample']}, {results[0]['device']}")
    print(_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
