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

This module must never import ``impl.e2e`` (the CLI).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from impl import table as impl_table
from impl.engine.prompts import make_prompts
from impl.engine.run import ReferenceRun, reference_continuations, run_case
from impl.model.tiny_config import preset
from impl.model.weights import target_weights
from impl.run_options import RunOptions, SamplingParams
from impl.step_timing import COMPONENTS, OTHER, StepTimer

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


def _slice(ref: ReferenceRun, n: int) -> ReferenceRun:
    return ReferenceRun({i: ref.tokens[i] for i in range(n)}, {i: ref.margins[i] for i in range(n)})


def measure(device: str, *, smoke: bool, steps: int | None = None) -> list[dict]:
    """One row per :func:`cases` entry (bench.json rows: op ``e2e``, metric ``e2e``)."""
    gpu = device == "cuda" and not smoke
    name = "dsv4" if gpu else "cpu-small"
    cfg = preset(name, 0)
    steps = steps or (64 if gpu else 2)
    gamma = GAMMA if gpu else cfg.gamma
    base = RunOptions.resolve(algorithm="dspark", gamma=gamma, kv_backend="unified", platform="cuda",
                              kernel_backend="triton" if device == "cuda" else "torch", max_new_tokens=steps,
                              seed=0, device=device)
    largest = max(b for b, _ in (GPU_BATCHES if gpu else SMOKE_BATCHES))
    prompts = make_prompts(cfg, largest, gamma, 0)
    ref = reference_continuations(cfg, target_weights(cfg, device), prompts, steps + gamma + 1)
    run_case(cfg, base.replace(batch=1, num_slots=1, max_new_tokens=2), prompts=prompts[:1],
             reference_run=_slice(ref, 1))  # warm-up: kernel compilation, allocator
    rows = []
    for case in cases(gpu):
        sampling = SamplingParams(temperature=1.0, top_k=20, top_p=0.9, seed=0) if case.sampling else None
        options = base.replace(batch=case.batch, num_slots=case.slots, graph=case.graph, draft=case.draft,
                               sampling=sampling)
        timer = StepTimer(device)
        with timer.active():
            res = run_case(cfg, options, prompts=prompts[:case.batch], reference_run=_slice(ref, case.batch))
        eng, summary = res.engine, timer.summary()
        verdict = "n/a (sampling)" if case.sampling else res.verdict.word
        rows.append({
            "op": "e2e", "metric": "e2e", "shape": f"{name} batch {case.batch} slots {case.slots}",
            "variant": case.variant, "batch": case.batch, "slots": case.slots, "steps": eng.step_index,
            "tokens": eng.generated_tokens, "tokens_per_s": eng.tokens_per_second,
            "accept_length": res.accept_length, "wall_us": summary["wall_us"], "host_us": summary["host_us"],
            **({"gpu_us": summary["gpu_us"], "gpu_span_us": summary["gpu_span_us"]} if "gpu_us" in summary else {}),
            "eager_steps": eng.graph_runner.eager_steps if eng.graph_runner else None,
            "capture_s": eng.capture_seconds, "verdict": verdict,
        })
        print(f"  measured e2e {rows[-1]['shape']} {case.variant}", file=sys.stderr, flush=True)
    return rows


def format_table(rows: list[dict]) -> str:
    """tokens/s, accept length, wall per step, then host (and GPU) us per step per component."""
    keys = (*COMPONENTS, OTHER)
    gpu = any("gpu_us" in r for r in rows)
    head = ["batch/slots", "mode, draft", "tok/s", "accept", "wall us", *(f"host {k}" for k in keys)]
    head += [f"gpu {k}" for k in keys] if gpu else []
    head.append("lossless")
    body = []
    for r in rows:
        line = [f"{r['batch']}/{r['slots']}", r["variant"], f"{r['tokens_per_s']:.1f}", f"{r['accept_length']:.2f}",
                f"{r['wall_us']:.0f}", *(f"{r['host_us'][k]:.0f}" for k in keys)]
        if gpu:
            line += [f"{r['gpu_us'][k]:.0f}" if "gpu_us" in r else "" for k in keys]
        line.append(r["verdict"])
        body.append(line)
    note = ("median us per engine step; host = exclusive wall time of each component's calls, gpu = exclusive "
            "span between CUDA events around them (docs/design.md §7.6); other = the rest of the step")
    return impl_table.format_table(head, body) + "\n" + note


if __name__ == "__main__":  # a quick look without the rest of the bench
    rows = measure("cuda" if torch.cuda.is_available() else "cpu", smoke=not torch.cuda.is_available())
    print(format_table(rows))
