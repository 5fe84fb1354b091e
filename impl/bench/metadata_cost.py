"""The metadata builders' cost per call (GPU): kernel launches, host us, GPU us; before and after.

    python -m impl.bench.metadata_cost [--before-root DIR] [--batches 1,64,256] [--json FILE]

Per case (builder, layout path, sync-policy cell, batch): ``launches`` = the kernels the profiler
sees in one call (after a warm-up that compiles); ``host_us`` = host microseconds per call with the
GPU kept busy (impl.bench.host_cost: a queued sleep, medians of repeated timed runs); ``gpu_us`` =
do_bench median of one call (what the issue's table used: at these sizes it is host-bound) and
``graph_us`` = the call replayed from a CUDA graph (device time alone; graph-safe paths only).

``--before-root`` is another checkout (e.g. ``git archive <commit>`` unpacked): its ``impl`` is
imported under the name ``impl_before`` (a copy with the package's imports renamed), so before and
after run in one process and their timed runs take turns (the host conditions fall on both).
Imports torch and impl only.
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

BATCHES = (1, 64, 256)
GAMMA = 5  # DSpark verify: gamma + 1 rows per request (the target's)
_IMPORTS = (  # the package name in import statements and lazy-export strings -> the alias
    (re.compile(r"\bfrom impl(?=[. ])"), "from {alias}"),
    (re.compile(r"^(\s*)import impl$", re.M), r"\1import {alias} as impl"),
    (re.compile(r"\bimport impl\.(?=\w)"), "import {alias}."),
    (re.compile(r"([\"'])impl\."), r"\1{alias}."),
)


def import_renamed(root: Path, alias: str = "impl_before"):
    """``root/impl`` imported as package ``alias`` (its imports of itself renamed), beside ``impl``."""
    dest = Path(tempfile.mkdtemp(prefix="metadata-before-"))
    shutil.copytree(root / "impl", dest / alias, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (dest / alias).rglob("*.py"):
        text = path.read_text()
        for pattern, repl in _IMPORTS:
            text = pattern.sub(repl.format(alias=alias), text)
        path.write_text(text)
    sys.path.insert(0, str(dest))
    return importlib.import_module(alias)


def cases(pkg, batches=BATCHES) -> list[tuple[str, int, Callable[[], object]]]:
    """(case name, batch, call) for one implementation package (``impl`` or its before copy)."""
    import torch

    SpecConfig = importlib.import_module(f"{pkg.__name__}.config").SpecConfig  # the version's own type
    verify_metadata = importlib.import_module(f"{pkg.__name__}.verify_metadata")
    prefill_metadata = importlib.import_module(f"{pkg.__name__}.prefill_metadata")
    out = []
    for bs in batches:
        gen = torch.Generator().manual_seed(bs)
        cfg = SpecConfig(gamma=GAMMA, num_slots=max(bs, 8), capture_batch_sizes=(bs,))
        rows = cfg.verify_rows("target")
        seq = torch.randint(16, 4000, (bs,), generator=gen).cuda()
        slots = torch.randperm(max(bs, 8), generator=gen)[:bs].cuda()
        full = torch.full((bs,), rows, dtype=torch.int64, device="cuda")
        lens = torch.randint(1, rows + 1, (bs,), generator=gen).to(torch.int32).cuda()
        Layout = verify_metadata.RaggedVerifyLayout
        graph = Layout(lens, tier=bs * rows, padded_bs=bs)
        eager = Layout(lens)
        bvm, bpm = verify_metadata.build_verify_metadata, prefill_metadata.build_prefill_metadata

        def verify(platform="cuda", algorithm="dspark", ragged=None, b=bvm, c=cfg, s=seq, r=slots, **kw):
            return lambda: b(c, seq_lens=s, req_pool_indices=r, ragged=ragged, platform=platform,
                             algorithm=algorithm, **kw)
        out += [
            ("build_verify_metadata uniform (cuda, dspark)", bs, verify()),
            ("build_prefill_metadata uniform (cuda, dspark)", bs, lambda b=bpm, s=seq, e=full, r=slots, n=bs * rows:
             b(s, e, r, window=cfg.window, path="uniform", num_tokens=n, platform="cuda", algorithm="dspark")),
            ("build_verify_metadata ragged-graph (cuda, dspark)", bs, verify(ragged=graph)),
            ("build_verify_metadata ragged-eager (cuda, dspark)", bs, verify(ragged=eager)),
            ("build_verify_metadata uniform (hip, mtp: keeps the sync)", bs, verify("hip", "mtp")),
        ]
        workspace = getattr(importlib.import_module(f"{pkg.__name__}.kernels"), "metadata_workspace", None)
        if workspace is None:  # a version before the workspace: those rows are the after's alone
            continue
        ws = [workspace.MetadataWorkspace() for _ in range(3)]  # one per call site, as an engine keeps them
        out += [
            ("build_verify_metadata uniform (cuda, dspark), workspace", bs, verify(workspace=ws[0])),
            ("build_prefill_metadata uniform (cuda, dspark), workspace", bs,
             lambda b=bpm, s=seq, e=full, r=slots, n=bs * rows, w=ws[1]:
             b(s, e, r, window=cfg.window, path="uniform", num_tokens=n, platform="cuda", algorithm="dspark",
               workspace=w)),
            ("build_verify_metadata ragged-graph (cuda, dspark), workspace", bs, verify(ragged=graph, workspace=ws[2])),
        ]
    return out


def launches(fn) -> tuple[int, float]:
    """Kernels the profiler sees in one call (memcpy/memset excluded), and their summed device
    microseconds (the kernels' own time, without the host's launch gaps)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    return len(kernels), sum(e.device_time_total for e in kernels)


