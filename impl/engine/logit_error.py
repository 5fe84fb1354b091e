"""How far the engine's verify logits are from the reference decoder's: the floor behind §7.3's margin.

    python -m impl.engine.logit_error [--presets dsv4,cpu-small] [--batch 8] [--slots 4]
                                      [--steps 48] [--seed 0] [--json PATH]

For each preset and mode (eager; graph on a GPU) the engine runs greedy with the
oracle draft, so every verify row's context equals the reference sequence. After
each verify forward the logits of every row whose context matches the reference
are compared with ``reference.decoder.reference_logits`` over the whole reference
sequence (same weights, same device): per step, max |engine - reference|.

Three reference-only rows explain the size of that error: the same fp32 reference
on the CPU (another summation order, same bf16 K roundings), in float64 on the CPU,
and with K truncated to bf16 instead of rounded (one bf16 ulp on about half of the
K elements). TF32 state is recorded (``torch.backends.cuda.matmul.allow_tf32``,
``torch.get_float32_matmul_precision``). docs/design.md §7.3 holds the measured
numbers and the near-tie margin derived from them (``impl.engine.verdict``).

This module must never import ``impl.e2e`` (the CLI) or ``impl.distributed``.
"""
from __future__ import annotations

import json
import statistics
import sys

import torch

from impl.cli_args import CliParser, bounded_int, fail
from impl.engine.engine import SpecEngine
from impl.engine.prompts import make_prompts
from impl.model.target import TargetModel
from impl.model.tiny_config import PRESETS, preset
from impl.model.weights import target_weights
from impl.run_options import RunOptions
from reference.decoder import greedy_decode_reference, reference_logits

PROG = "python -m impl.engine.logit_error"


def _reference(cfg, weights, prompts, extra: int) -> dict[int, list[int]]:
    """Full sequences: prompt + the reference's greedy continuation (``extra`` tokens)."""
    return {i: list(p) + greedy_decode_reference(weights, cfg, p, extra).tokens for i, p in enumerate(prompts)}


def _logits(weights, cfg, seq: list[int], device, **kw) -> torch.Tensor:
    with torch.no_grad():
        return reference_logits(weights, cfg, torch.tensor(seq, dtype=torch.int64, device=device), **kw)[0]


def engine_error(cfg, options: RunOptions, *, weights=None, sequences=None, ref_logits=None) -> dict:
    """Per-step max |engine - reference| over the verify rows whose context is the reference's."""
    device = torch.device(options.device)
    g = options.gamma_for(cfg.gamma)
    weights = weights if weights is not None else target_weights(cfg, device)
    prompts = make_prompts(cfg, options.batch, g, options.seed)
    if sequences is None:
        sequences = _reference(cfg, weights, prompts, options.max_new_tokens + g + 1)
    if ref_logits is None:
        ref_logits = {i: _logits(weights, cfg, s, device) for i, s in sequences.items()}
    conts = {i: s[len(prompts[i]):] for i, s in sequences.items()}
    eng = SpecEngine(cfg, options.replace(draft="oracle"), num_slots=options.num_slots or options.batch,
                     continuations=conts, target=TargetModel(cfg, device, weights))
    per_step: list[float] = []
    rows = [0]

    def observe(reqs, tokens, prefix, logits) -> None:
        worst = 0.0
        toks, pre = tokens.tolist(), prefix.tolist()
        for i, r in enumerate(reqs):
            seq, p = sequences[r.rid], pre[i]
            if r.prompt + r.generated != seq[:p + 1]:
                continue  # diverged earlier (a near-tie): the contexts differ from here on
            n = 1
            while n <= g and p + n < len(seq) and toks[i][n] == seq[p + n]:
                n += 1
            n = min(n, len(seq) - p)
            diff = (logits[i, :n].float() - ref_logits[r.rid][p:p + n]).abs().max()
            worst = max(worst, float(diff))
            rows[0] += n
        per_step.append(worst)

    eng.observer = observe
    for i, p in enumerate(prompts):
        eng.add_request(p, options.max_new_tokens, rid=i)
    eng.run()
    return {"max": max(per_step), "median_step": statistics.median(per_step), "steps": len(per_step),
            "rows": rows[0], "per_step": per_step}


