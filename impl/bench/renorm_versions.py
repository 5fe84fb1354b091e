"""Renorm before and after, in one process (GPU): CUDA-graph µs per call of two trees' kernels, taking turns.

    python -m impl.bench.renorm_versions --before-root DIR [--batches 1,64,256] [--rounds 5] [--json FILE]
                                         [--family NAME]

``--before-root`` is another checkout (``git archive <commit> impl | tar -x``): its ``impl`` is
imported as ``impl_before`` (impl/bench/metadata_cost.py import_renamed) beside this tree's. Inputs
are the peer benchmark's: softmax(3 x randn) rows of 129280 entries, one k or p per row as a tensor,
k in {50, 1000} and p in {0.9, 0.95} (``--family``: one of impl/bench/renorm_inputs.py's row families
instead). Each round times every (case, version) once, the versions
back to back per case, as CUDA-graph replays (impl/bench/timing.py graph_replay_us: 50 calls a graph,
median of 20 replays); the table gives each version's median over the rounds, its range, and the
ratio. Before timing, both versions' outputs for each case are compared: they must be equal bit for
bit (a change of speed must not be a change of result), else the case is reported and not timed.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from impl.bench.renorm_inputs import FAMILIES
from impl.cli_args import CliParser, bounded_int, int_list

VOCAB = 129280
SETTINGS = (("top_k", 50), ("top_k", 1000), ("top_p", 0.9), ("top_p", 0.95))


def measure(versions: dict, batches=(1, 64, 256), rounds: int = 5, vocab: int = VOCAB, device: str = "cuda",
            settings=SETTINGS, family: str | None = None) -> list[dict]:
    """One row per (case, version): graph µs of every round (wall-clock medians on CPU); versions must
    agree bit for bit. ``family``: a row family of impl/bench/renorm_inputs.py instead of the bench's rows."""
    import torch

    from impl.bench import timing
    from impl.bench.renorm_inputs import FAMILIES

    cases = []
    for bs in batches:
        gen = torch.Generator().manual_seed(bs)
        if family is None:
            probs = torch.softmax(torch.randn(bs, vocab, generator=gen) * 3, -1).to(device)
        else:
            probs = FAMILIES[family][1](bs, vocab, gen).to(device)
        for op, value in settings:
            param = torch.full((bs,), value, dtype=torch.float32 if op == "top_p" else torch.int32, device=device)
            calls = {name: (lambda f=getattr(pkg, f"{op}_renorm"), x=probs, p=param: f(x, p))
                     for name, pkg in versions.items()}
            outs = {name: call() for name, call in calls.items()}
            first = next(iter(outs.values()))
            same = all(torch.equal(first, out) for out in outs.values())
            rows_of = "" if family is None else f" {family}"
            cases.append((f"{op} {bs}x{vocab}{rows_of} {op[-1]}={value}", bs, calls, same))
    times: dict = {}
    for _ in range(rounds):
        for name, bs, calls, same in cases:
            if not same:
                continue
            for version, call in calls.items():
                times.setdefault((name, version), []).append(timing.graph_replay_us(call))
    rows = []
    for name, bs, calls, same in cases:
        for version in calls:
            got = times.get((name, version), [])
            rows.append(dict(case=name, batch=bs, version=version, same_output=same, graph_us=got,
                             median_us=round(statistics.median(got), 2) if got else None))
    return rows


def table(rows: list[dict]) -> str:
    """One line per case: each version's median (and range over the rounds), after / before."""
    from impl.table import format_table

    by = {(r["case"], r["version"]): r for r in rows}
    versions = list(dict.fromkeys(r["version"] for r in rows))
    body = []
    for case in dict.fromkeys(r["case"] for r in rows):
        cells, medians = [], []
        for v in versions:
            r = by.get((case, v))
            if r is None or not r["graph_us"]:
                cells.append("-" if r is None or r["same_output"] else "outputs differ: not timed")
                medians.append(None)
                continue
            cells.append(f"{r['median_us']:.1f} ({min(r['graph_us']):.1f}-{max(r['graph_us']):.1f})")
            medians.append(r["median_us"])
        ratio = f"{medians[0] / medians[-1]:.2f}x" if len(medians) > 1 and None not in medians else "-"
        body.append([case, *cells, ratio])
    return format_table(["renorm case (graph us)", *(f"{v}: median (range)" for v in versions),
                         f"{versions[0]} / {versions[-1]}"], body)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.renorm_versions", description=__doc__.splitlines()[0])
    ap.add_argument("--before-root", type=Path, required=True, help="a checkout whose impl is the 'before'")
    ap.add_argument("--batches", type=int_list(1, 1 << 16), default=(1, 64, 256), help="rows per case, e.g. 1,64,256")
    ap.add_argument("--rounds", type=bounded_int(1, 1000), default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--family", choices=sorted(FAMILIES),
                    help="time one row family of impl/bench/renorm_inputs.py instead of the bench's rows")
    args = ap.parse_args(argv)
    if not (args.before_root / "impl" / "__init__.py").is_file():
        ap.error(f"--before-root {args.before_root}: expected a checkout with impl/__init__.py")
    batches = args.batches
    import torch

    import impl
    from impl.bench.metadata_cost import import_renamed

    if not torch.cuda.is_available():
        raise SystemExit("renorm_versions needs a GPU (it times CUDA-graph replays)")
    rows = measure({"before": import_renamed(args.before_root), "after": impl}, batches, args.rounds,
                   family=args.family)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
