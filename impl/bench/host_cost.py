"""Host cost of an eager call: CPU microseconds per call while the GPU is kept busy.

A long ``torch.cuda._sleep`` is queued first, so no call waits on the device; then ``calls``
calls are timed on the host without a sync, and the per-call time's median over ``repeats``
such runs is reported. Every case is warmed up before any is timed, and the cases of one shape
(ours and FlashInfer's) take their timed runs in turn, so a slow spell of the host falls on
both; the garbage collector is paused while a run is timed (as ``timeit`` does). Unlike
do_bench at small sizes (host time plus the host's noise), this figure is what an engine's CPU
pays per call. FlashInfer's renorm runs in the same process when
it is importable (the contender rows).

    python -m impl.bench.host_cost [--impl-root DIR] [--json FILE] [--batches 1,8,64,256]

``--impl-root`` imports ``impl`` from another checkout (the code before a change), so before and
after run the same probe on one machine. ``python -m impl.bench`` stores these rows too.
"""
from __future__ import annotations

import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

from impl.cli_args import CliParser, bounded_int, int_list

VOCAB = 129280
RENORM_BATCHES = (1, 8, 64, 256)
SLEEP_CYCLES = 60_000_000  # ~30 ms at the H200's ~2 GHz: longer than any timed run of calls


def host_us(fn: Callable[[], object], *, calls: int = 60, repeats: int = 9) -> float:
    """Median host microseconds per call of ``fn`` with the GPU busy (wall clock on CPU)."""
    return _interleaved([fn], calls=calls, repeats=repeats)[0]


def _interleaved(fns: list[Callable[[], object]], *, calls: int, repeats: int, warm: int = 3) -> list[float]:
    """Median host microseconds per call of each of ``fns`` (after ``warm`` calls each), their timed
    runs in turn."""
    import torch

    gpu = torch.cuda.is_available()
    for fn in fns:
        for _ in range(warm):
            fn()
    if gpu:
        torch.cuda.synchronize()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, mine in zip(fns, samples):
            if gpu:
                torch.cuda._sleep(SLEEP_CYCLES)
            collecting = gc.isenabled()
            gc.disable()
            try:
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                mine.append((time.perf_counter() - t0) / calls)
            finally:
                if collecting:
                    gc.enable()
            if gpu:
                torch.cuda.synchronize()
    return [1e6 * statistics.median(mine) for mine in samples]


def renorm_cases(device: str, batches=RENORM_BATCHES, vocab: int = VOCAB, flashinfer=None) -> list[tuple]:
    """(op, shape, variant, fn) for top-k (k = 50) and top-p (p = 0.9), tensor and scalar parameter,
    ours and (``flashinfer``: its sampling module) FlashInfer's."""
    import torch

    import impl

    out = []
    gen = torch.Generator().manual_seed(0)
    for batch in batches:
        probs = torch.softmax(torch.randn(batch, vocab, generator=gen) * 3, -1).to(device)
        for op, value in (("top_k", 50), ("top_p", 0.9)):
            tensor = torch.full((batch,), value, dtype=torch.int32 if op == "top_k" else torch.float32, device=device)
            ours = getattr(impl, f"{op}_renorm")
            theirs = getattr(flashinfer, f"{op}_renorm_probs", None) if flashinfer is not None else None
            for form, param in (("tensor", tensor), ("scalar", value)):
                shape = f"{batch}x{vocab} fp32 {op[-1]}={value} {form}"
                out.append((f"{op}_renorm", shape, "project", lambda f=ours, a=param, p=probs: f(p, a)))
                if theirs is not None:
                    out.append((f"{op}_renorm", shape, "flashinfer", lambda f=theirs, a=param, p=probs: f(p, a)))
    return out


