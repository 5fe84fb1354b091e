"""Renorm on rows unlike the bench's, against FlashInfer in one process: does the speed claim travel?

    python -m impl.bench.renorm_inputs [--families all] [--batches 1,64,256] [--vocabs 129280]
                                       [--settings top_k=50,top_k=1000,top_p=0.9,top_p=0.95]
                                       [--rounds 3] [--flashinfer-aot DIR] [--json FILE]

Every renorm table elsewhere uses one input family, softmax(3 x randn) rows. The kernels' first pass
splits keys at fixed octaves where such rows keep their pivots, so a different shape of row may
move the pivot, the candidate count and the time. This sweep times the same calls on the families
of ``FAMILIES`` (each a seeded generator, described in its entry), with k in {50, 1000} and p in
{0.9, 0.95} as a [rows] tensor (``--settings`` picks others):

- graph: CUDA-graph replay, 50 calls a graph, median of 20 replays (impl/bench/timing.py);
- eager: ``triton.testing.do_bench`` median of plain calls;
- each round times every case once, ours and FlashInfer's back to back; the table gives medians
  over the rounds and x = FlashInfer / ours (> 1: ours faster).

Before timing, each call's kept set (its nonzero entries) is compared with the fp64 sort-based
definition (docs/design.md §3.9: top-k keeps entries >= the k-th largest, top-p the entries >= the
first, in ascending order, whose cumulative fp64 mass reaches (1 - p) x the row's): the table counts
the rows that differ, for ours and for FlashInfer. fp64 cumulative sums are not the exact oracle of
reference/ops_sampling.py, so a top-p row may differ at an exact boundary; the tests check exactness.
Without FlashInfer (not a project dependency) its columns read "-".
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from impl.cli_args import CliParser, bounded_int, fail, int_list

SETTINGS = (("top_k", 50), ("top_k", 1000), ("top_p", 0.9), ("top_p", 0.95))


def _softmax_of(scale: float):
    def make(rows: int, vocab: int, gen):
        import torch

        return torch.softmax(torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * scale, -1).float()
    return make


def _zipf(rows: int, vocab: int, gen):
    # p ∝ rank^-1.1, ranks a fresh permutation per row: a text-like long tail (a few tokens hold
    # most of the mass, the rest decays as a power, not as a Gaussian's exponent).
    import torch

    weights = torch.arange(1, vocab + 1, dtype=torch.float64) ** -1.1
    order = torch.argsort(torch.rand(rows, vocab, generator=gen), dim=1)
    rows_w = weights[order]
    return (rows_w / rows_w.sum(1, keepdim=True)).float()


def _one_token(rows: int, vocab: int, gen):
    # A confident step: 3 x randn logits, the largest raised until it holds 85-95% of the mass.
    import torch

    logits = torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * 3
    top = logits.argmax(1)
    rest = torch.logsumexp(logits.scatter(1, top[:, None], float("-inf")), 1)
    share = 0.85 + 0.10 * torch.rand(rows, generator=gen, dtype=torch.float64)
    logits[torch.arange(rows), top] = rest + torch.log(share / (1 - share))
    return torch.softmax(logits, -1).float()


def _bf16_rounded(rows: int, vocab: int, gen):
    # softmax(3 x randn) rounded through bf16 (8 significant bits): many equal values, ties at the pivot.
    import torch

    return torch.softmax(torch.randn(rows, vocab, generator=gen) * 3, -1).bfloat16().float()


def _sorted(rows: int, vocab: int, gen):
    # softmax(3 x randn) sorted from the largest entry down: token ids ordered by frequency, at the extreme. Every
    # candidate sits in the row's first entries, so a kernel that shares a row out in contiguous chunks hands
    # them all to its first program.
    import torch

    return torch.softmax(torch.randn(rows, vocab, generator=gen, dtype=torch.float64) * 3, -1).float().sort(
        1, descending=True).values


def _uniform(rows: int, vocab: int, gen):
    # Every entry 1 / vocab: constant logits (an untrained or zero-initialised head). One tie spans the row.
    import torch

    return torch.full((rows, vocab), 1.0 / vocab, dtype=torch.float32)


# name -> (what the rows look like, generator(rows, vocab, torch.Generator) -> fp32 CPU rows)
FAMILIES = {
    "softmax3": ("softmax(3 x randn): the bench's rows (the control)", _softmax_of(3.0)),
    "softmax1": ("softmax(randn): flat rows, top-p keeps a large share", _softmax_of(1.0)),
    "softmax6": ("softmax(6 x randn): peaked rows, top-p keeps few", _softmax_of(6.0)),
    "softmax0.1": ("softmax(0.1 x randn): near-flat rows (a high temperature, random weights)", _softmax_of(0.1)),
    "uniform": ("every entry 1 / vocab: one tie across the row", _uniform),
    "zipf1.1": ("p ~ rank^-1.1 over permuted ranks: a power-law tail", _zipf),
    "one-token": ("3 x randn logits, one token raised to 85-95% of the mass", _one_token),
    "bf16-rounded": ("softmax(3 randn) through bf16: ties", _bf16_rounded),
    "sorted3": ("softmax(3 x randn) sorted largest first: ids ordered by frequency", _sorted),
}


def kept_by_definition(probs, op: str, value: float):
    """The fp64 sort-based kept set (bool, probs' shape) of docs/design.md §3.9."""
    import torch

    x = probs.double()
    if op == "top_k":
        pivot = x.sort(dim=1, descending=True).values[:, min(max(int(value), 1), x.shape[1]) - 1:][:, :1]
        return x >= pivot
    p32 = float(torch.tensor(value, dtype=torch.float32))
    ascending = x.sort(dim=1).values
    cumulative = ascending.cumsum(1)
    target = (1.0 - p32) * x.sum(1, keepdim=True)
    first = (cumulative < target).sum(1, keepdim=True).clamp_max(x.shape[1] - 1)
    return x >= ascending.gather(1, first)


def parse_settings(text: str) -> tuple[tuple[str, float], ...]:
    """'top_k=50,top_p=0.99' -> (("top_k", 50), ("top_p", 0.99)); ValueError naming the bad item."""
    out = []
    for item in text.split(","):
        op, _, value = item.partition("=")
        if op == "top_k" and value.isdecimal() and int(value) >= 1:
            out.append((op, int(value)))
        elif op == "top_p" and _is_float(value) and 0.0 < float(value) <= 1.0:
            out.append((op, float(value)))
        else:
            raise ValueError(f"{item!r}: expected top_k=<int >= 1> or top_p=<float in (0, 1]>")
    return tuple(out)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def measure(families, batches, vocabs, rounds: int, flashinfer=None, settings=SETTINGS) -> list[dict]:
    import torch
    import triton.testing

    import impl
    from impl.bench import timing

    cases = []
    for family in families:
        for vocab in vocabs:
            for bs in batches:
                gen = torch.Generator().manual_seed(1000 * bs + vocab % 997)
                probs = FAMILIES[family][1](bs, vocab, gen).to("cuda")
                for op, value in settings:
                    dtype = torch.float32 if op == "top_p" else torch.int32
                    param = torch.full((bs,), value, dtype=dtype, device="cuda")
                    calls = {"ours": lambda f=getattr(impl, f"{op}_renorm"), x=probs, a=param: f(x, a)}
                    if flashinfer is not None:
                        theirs = getattr(flashinfer, f"{op}_renorm_probs")
                        calls["flashinfer"] = lambda f=theirs, x=probs, a=param: f(x, a)
                    want = kept_by_definition(probs, op, value)
                    differ = {name: int(((call() != 0) != want).any(1).sum()) for name, call in calls.items()}
                    kept = want.sum(1).double().median().item()
                    cases.append(dict(family=family, vocab=vocab, batch=bs, op=op, value=value, calls=calls,
                                      rows_differing=differ, kept_median=kept))
    for done in range(rounds):
        print(f"[renorm_inputs] round {done + 1} of {rounds}: {len(cases)} cases", file=sys.stderr, flush=True)
        for case in cases:
            for name, call in case["calls"].items():
                case.setdefault("graph", {}).setdefault(name, []).append(timing.graph_replay_us(call))
                eager = 1e3 * triton.testing.do_bench(call, warmup=10, rep=40, return_mode="median")
                case.setdefault("eager", {}).setdefault(name, []).append(eager)
    rows = []
    for case in cases:
        row = {k: v for k, v in case.items() if k != "calls"}
        for mode in ("graph", "eager"):
            row[f"{mode}_us"] = {n: round(statistics.median(t), 2) for n, t in case[mode].items()}
            row[f"{mode}_rounds"] = case[mode]
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    from impl.table import format_table

    def pair(row, mode):
        ours, theirs = row[f"{mode}_us"]["ours"], row[f"{mode}_us"].get("flashinfer")
        if theirs is None:
            return [f"{ours:.1f}", "-", "-"]
        return [f"{ours:.1f}", f"{theirs:.1f}", f"{theirs / ours:.2f}x"]

    body = []
    for r in rows:
        setting = f"{'k' if r['op'] == 'top_k' else 'p'}={r['value']}"
        differ = f"{r['rows_differing']['ours']} / {r['rows_differing'].get('flashinfer', '-')}"
        body.append([r["family"], r["vocab"], r["batch"], f"{r['op']} {setting}", f"{r['kept_median']:.0f}",
                     *pair(r, "graph"), *pair(r, "eager"), differ])
    return format_table(["family", "vocab", "rows", "case", "kept/row", "graph ours", "graph FI", "x",
                         "eager ours", "eager FI", "x", "rows != fp64 def (ours / FI)"], body,
                        right=range(1, 12))


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.renorm_inputs", description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="all",
                    help=f"comma-separated names of FAMILIES, or all: {', '.join(FAMILIES)}")
    ap.add_argument("--batches", type=int_list(1, 4096), default=(1, 64, 256), help="rows per case, e.g. 1,64,256")
    ap.add_argument("--vocabs", type=int_list(1, 1 << 20), default=(129280,), help="row lengths, e.g. 32000,129280")
    ap.add_argument("--settings", default=None,
                    help="comma-separated top_k=K / top_p=P cases (default: top_k=50,top_k=1000,top_p=0.9,top_p=0.95)")
    ap.add_argument("--rounds", type=bounded_int(1, 100), default=3)
    ap.add_argument("--flashinfer-aot", help="folder of FlashInfer's prebuilt modules (its columns; '-' without it)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    families = list(FAMILIES) if args.families == "all" else args.families.split(",")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        fail(ap.prog, f"--families: unknown {unknown[0]!r}; expected some of: {', '.join(FAMILIES)}")
    try:
        settings = SETTINGS if args.settings is None else parse_settings(args.settings)
    except ValueError as err:
        fail(ap.prog, f"--settings: {err}")
    import torch

    if not torch.cuda.is_available():
        fail(ap.prog, "needs a GPU (it times CUDA-graph replays)")
    from impl.bench import baselines

    flashinfer = baselines.flashinfer_sampling(args.flashinfer_aot)
    rows = measure(families, args.batches, args.vocabs, args.rounds, flashinfer, settings)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
