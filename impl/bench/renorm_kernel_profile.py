"""Per-kernel GPU time of one top-k and one top-p renorm call, and a launch-shape sweep (GPU only).

`python -m impl.bench.renorm_kernel_profile [--rows 256] [--vocab 129280] [--sweep]`

The profile lists each kernel's device time (torch.profiler) so a change can be
pinned to the pass it sped up; `--sweep` times whole calls as CUDA-graph replays
for a few launch shapes (module constants of impl.kernels.renorm) at the given
batch and at batch 1.
"""
from __future__ import annotations

import argparse
import torch

import impl
import impl.kernels.renorm as renorm
from impl.bench.timing import graph_replay_us

SWEEP = [  # constants of impl.kernels.renorm to try; the first is the module's own
    {},
    {"SMALL_BATCH_PASSES": 2},
    {"SHORT_SORT": 128},
    {"SMALL_BATCH_PASSES": 2, "SHORT_SORT": 128},
    {"SORT_CAPACITY": 2048},
    {"SMALL_BATCH_CHUNKS": {False: 16, True: 64}},
]


def _inputs(rows: int, vocab: int):
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(rows, vocab, generator=gen) * 3, -1).cuda()
    k = torch.randint(1, 64, (rows,), generator=gen).cuda()
    p = (0.5 + 0.45 * torch.rand(rows, generator=gen)).cuda()
    return probs, k, p


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


def _sweep(rows: int, vocab: int) -> None:
    for batch in sorted({rows, 1}):
        probs, k, p = _inputs(batch, vocab)
        # near-uniform rows (a hot temperature): every key within a few percent of 1 / vocab
        flat = torch.softmax(0.05 * torch.randn(batch, vocab, generator=torch.Generator().manual_seed(1)), -1).cuda()
        for overrides in SWEEP:
            saved = {name: getattr(renorm, name) for name in overrides}
            try:
                for name, value in overrides.items():
                    setattr(renorm, name, value)
                tk = graph_replay_us(lambda: impl.top_k_renorm(probs, k), calls_per_graph=5, replays=10)
                tp = graph_replay_us(lambda: impl.top_p_renorm(probs, p), calls_per_graph=5, replays=10)
                hard = torch.full_like(p, 0.95)  # a flat pivot range: many candidates after the first pass
                tph = graph_replay_us(lambda: impl.top_p_renorm(probs, hard), calls_per_graph=5, replays=10)
                tpf = graph_replay_us(lambda: impl.top_p_renorm(flat, p), calls_per_graph=5, replays=10)
                print(f"sweep {batch}x{vocab} top_k {tk:7.1f} us  top_p {tp:7.1f} us  top_p(0.95) {tph:7.1f} us  "
                      f"top_p(flat row) {tpf:7.1f} us  {overrides or 'module defaults'}")
            finally:
                for name, value in saved.items():
                    setattr(renorm, name, value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=129280)
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("renorm_kernel_profile needs a GPU")
    probs, k, p = _inputs(args.rows, args.vocab)
    _profile(lambda: impl.top_k_renorm(probs, k), f"top_k {args.rows}x{args.vocab}")
    _profile(lambda: impl.top_p_renorm(probs, p), f"top_p {args.rows}x{args.vocab}")
    if args.sweep:
        _sweep(args.rows, args.vocab)


if __name__ == "__main__":
    main()
