"""The bench's end-to-end table (``python -m impl.bench --only e2e``): the speculative loop as a user runs it.

For the ``dsv4`` preset (DeepSeek-V4's KV geometry), ``--algo dspark --gamma 5 --kv
unified``, batch 1 / 8 / 32 (slots 1 / 8 / 16), eager and CUDA-graph verify, oracle
and model drafts (plus sampling with the model draft at batch 8, so renorm shows):
tokens/s, accept length, and the median per-step wall, host and GPU time per
component (metadata, draft, model, writes, renorm, accept, other; ``impl.step_timing``,
docs/design.md §7.6), with the lossless verdict of ``impl.engine.verdict``. One
reference decode (the largest batch; smaller batches use its first requests) serves
every case; one small warm-up run compiles the kernels first. Capture time is
outside the steps (graphs are captured when the engine starts). The smoke mode (no
GPU) runs the cpu-small preset at batch 1 / 2 with a few tokens: a check that the
table works, not performance figures.

    python -m impl.bench.e2e_table [--before-root DIR] [--rounds N] [--json FILE]

``--before-root`` runs another checkout's ``impl`` (imported as ``impl_before``, as the metadata
bench does) beside this one in the same process: each case runs ``--rounds`` times per version,
the versions taking turns, and each figure is the median of its runs.

This module must never import ``impl.e2e`` (the CLI).
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from impl import table as impl_table
from impl.step_timing import COMPONENTS, OTHER

GPU_BATCHES = ((1, 1), (8, 8), (32, 16))  # (batch, slots): the issue-35 commands
SMOKE_BATCHES = ((1, 1), (2, 2))
GAMMA = 5


@dataclass(frozen=True)
class Case:
    batch: int
    slots: int
    graph: bool
    draft: str
    sampling: bool = False

    @property
    def variant(self) -> str:
        return f"{'graph' if self.graph else 'eager'} {self.draft}{' sampling' if self.sampling else ''}"


def cases(gpu: bool) -> list[Case]:
    if not gpu:  # smoke: one row per draft kind, the table's plumbing only
        return [Case(b, s, False, draft) for (b, s), draft in zip(SMOKE_BATCHES, ("oracle", "model"))]
    modes = (False, True)
    out = [Case(b, s, graph, draft) for b, s in GPU_BATCHES for graph in modes for draft in ("oracle", "model")]
    return out + [Case(8, 8, graph, "model", sampling=True) for graph in modes]


def _slice(ref, n: int):
    return type(ref)({i: ref.tokens[i] for i in range(n)}, {i: ref.margins[i] for i in range(n)})


class _Version:
    """One implementation's modules (``impl`` or a copy imported under another name): the loop, its
    timer and its reference decode, each from that version, so its own sections are the ones timed."""

    def __init__(self, pkg, device: str, gpu: bool, steps: int | None) -> None:
        def mod(name):
            return importlib.import_module(f"{pkg.__name__}.{name}")
        self.run_case, self.StepTimer = mod("engine.run").run_case, mod("step_timing").StepTimer
        self.SamplingParams = mod("run_options").SamplingParams
        self.name = "dsv4" if gpu else "cpu-small"
        self.cfg = mod("model.tiny_config").preset(self.name, 0)
        self.steps = steps or (64 if gpu else 2)
        gamma = GAMMA if gpu else self.cfg.gamma
        self.base = mod("run_options").RunOptions.resolve(
            algorithm="dspark", gamma=gamma, kv_backend="unified", platform="cuda",
            kernel_backend="triton" if device == "cuda" else "torch", max_new_tokens=self.steps, seed=0, device=device)
        largest = max(b for b, _ in (GPU_BATCHES if gpu else SMOKE_BATCHES))
        self.prompts = mod("engine.prompts").make_prompts(self.cfg, largest, gamma, 0)
        weights = mod("model.weights").target_weights(self.cfg, device)
        self.ref = mod("engine.run").reference_continuations(self.cfg, weights, self.prompts, self.steps + gamma + 1)
        self.run_case(self.cfg, self.base.replace(batch=1, num_slots=1, max_new_tokens=2), prompts=self.prompts[:1],
                      reference_run=_slice(self.ref, 1))  # warm-up: kernel compilation, allocator

    def row(self, case: Case, device: str) -> dict:
        sampling = self.SamplingParams(temperature=1.0, top_k=20, top_p=0.9, seed=0) if case.sampling else None
        options = self.base.replace(batch=case.batch, num_slots=case.slots, graph=case.graph, draft=case.draft,
                                    sampling=sampling)
        timer = self.StepTimer(device)
        with timer.active():
            res = self.run_case(self.cfg, options, prompts=self.prompts[:case.batch],
                                reference_run=_slice(self.ref, case.batch))
        eng, summary = res.engine, timer.summary()
        return {
            "op": "e2e", "metric": "e2e", "shape": f"{self.name} batch {case.batch} slots {case.slots}",
            "variant": case.variant, "batch": case.batch, "slots": case.slots, "steps": eng.step_index,
            "tokens": eng.generated_tokens, "tokens_per_s": eng.tokens_per_second,
            "accept_length": res.accept_length, "wall_us": summary["wall_us"], "host_us": summary["host_us"],
            **({"gpu_us": summary["gpu_us"], "gpu_span_us": summary["gpu_span_us"]} if "gpu_us" in summary else {}),
            "eager_steps": eng.graph_runner.eager_steps if eng.graph_runner else None,
            "capture_s": eng.capture_seconds,
            "verdict": "n/a (sampling)" if case.sampling else res.verdict.word,
        }


def measure(device: str, *, smoke: bool, steps: int | None = None, versions: dict | None = None,
            rounds: int = 1) -> list[dict]:
    """One row per :func:`cases` entry and version (bench.json rows: op ``e2e``, metric ``e2e``).

    ``versions``: name -> implementation package (default: this ``impl`` alone, unnamed). Each case
    runs ``rounds`` times per version, the versions taking turns case by case (a slow spell of the
    host falls on both); a row holds the medians over its rounds (per-step medians of each run)."""
    import impl

    gpu = device == "cuda" and not smoke
    loaded = {name: _Version(pkg, device, gpu, steps) for name, pkg in (versions or {"": impl}).items()}
    rows = []
    for case in cases(gpu):
        runs: dict[str, list[dict]] = {name: [] for name in loaded}
        for _ in range(rounds):
            for name, version in loaded.items():
                runs[name].append(version.row(case, device))
        for name, got in runs.items():
            rows.append({**_median_row(got), **({"version": name, "rounds": rounds} if name else {})})
            print(f"  measured e2e {rows[-1]['shape']} {case.variant} {name}".rstrip(), file=sys.stderr, flush=True)
    return rows


def _median_row(runs: list[dict]) -> dict:
    """The first run's row with every timing replaced by its median over ``runs``."""
    out = dict(runs[0])
    for key in ("tokens_per_s", "wall_us", "gpu_span_us"):
        if key in out:
            out[key] = statistics.median(r[key] for r in runs)
    for key in ("host_us", "gpu_us"):
        if key in out:
            out[key] = {k: statistics.median(r[key][k] for r in runs) for k in out[key]}
    return out


