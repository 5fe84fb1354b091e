"""Table, JSON (merged, never shrunk) and plot for a benchmark run."""
from __future__ import annotations

import json
from pathlib import Path

from impl import table as impl_table


def format_table(rows: list[dict]) -> str:
    head = ["op", "shape", "variant", "us", "GB/s", "% of copy", "project speedup", "eager us (do_bench)"]
    body = [
        [r["op"], r["shape"], r["variant"], f"{r['us']:.2f}", f"{r['gbps']:.0f}",
         f"{100 * r['frac_of_copy']:.0f}%",
         "" if r["variant"] in ("project", "copy") else f"{r['project_speedup']:.2f}x",
         f"{r['eager_us']:.2f}" if "eager_us" in r else ""]
        for r in rows
    ]
    return impl_table.format_table(head, body)


def _key(row: dict) -> tuple:
    return row.get("op"), row.get("shape"), row.get("variant"), row.get("metric", "time")


def merge_json(path: Path, meta: dict, rows: list[dict]) -> tuple[list[dict], int]:
    """Write ``rows`` to ``path``, keeping every earlier row this run did not re-measure (same op,
    shape and variant). Returns (all rows written, how many were kept from before). An existing
    file that is not a results file is refused, not overwritten."""
    old_rows: list[dict] = []
    if path.exists():
        try:
            old = json.loads(path.read_text())
            old_rows = list(old["results"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"{path} exists but is not a bench results file ({exc}); not overwriting it") from None
    fresh = {_key(r) for r in rows}
    kept = [r for r in old_rows if _key(r) not in fresh]
    merged = kept + rows
    path.write_text(json.dumps({"meta": meta, "results": merged}, indent=2) + "\n")
    return merged, len(kept)


def _pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def write_plot(path: Path, rows: list[dict], title: str) -> tuple[bool, str]:
    """One panel per op: GB/s against rows, one line per variant (points when an op has one size).
    Returns (written, why not)."""
    ops = list(dict.fromkeys(r["op"] for r in rows))
    if not ops:
        return False, "no rows were measured"
    plt = _pyplot()
    if plt is None:
        return False, "matplotlib is not installed (pip install matplotlib)"
    fig, axes = plt.subplots(1, len(ops), figsize=(5 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for variant in dict.fromkeys(r["variant"] for r in rows if r["op"] == op):
            pts = sorted((r["rows"], r["gbps"]) for r in rows if r["op"] == op and r["variant"] == variant)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=variant,
                    linestyle="--" if variant.startswith("copy") else "-")
        ax.set_xscale("log")
        ax.set_xlabel("rows")
        ax.set_ylabel("GB/s (bytes really moved)")
        ax.set_title(op)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True, ""


def write_host_plot(path: Path, rows: list[dict], title: str) -> tuple[bool, str]:
    """Host microseconds per eager call against batch, one panel per renorm op and parameter form,
    one line per variant (ours, FlashInfer). Returns (written, why not)."""
    host = [r for r in rows if r.get("metric") == "host" and r["op"].endswith("renorm")]
    panels = list(dict.fromkeys((r["op"], r["shape"].rsplit(" ", 1)[-1]) for r in host))
    if not panels:
        return False, "no renorm host-cost rows"
    plt = _pyplot()
    if plt is None:
        return False, "matplotlib is not installed (pip install matplotlib)"
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (op, form) in zip(axes[0], panels):
        mine = [r for r in host if r["op"] == op and r["shape"].endswith(form)]
        for variant in dict.fromkeys(r["variant"] for r in mine):
            pts = sorted((int(r["shape"].split("x")[0]), r["host_us"]) for r in mine if r["variant"] == variant)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=variant)
        ax.set_xscale("log")
        ax.set_xlabel("batch (rows)")
        ax.set_ylabel("host us per eager call (GPU busy)")
        ax.set_title(f"{op}, {form} parameter")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True, ""
