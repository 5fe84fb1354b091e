"""``python -m impl.bench [--smoke] [--out DIR] [--only top_k,top_p,...]``.

Results go to ``bench-results/<device>/`` at the repository root (outside the
package) unless ``--out`` says otherwise; a smoke run (``--smoke``, or no GPU) measures
nothing worth keeping, so by default it writes to ``<temp dir>/dspark-bench-smoke/<device>/``,
outside the source tree. An existing ``bench.json`` there is merged, never
shrunk: rows this run measured replace the same (op, shape, variant) rows, every other
row is kept, so a narrower run (``--only``) cannot lose earlier results.
"""
from __future__ import annotations

import argparse
import datetime as dt
import platform as host_platform
import re
import sys
import tempfile
from pathlib import Path

import torch

from impl.bench import cases, report, timing
from impl.cli_args import CliParser

GRAPH_REPLAY_MAX_ROWS = 1024
REPO_ROOT = Path(__file__).resolve().parents[2]
SELECTIONS = [*cases.GPU_SWEEP, "verify_step", "host", "e2e", "metadata", "passes", "renorm_versions"]


def _device_name() -> str:
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu-{host_platform.machine()}"


def measure(sweep: dict, device: str, only: set[str] | None) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    on_gpu = device == "cuda"
    rows: list[dict] = []
    for name, (make, sizes) in sweep.items():
        if only and name not in only:
            continue
        for size in sizes:
            case = make(*size, device, gen, with_compile=on_gpu)
            times = {}
            eager = {}
            for variant, fn in case.variants.items():
                small = on_gpu and case.rows <= GRAPH_REPLAY_MAX_ROWS and "torch.compile" not in variant
                times[variant] = timing.graph_replay_us(fn) if small else timing.median_us(fn)
                if small and case.op.endswith("renorm"):  # the call an engine makes: eager, host included
                    eager[variant] = timing.median_us(fn)
            for variant, us in times.items():
                rows.append({
                    "op": case.op, "shape": case.shape, "rows": case.rows, "variant": variant,
                    "us": us, "bytes": case.bytes_moved, "gbps": case.bytes_moved / us / 1e3,
                    "frac_of_copy": times["copy"] / us, "project_speedup": us / times["project"],
                    "timer": ("cuda-graph replay" if on_gpu and case.rows <= GRAPH_REPLAY_MAX_ROWS
                              else ("do_bench median" if on_gpu else "wall clock")),
                    **({"eager_us": eager[variant]} if variant in eager else {}),
                })
            print(f"  measured {case.op} {case.shape}", file=sys.stderr, flush=True)
    return rows


def default_results_dir(mode: str, date: str, device: str) -> Path:
    """Where results go without --out: bench-results/ in the repository for real runs, the temp dir
    for smoke runs (tiny sizes, not performance figures: never an untracked folder in the source tree)."""
    folder = re.sub(r'[^A-Za-z0-9]+', '-', device)   # one folder per device; the date is in bench.json's meta
    if mode == "smoke":
        return Path(tempfile.gettempdir()) / "dspark-bench-smoke" / folder
    return REPO_ROOT / "bench-results" / folder