def format_table(rows: list[dict]) -> str:
    """tokens/s, accept length, wall per step, then host (and GPU) us per step per component; with
    versions, a version column (each case's versions on adjacent lines)."""
    keys = (*COMPONENTS, OTHER)
    gpu = any("gpu_us" in r for r in rows)
    versions = any(r.get("version") for r in rows)
    head = ["batch/slots", "mode, draft", *(["version"] if versions else []), "tok/s", "accept", "wall us",
            *(f"host {k}" for k in keys)]
    head += [f"gpu {k}" for k in keys] if gpu else []
    head.append("lossless")
    body = []
    for r in rows:
        line = [f"{r['batch']}/{r['slots']}", r["variant"], *([r.get("version", "")] if versions else []),
                f"{r['tokens_per_s']:.1f}", f"{r['accept_length']:.2f}", f"{r['wall_us']:.0f}",
                *(f"{r['host_us'][k]:.0f}" for k in keys)]
        if gpu:
            line += [f"{r['gpu_us'][k]:.0f}" if "gpu_us" in r else "" for k in keys]
        line.append(r["verdict"])
        body.append(line)
    rounds = max((r.get("rounds", 1) for r in rows), default=1)
    note = ("median us per engine step; host = exclusive wall time of each component's calls, gpu = exclusive "
            "span between CUDA events around them (docs/design.md §7.6); other = the rest of the step"
            + (f"; each figure the median of {rounds} runs, the versions taking turns per case" if rounds > 1 else ""))
    return impl_table.format_table(head, body) + "\n" + note


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m impl.bench.e2e_table", description=__doc__.splitlines()[0])
    ap.add_argument("--before-root", type=Path, help="a checkout whose impl is the 'before' (run beside this one)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each case per version (medians)")
    ap.add_argument("--steps", type=int, help="tokens per request (default 64 on a GPU)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args(argv)
    if args.before_root and not (args.before_root / "impl" / "__init__.py").is_file():
        ap.error(f"--before-root {args.before_root}: expected a checkout with impl/__init__.py")
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    import impl

    device = "cuda" if torch.cuda.is_available() else "cpu"
    versions = None
    if args.before_root:
        from impl.bench.metadata_cost import import_renamed

        versions = {"before": import_renamed(args.before_root), "after": impl}
    rows = measure(device, smoke=device != "cuda", steps=args.steps, versions=versions, rounds=args.rounds)
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":  # a quick look without the rest of the bench
    sys.exit(main())