def step_op_cases(device: str, batch: int = 64, gamma: int = 5, dim: int = 512) -> list[tuple]:
    """(op, shape, variant, fn) for the other ops an engine calls eagerly every verify step, at one
    step's size (``batch`` requests, ``gamma`` + 1 rows each)."""
    import torch

    import impl
    from impl.config import SpecConfig

    gen = torch.Generator().manual_seed(1)
    rows = batch * (gamma + 1)
    kv = torch.randn(rows, dim, generator=gen).to(device=device, dtype=torch.bfloat16)
    pool = 4 * rows
    loc = torch.randperm(pool, generator=gen)[:rows].to(device=device, dtype=torch.int32)
    unified = torch.empty(pool, dim, dtype=torch.bfloat16, device=device)
    window, ring = 128, 128 + gamma
    slots = max(4 * rows // ring, batch)
    flat = torch.randperm(slots * ring, generator=gen)[:rows]
    state_slot, positions = (flat // ring).to(device), (flat % ring + ring).to(device)
    ring_rows = torch.empty(slots * ring, dim, dtype=torch.bfloat16, device=device)
    weight = torch.ones(dim, device=device)
    cos, sin = torch.rand(4096, 32, generator=gen).to(device), torch.rand(4096, 32, generator=gen).to(device)
    rope_pos = torch.randint(0, 4096, (rows,), generator=gen).to(device)
    cfg = SpecConfig(gamma=gamma, num_slots=batch, capture_batch_sizes=(batch,))
    seq_lens = torch.randint(16, 4000, (batch,), generator=gen).to(device)
    req = torch.randperm(batch, generator=gen).to(device)
    extend = torch.full((batch,), gamma + 1, dtype=torch.int64, device=device)
    shape = f"{rows}x{dim} bf16"
    return [
        ("scatter_into_unified", shape, "project", lambda: impl.scatter_into_unified(kv, loc, unified)),
        ("store_swa_into_unified", shape, "project", lambda: impl.store_swa_into_unified(
            kv, state_slot, positions, ring_rows, window=window, ring=ring)),
        ("fused_norm_rope_", shape, "project", lambda: impl.fused_norm_rope_(
            kv, weight, 1e-6, cos, sin, rope_pos, rope_dim=64)),
        ("build_verify_metadata", f"bs{batch} gamma{gamma}", "project", lambda: impl.build_verify_metadata(
            cfg, seq_lens=seq_lens, req_pool_indices=req, platform="cuda", algorithm="dspark")),
        ("build_prefill_metadata", f"bs{batch} extend{gamma + 1}", "project", lambda: impl.build_prefill_metadata(
            seq_lens, extend, req, window=window, path="uniform", num_tokens=rows, platform="cuda",
            algorithm="dspark")),
    ]


def measure(cases: list[tuple], *, calls: int = 60, repeats: int = 9) -> list[dict]:
    """One row per case; every case is warmed up first, then the cases of one (op, shape) are timed
    in turn (ours and FlashInfer's under the same host conditions)."""
    for *_, fn in cases:
        for _ in range(3):
            fn()
    groups: dict[tuple, list[tuple]] = {}
    for case in cases:
        groups.setdefault(case[:2], []).append(case)
    rows = []
    for group in groups.values():
        times = _interleaved([fn for *_, fn in group], calls=calls, repeats=repeats, warm=0)
        for (op, shape, variant, _fn), us in zip(group, times, strict=True):
            rows.append({"op": op, "shape": shape, "variant": variant, "metric": "host", "host_us": round(us, 2),
                         "timer": "host us per call, GPU kept busy (median; cases of a shape in turn)"})
            print(f"  host {op} {shape} {variant}: {us:.1f} us", file=sys.stderr, flush=True)
    return rows


def renorm_table(rows: list[dict]) -> str:
    """The issue's layout: one line per (op, parameter form), one column per batch: ours / FlashInfer (x)."""
    from impl import table as impl_table

    by = {(r["op"], r["shape"], r["variant"]): r["host_us"] for r in rows if r.get("metric") == "host"}
    batches = sorted({int(s.split("x")[0]) for (op, s, _v) in by if op.endswith("renorm")})
    body = []
    for op, label in (("top_k_renorm", "top-k"), ("top_p_renorm", "top-p")):
        for form in ("tensor", "scalar"):
            line = [f"{label}, {form} (ours / FlashInfer, x)"]
            for b in batches:
                shape = next((s for (o, s, v) in by if o == op and s.startswith(f"{b}x") and s.endswith(form)), None)
                ours, theirs = by.get((op, shape, "project")), by.get((op, shape, "flashinfer"))
                if ours is None:
                    line.append("")
                elif theirs is None:
                    line.append(f"{ours:.1f}")
                else:
                    line.append(f"{ours:.1f} / {theirs:.1f} ({theirs / ours:.2f}x)")
            body.append(line)
    return impl_table.format_table(["host us per call", *[f"batch {b}" for b in batches]], body)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench.host_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--impl-root", help="import impl from this checkout")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--batches", type=int_list(1, 1 << 16), default=tuple(RENORM_BATCHES), help="e.g. 1,8,64,256")
    ap.add_argument("--flashinfer-aot", help="folder of FlashInfer's prebuilt modules")
    ap.add_argument("--calls", type=bounded_int(1, 100000), default=60, help="calls per timed run")
    ap.add_argument("--repeats", type=bounded_int(1, 1000), default=9, help="timed runs (the median is reported)")
    args = ap.parse_args(argv)
    if args.impl_root:
        sys.path.insert(0, str(Path(args.impl_root).resolve()))
        for name in [m for m in sys.modules if m == "impl" or m.startswith("impl.")]:
            if name != __name__:
                del sys.modules[name]
    import torch

    import impl

    device = "cuda" if torch.cuda.is_available() else "cpu"
    fi = None
    if device == "cuda":
        from impl.bench.baselines import flashinfer_sampling

        fi = flashinfer_sampling(args.flashinfer_aot)
    print(f"impl from {impl.__file__}", flush=True)
    batches = list(args.batches)
    cases = renorm_cases(device, batches, VOCAB if device == "cuda" else 256, fi) + step_op_cases(device)
    rows = measure(cases, calls=args.calls, repeats=args.repeats)
    print(renorm_table(rows))
    for r in rows:
        if not r["op"].endswith("renorm"):
            print(f"{r['op']:24s} {r['shape']:22s} host {r['host_us']:7.1f} us per call")
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