def reference_floor(cfg, weights, sequences, device) -> dict:
    """Max |reference variant - reference on ``device``| over every position, per variant."""
    cpu_w = target_weights(cfg, "cpu")
    out = {"fp32 on cpu": 0.0, "fp64 on cpu": 0.0, "K truncated to bf16": 0.0}
    for seq in sequences.values():
        base = _logits(weights, cfg, seq, device).cpu()
        out["fp32 on cpu"] = max(out["fp32 on cpu"], float((_logits(cpu_w, cfg, seq, "cpu") - base).abs().max()))
        f64 = _logits(cpu_w, cfg, seq, "cpu", dtype=torch.float64).float()
        out["fp64 on cpu"] = max(out["fp64 on cpu"], float((f64 - base).abs().max()))
        trunc = _logits(weights, cfg, seq, device, rounding="truncate").cpu()
        out["K truncated to bf16"] = max(out["K truncated to bf16"], float((trunc - base).abs().max()))
    return out


def measure(preset_name: str, *, batch: int, slots: int, steps: int, seed: int, device: str) -> list[dict]:
    cfg = preset(preset_name, seed)
    base = RunOptions.resolve(gamma=None, batch=batch, num_slots=slots, max_new_tokens=steps, seed=seed,
                              device=device, kernel_backend="triton" if device == "cuda" else "torch")
    g = base.gamma_for(cfg.gamma)
    weights = target_weights(cfg, device)
    sequences = _reference(cfg, weights, make_prompts(cfg, batch, g, seed), steps + g + 1)
    ref_logits = {i: _logits(weights, cfg, s, device) for i, s in sequences.items()}
    rows = []
    for graph in ([False, True] if device == "cuda" else [False]):
        err = engine_error(cfg, base.replace(graph=graph), weights=weights, sequences=sequences,
                           ref_logits=ref_logits)
        rows.append({"preset": preset_name, "what": f"engine {'graph' if graph else 'eager'} vs reference", **err})
    for what, value in reference_floor(cfg, weights, sequences, device).items():
        rows.append({"preset": preset_name, "what": f"reference {what} vs reference", "max": value})
    scale = max(float(v.std()) for v in ref_logits.values())
    for r in rows:
        r["logit_std"] = scale
    return rows


def format_rows(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        extra = (f" (median step {r['median_step']:.3g}, {r['steps']} steps, {r['rows']} rows)"
                 if "steps" in r else "")
        lines.append(f"{r['preset']:>9}  {r['what']:<40} max |d logit| {r['max']:.3g}{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = CliParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--presets", default="dsv4,cpu-small")
    ap.add_argument("--batch", type=bounded_int(1, 64), default=8)
    ap.add_argument("--slots", type=bounded_int(1, 64), default=4)
    ap.add_argument("--steps", type=bounded_int(1, 256), default=48)
    ap.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=0)
    ap.add_argument("--json", default=None, help="also write the rows (per-step values included) here")
    args = ap.parse_args(argv)
    names = [p.strip() for p in args.presets.split(",") if p.strip()]
    unknown = [n for n in names if n not in PRESETS]
    if unknown or not names:
        fail(PROG, f"argument --presets: unknown preset(s) {unknown or args.presets!r}; choose from {sorted(PRESETS)}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"device {device}; torch {torch.__version__}; matmul allow_tf32 {torch.backends.cuda.matmul.allow_tf32}; "
          f"float32 matmul precision {torch.get_float32_matmul_precision()}", flush=True)
    rows = []
    for name in names:
        rows += measure(name, batch=args.batch, slots=args.slots, steps=args.steps, seed=args.seed, device=device)
        print(format_rows([r for r in rows if r["preset"] == name]), flush=True)
    engine_max = max(r["max"] for r in rows if r["what"].startswith("engine"))
    print(f"engine max |d logit| over all runs: {engine_max:.3g}")
    if args.json:
        meta = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "torch": torch.__version__,
                "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                "float32_matmul_precision": torch.get_float32_matmul_precision()}
        with open(args.json, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