def measure(versions: dict, *, calls: int = 60, repeats: int = 9) -> list[dict]:
    """One row per (case, batch, version); the versions' host runs of a case take turns."""
    from impl.bench import host_cost, timing

    by_case: dict[tuple, dict] = {}
    for version, pkg in versions.items():
        for name, bs, fn in cases(pkg):
            by_case.setdefault((name, bs), {})[version] = fn
    rows = []
    for (name, bs), fns in by_case.items():
        order = list(fns)
        host = host_cost._interleaved([fns[v] for v in order], calls=calls, repeats=repeats)
        for version, us in zip(order, host):
            fn = fns[version]
            graph_safe = "keeps the sync" not in name and "ragged-eager" not in name
            count, kernel_us = launches(fn)
            row = dict(op=name, shape=f"bs{bs}", batch=bs, variant=version, launches=count,
                       kernel_us=round(kernel_us, 2), host_us=round(us, 1),
                       gpu_us=round(timing.median_us(fn), 1),
                       graph_us=round(timing.graph_replay_us(fn), 2) if graph_safe else None,
                       metric="metadata", timer="host: GPU kept busy, median; kernel: profiler device time of one "
                       "call's kernels; gpu: do_bench median; graph: replay")
            rows.append(row)
            print(f"  {name} bs{bs} {version}: {row['launches']} launches ({row['kernel_us']} us), "
                  f"host {row['host_us']} us, "
                  f"gpu {row['gpu_us']} us, graph {row['graph_us']} us", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    """One line per (builder case, batch): launches, host us, GPU us, graph us; before -> after."""
    from impl.table import format_table

    got = {(r["op"], r["batch"], r["variant"]): r for r in rows}
    body = []
    for (op, bs) in dict.fromkeys((r["op"], r["batch"]) for r in rows):
        b, a = got.get((op, bs, "before")), got.get((op, bs, "after"))

        def pair(key, fmt="{:.1f}"):
            vals = [fmt.format(x[key]) if x and x[key] is not None else "-" for x in (b, a)]
            return " -> ".join(vals) if b else vals[1]
        body.append([op, str(bs), pair("launches", "{}"), pair("kernel_us", "{:.2f}"), pair("host_us"),
                     pair("gpu_us"), pair("graph_us", "{:.2f}")])
    return format_table(["builder (path, policy cell)", "batch", "launches", "kernel us", "host us",
                         "GPU us (do_bench)", "GPU us (graph replay)"], body)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m impl.bench.metadata_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--before-root", type=Path, help="a checkout whose impl is the 'before'")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args(argv)
    if args.before_root and not (args.before_root / "impl" / "__init__.py").is_file():
        ap.error(f"--before-root {args.before_root}: expected a checkout with impl/__init__.py")
    import torch

    import impl

    if not torch.cuda.is_available():
        raise SystemExit("metadata_cost needs a GPU (it counts kernels and times the device)")
    versions = {"after": impl}
    if args.before_root:
        versions = {"before": import_renamed(args.before_root), **versions}
    rows = measure(versions, calls=args.calls, repeats=args.repeats)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
