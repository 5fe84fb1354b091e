"""Per-kernel GPU time of one top-k and one top-p renorm call, and a tuning sweep (GPU only).

`python -m impl.bench.renorm_kernel_profile [--rows 256] [--vocab 129280] [--k 50] [--p 0.9] [--sweep]
[--batches 1,64,256] [--rounds 1] [--variant JSON ...]`

The profile lists each kernel's device time (torch.profiler) of one top-k call (every row's k =
--k) and one top-p call (p = --p) on softmax(3 randn) rows, the peer benchmark's inputs, so a change
can be pinned to the pass it sped up. It runs without dependent launches (dependent_launch_rows 0,
unless a --variant sets it): with them a kernel's time would include its wait for the one before.
`--sweep` times whole calls as CUDA-graph replays for a few RenormTuning variants (passed explicitly
with ``tuning=``) at each batch of `--batches`, with k in {50, 1000} and p in {0.9, 0.95} (the peer
benchmark's cells). Each
`--variant '{"large_batch_compact": [[256, 1], [512, 1]]}'` (RenormTuning fields as JSON; lists
become tuples) replaces the built-in variants: the defaults are always timed first. Each --variant
is also profiled, after the defaults.
"""
from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from impl.bench.timing import graph_replay_us
from impl.cli_args import CliParser, bounded_int, int_list
from impl.kernels.renorm import DEFAULT_TUNING, top_k_renorm, top_p_renorm

SMALL_SWEEP = [  # RenormTuning changes to try at batches below large_batch_rows; the first is the default
    {},
    {"segment_maxima_rows": 1},
    {"large_batch_rows": 16},
    {"finish_min_rows": (128, 8)},
]
LARGE_SWEEP = [  # and at larger batches
    {},
    {"segment_maxima": False},
    {"large_batch_first_pass": (1024, 8)},
    {"large_batch_compact": ((256, 1), (512, 1))},
    {"large_batch_first_pass": (256, 2)},
    {"large_batch_first_pass": (512, 2)},
]


def _inputs(rows: int, vocab: int, k: int = 50, p: float = 0.9):
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(rows, vocab, generator=gen) * 3, -1).cuda()
    return probs, torch.full((rows,), k, dtype=torch.int32).cuda(), torch.full((rows,), p).cuda()


def _profile(fn, label: str) -> None:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    launches = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"{label}: {sum(e.device_time_total for e in launches):.1f} us of kernels, {len(launches)} launches")
    for event in launches:
        print(f"  {event.device_time_total:8.1f} us  {event.name[:80]}")


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _variant(text: str) -> dict:
    """A --variant: a JSON object of RenormTuning changes, refused here (exit 2) unless it builds one."""
    try:
        changes = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg}): {text[:80]!r}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError(f"nested too deeply: {text[:80]!r}") from None
    if not isinstance(changes, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of RenormTuning fields, got {text[:80]!r}")
    changes = {name: _tuples(value) for name, value in changes.items()}
    try:
        dataclasses.replace(DEFAULT_TUNING, **changes)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)[:200]) from None
    return changes


def _sweep(batches: list[int], vocab: int, variants: list[dict] | None = None, rounds: int = 1) -> None:
    """Graph µs of every variant at every batch; with rounds > 1 the variants take turns, round after
    round, and each cell is the median of its rounds (one slow moment then lands on every variant)."""
    import statistics

    for batch in batches:
        probs, _, _ = _inputs(batch, vocab)
        params = {f"k={k}": (top_k_renorm, torch.full((batch,), k, dtype=torch.int32, device="cuda"))
                  for k in (50, 1000)}
        params |= {f"p={p}": (top_p_renorm, torch.full((batch,), p, device="cuda")) for p in (0.9, 0.95)}
        sweep = SMALL_SWEEP if batch < min(DEFAULT_TUNING.large_batch_rows) else LARGE_SWEEP
        if variants:
            sweep = [{}, *variants]
        times: dict[tuple[int, str], list[float]] = {}
        for _ in range(rounds):
            for i, changes in enumerate(sweep):
                tuning = dataclasses.replace(DEFAULT_TUNING, **changes)
                for name, (op, param) in params.items():
                    try:
                        us = graph_replay_us(lambda op=op, param=param: op(probs, param, tuning=tuning),
                                             calls_per_graph=5, replays=10)
                    except Exception as exc:  # noqa: BLE001  (one failing variant must not end the sweep)
                        print(f"sweep {batch}x{vocab} {changes}: {type(exc).__name__}: {exc}", flush=True)
                        us = float("nan")
                    times.setdefault((i, name), []).append(us)
        for i, changes in enumerate(sweep):
            cells = [f"{name} {statistics.median(times[(i, name)]):7.1f}" for name in params]
            print(f"sweep {batch}x{vocab}  " + "  ".join(cells) + f"  us  {changes or 'defaults'}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = CliParser(prog="python -m impl.bench.renorm_kernel_profile", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=bounded_int(1, 1 << 16), default=256)
    parser.add_argument("--vocab", type=bounded_int(1, 1 << 24), default=129280)
    parser.add_argument("--k", type=bounded_int(1, 1 << 24), default=50)
    parser.add_argument("--p", type=float, default=0.9)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--batches", type=int_list(1, 1 << 16), default=(1, 64, 256),
                        help="batches the sweep times (comma-separated)")
    parser.add_argument("--rounds", type=bounded_int(1, 50), default=1,
                        help="sweep rounds, the variants taking turns; cells are medians of the rounds")
    parser.add_argument("--variant", type=_variant, action="append", default=[],
                        help="a JSON object of RenormTuning changes to sweep (repeatable; replaces the built-in list)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("renorm_kernel_profile needs a GPU")
    probs, k, p = _inputs(args.rows, args.vocab, args.k, args.p)
    for changes in [{}, *args.variant]:  # the defaults, then each --variant
        tuning = dataclasses.replace(DEFAULT_TUNING, **{"dependent_launch_rows": 0, **changes})
        suffix = f"  {changes}" if changes else ""
        _profile(lambda: top_k_renorm(probs, k, tuning=tuning), f"top_k {args.rows}x{args.vocab}{suffix}")
        _profile(lambda: top_p_renorm(probs, p, tuning=tuning), f"top_p {args.rows}x{args.vocab}{suffix}")
    if args.sweep:
        _sweep(list(args.batches), args.vocab, args.variant, args.rounds)


if __name__ == "__main__":
    main()