def _selection(text: str | None, parser: argparse.ArgumentParser) -> set[str] | None:
    if text is None:
        return None
    chosen = {s.strip() for s in text.split(",") if s.strip()}
    unknown = sorted(chosen - set(SELECTIONS))
    if unknown or not chosen:
        parser.error(f"--only: unknown selection {', '.join(unknown) or repr(text)}; "
                     f"choose from {', '.join(SELECTIONS)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog="python -m impl.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (default when no GPU)")
    ap.add_argument("--out", type=Path, help="results folder (default bench-results/<device> at the repo "
                    "root; for a smoke run <temp dir>/dspark-bench-smoke/<device>)")
    ap.add_argument("--only", help="comma-separated subset of: " + ",".join(SELECTIONS))
    ap.add_argument("--flashinfer-aot", help="folder of FlashInfer's prebuilt modules (for its contender rows)")
    ap.add_argument("--before-root", type=Path, help="a checkout whose impl is the 'before' of the metadata "
                    "table (impl.bench.metadata_cost) and of the renorm versions table (impl.bench.renorm_versions)")
    args = ap.parse_args(argv)
    only = _selection(args.only, ap)  # before any work: a bad selection exits 2
    if args.before_root and not (args.before_root / "impl" / "__init__.py").is_file():
        ap.error(f"--before-root {args.before_root}: expected a checkout with impl/__init__.py")
    if only and "renorm_versions" in only and not args.before_root:
        ap.error("--only renorm_versions needs --before-root (the tree to compare this one with)")
    gpu = torch.cuda.is_available()
    if not gpu:
        print("[bench] no GPU on this machine: running the tiny CPU smoke mode (Triton interpreter); "
              "numbers are not performance figures.", flush=True)
    sweep = cases.CPU_SMOKE_SWEEP if (args.smoke or not gpu) else cases.GPU_SWEEP
    device = "cuda" if gpu else "cpu"
    if gpu and not cases.flashinfer_available(args.flashinfer_aot):
        print("[bench] flashinfer is not importable: its contender rows (top_k / top_p) are skipped", flush=True)
    rows = measure(sweep, device, only)
    host_rows = []
    if not only or "host" in only:
        from impl.bench import host_cost

        fi = cases._FLASHINFER[0] if gpu and cases._FLASHINFER else None
        batches, vocab, reps = ((host_cost.RENORM_BATCHES, host_cost.VOCAB, dict(calls=60, repeats=9)) if gpu
                                else ((1, 2), 256, dict(calls=2, repeats=1)))
        host_rows = host_cost.measure(host_cost.renorm_cases(device, batches, vocab, fi)
                                      + host_cost.step_op_cases(device, *((64, 5, 512) if gpu else (2, 2, 64))),
                                      **reps)
    extra_rows, extra_tables = [], []
    if gpu and (not only or "metadata" in only):  # launches, host and GPU us per builder call
        from impl.bench import metadata_cost

        versions = {"after": __import__("impl")}
        if args.before_root:
            versions = {"before": metadata_cost.import_renamed(args.before_root), **versions}
        meta_rows = metadata_cost.measure(versions)
        extra_rows += meta_rows
        extra_tables.append("metadata builders per call (before -> after):\n" + metadata_cost.table(meta_rows))
    if gpu and args.before_root and (not only or "renorm_versions" in only):  # renorm, two trees in one process
        from impl.bench import metadata_cost, renorm_versions

        before = sys.modules.get("impl_before") or metadata_cost.import_renamed(args.before_root)
        version_rows = renorm_versions.measure({"before": before, "after": __import__("impl")}, rounds=3)
        extra_rows += [dict(op="renorm-versions", shape=r["case"], variant=r["version"], **r) for r in version_rows]
        extra_tables.append("renorm, before -> after (graph us, one process):\n" + renorm_versions.table(version_rows))
    if gpu and (not only or "passes" in only):  # HBM passes of each renorm case
        from impl.bench import renorm_passes

        pass_rows = renorm_passes.measure()
        extra_rows += pass_rows
        extra_tables.append("renorm HBM passes (bytes / one read + one write of the rows):\n"
                            + renorm_passes.table(pass_rows))
    step_rows = []
    if not only or "verify_step" in only:
        from impl.bench.verify_step_case import measure_verify_step
        step_rows = measure_verify_step(64 if gpu else 2, 5, device)
    e2e_rows = []
    if not only or "e2e" in only:  # the end-to-end table (impl/bench/e2e_table.py)
        from impl.bench import e2e_table
        e2e_rows = e2e_table.measure(device, smoke=sweep is cases.CPU_SMOKE_SWEEP)
    rows_now = rows + step_rows + host_rows + extra_rows + e2e_rows
    name = _device_name()
    meta = {
        "device": name, "torch": torch.__version__, "triton": __import__("triton").__version__,
        "date": dt.date.today().isoformat(), "mode": "smoke" if sweep is cases.CPU_SMOKE_SWEEP else "full",
    }
    out = args.out or default_results_dir(meta["mode"], meta["date"], name)
    out.mkdir(parents=True, exist_ok=True)
    all_rows, kept = report.merge_json(out / "bench.json", meta, rows_now)
    plot_rows = [r for r in all_rows if "gbps" in r]
    plotted, why_not = report.write_plot(out / "bench.png", plot_rows,
                                         f"{name} - torch {meta['torch']}, triton {meta['triton']}")
    host_plotted, host_why_not = report.write_host_plot(out / "host.png", all_rows,
                                                        f"{name} - host cost per eager call")
    print(f"device: {name}  torch {meta['torch']}  triton {meta['triton']}  mode {meta['mode']}")
    print(report.format_table(rows))
    if host_rows:
        from impl.bench import host_cost

        print("host us per eager call (GPU kept busy by a queued sleep; median of repeats):")
        print(host_cost.renorm_table(host_rows))
        for r in host_rows:
            if not r["op"].endswith("renorm"):
                print(f"  {r['op']} {r['shape']}: {r['host_us']:.1f} us")
    for text in extra_tables:
        print(text)
    for r in step_rows:
        print(f"verify step {r['shape']} ({r['variant']}): {r['us']:.1f} us, "
              f"host syncs in eager run: {r['host_syncs']}")
    if e2e_rows:
        print(e2e_table.format_table(e2e_rows))
    print(f"wrote {out / 'bench.json'} ({len(rows_now)} rows measured now, "
          f"{kept} kept from before)")
    print(f"wrote {out / 'bench.png'}" if plotted else f"no plot: {why_not}")
    print(f"wrote {out / 'host.png'}" if host_plotted else f"no host plot: {host_why_not}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
