"""End-to-end speculative decoding on the tiny DeepSeek-V4-like model (SPEC §7).

    python -m impl.e2e [--algo dspark|mtp|none] [--gamma N] [--kv unified|paged]
                       [--platform cuda|hip|cpu] [--batch N] [--slots N] [--preset cpu-small|dsv4]
                       [--draft model|oracle|noisy:0.3|random] [--sampling] [--graph]
                       [--steps N] [--seed S] [--checked]
                       [--world-size N [--fault RANK:STEP[:CALL[:MODE]]] [--timeout S]]

Runs one configuration: ``--batch`` requests with prompts shorter and longer
than the window join as slots free up (``--slots``, default half the batch,
so slots are reused) and each generates ``--steps`` tokens. Prints the
tokens per request (abbreviated), the average accept length, engine steps,
tokens/s, and whether the output equals the reference decoder's (greedy);
exits 1 when it does not. ``--world-size N`` (N > 1) runs the same requests on N
ranks -- DP attention, tensor-parallel MLP (``impl.distributed``; gloo on CPU,
NCCL with one GPU per rank), ``--slots`` per rank -- and also compares with the
single-rank engine and prints each rank's accept length. Gates not given on the command line come from the
environment (``DSPARK_SPEC_ALGO``, ``DSPARK_KV_BACKEND``, ``DSPARK_PLATFORM``).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

import torch

from impl.engine.engine import SamplingParams, SpecEngine
from impl.engine.drafting import DraftSource
from impl.model.tiny_config import TinyConfig, preset
from impl.model.weights import target_weights
from reference.decoder import greedy_decode_reference


def make_prompts(cfg: TinyConfig, batch: int, gamma: int, seed: int = 0) -> list[list[int]]:
    """Prompt lengths cycle through: shorter than the window, just under it, past the ring
    (window + gamma) and more than twice the window -- so the ring wraps."""
    w = cfg.window
    lengths = [3, w - 1, w + gamma + 2, 2 * w + 5, w // 2 + 1, w + 1]
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, cfg.vocab, (lengths[i % len(lengths)],), generator=gen).tolist() for i in range(batch)]


@dataclass
class E2EResult:
    outputs: dict[int, list[int]]
    references: dict[int, list[int]]
    margins: list[float]
    engine: SpecEngine
    mismatches: dict[int, int] = field(default_factory=dict)  # rid -> first differing index
    mismatch_margins: dict[int, float] = field(default_factory=dict)  # rid -> reference top-2 margin there

    @property
    def lossless(self) -> bool:
        return not self.mismatches and set(self.outputs) == set(self.references)

    @property
    def min_margin(self) -> float:
        return min(self.margins) if self.margins else float("inf")

    @property
    def accept_length(self) -> float:
        return self.engine.stats.avg_accept_length


_LAST_REFERENCE_MARGINS: dict[int, list[float]] = {}


def reference_continuations(cfg, weights, prompts, max_new: int):
    refs = [greedy_decode_reference(weights, cfg, p, max_new) for p in prompts]
    _LAST_REFERENCE_MARGINS.clear()
    _LAST_REFERENCE_MARGINS.update({i: list(r.margins) for i, r in enumerate(refs)})
    return {i: r.tokens for i, r in enumerate(refs)}, [m for r in refs for m in r.margins]


def plain_continuations(cfg, weights, prompts, max_new: int, device) -> dict[int, list[int]]:
    """Greedy continuations from the engine with spec_algorithm 'none' (one token per step)."""
    from impl.model.target import TargetModel

    plain = SpecEngine(cfg, num_slots=len(prompts), algorithm="none", device=device,
                       target=TargetModel(cfg, device, weights))
    for i, p in enumerate(prompts):
        plain.add_request(p, max_new, rid=i)
    return plain.run()


def run_case(
    cfg: TinyConfig,
    *,
    algorithm: str | None = None,
    gamma: int | None = None,
    kv_backend: str | None = None,
    platform: str | None = None,
    batch: int = 4,
    num_slots: int | None = None,
    draft: str = "model",
    sampling: SamplingParams | None = None,
    graph: bool = False,
    max_new_tokens: int = 8,
    seed: int = 0,
    checked: bool = False,
    device: str | torch.device | None = None,
    prompts: list[list[int]] | None = None,
    with_reference: bool = True,
    reference: str = "decoder",
) -> E2EResult:
    """Run one configuration; ``reference`` = "decoder" (full recompute, reports margins) or
    "plain-engine" (non-speculative batched decode with this engine: fast, for long runs)."""
    from impl.platform import default_device

    device = torch.device(device) if device is not None else default_device()
    g = cfg.gamma if gamma is None else gamma
    prompts = make_prompts(cfg, batch, g, seed) if prompts is None else prompts
    weights = target_weights(cfg, device)
    refs, margins = {}, []
    if with_reference or DraftSource.parse(draft).needs_continuation:
        # gamma + 1 extra tokens so an oracle can propose past the last one kept
        if reference == "decoder":
            refs, margins = reference_continuations(cfg, weights, prompts, max_new_tokens + g + 1)
        elif reference == "plain-engine":
            refs = plain_continuations(cfg, weights, prompts, max_new_tokens + g + 1, device)
        else:
            raise ValueError(f"reference must be 'decoder' or 'plain-engine', got {reference!r}")
    from impl.model.target import TargetModel

    engine = SpecEngine(
        cfg, gamma=gamma, num_slots=num_slots or max(1, (len(prompts) + 1) // 2), algorithm=algorithm,
        kv_backend=kv_backend, platform=platform, draft=draft, continuations=refs, sampling=sampling,
        checked=checked, graph=graph, device=device, seed=seed, target=TargetModel(cfg, device, weights),
    )
    for i, p in enumerate(prompts):
        engine.add_request(p, max_new_tokens, rid=i)
    outputs = engine.run()
    result = E2EResult(outputs, {i: t[:max_new_tokens] for i, t in refs.items()} if with_reference else {},
                       margins, engine)
    if with_reference and sampling is None:
        for rid, ref in result.references.items():
            got = outputs.get(rid, [])
            if got != ref:
                idx = next((j for j, (a, b) in enumerate(zip(got, ref)) if a != b), min(len(got), len(ref)))
                result.mismatches[rid] = idx
                per_token = _LAST_REFERENCE_MARGINS.get(rid, []) if reference == "decoder" else []
                if idx < len(per_token):
                    result.mismatch_margins[rid] = per_token[idx]
    return result


def _abbrev(tokens: list[int], n: int = 8) -> str:
    return " ".join(map(str, tokens)) if len(tokens) <= n else " ".join(map(str, tokens[:n])) + f" ... ({len(tokens)})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m impl.e2e", description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=["dspark", "mtp", "none"], default=None)
    ap.add_argument("--gamma", type=int, default=None)
    ap.add_argument("--kv", choices=["unified", "paged"], default=None)
    ap.add_argument("--platform", choices=["cuda", "hip", "cpu"], default=None,
                    help="whose policies apply (hip on a CUDA/CPU device is emulation)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--slots", type=int, default=None)
    ap.add_argument("--preset", choices=["cpu-small", "dsv4"], default="cpu-small")
    ap.add_argument("--draft", default="model", help="model | oracle | noisy:Q | random")
    ap.add_argument("--sampling", action="store_true", help="sampling verify (temperature 1, top-k 20, top-p 0.9)")
    ap.add_argument("--graph", action="store_true", help="CUDA graphs for the verify step (GPU only)")
    ap.add_argument("--steps", type=int, default=16, help="new tokens per request")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checked", action="store_true", help="verify pool contents after every step")
    ap.add_argument("--world-size", type=int, default=1, help="ranks: DP attention + TP MLP when > 1")
    ap.add_argument("--fault", default=None, help="fault injection RANK:STEP[:CALL[:MODE]] (also DSPARK_FAULT)")
    ap.add_argument("--timeout", type=float, default=60.0, help="process-group timeout (s), world size > 1")
    args = ap.parse_args(argv)
    cfg = preset(args.preset, args.seed)
    if args.world_size > 1:
        return _main_distributed(args, cfg)
    if args.world_size < 1:
        ap.error("--world-size must be >= 1")
    sampling = SamplingParams(temperature=1.0, top_k=20, top_p=0.9, seed=args.seed) if args.sampling else None
    res = run_case(cfg, algorithm=args.algo, gamma=args.gamma, kv_backend=args.kv, platform=args.platform,
                   batch=args.batch, num_slots=args.slots, draft=args.draft, sampling=sampling, graph=args.graph,
                   max_new_tokens=args.steps, seed=args.seed, checked=args.checked)
    eng = res.engine
    print(f"config: preset={args.preset} algo={eng.algorithm} gamma={eng.gamma} kv={eng.kv_backend} "
          f"platform={eng.platform} draft={args.draft} sampling={bool(sampling)} graph={args.graph} "
          f"batch={args.batch} slots={eng.spec.num_slots} device={eng.device}")
    for rid, toks in res.outputs.items():
        req = eng.finished[rid]
        print(f"  req {rid} (prompt {len(req.prompt)}, slot {req.slot}, steps {req.joined_step}-{req.finished_step}): {_abbrev(toks)}")
    print(f"accept length: {res.accept_length:.3f} tokens/step ({eng.stats.summary()})")
    print(f"engine steps: {eng.step_index}, tokens/s: {eng.tokens_per_second:.1f}")
    if sampling is not None:
        valid = all(len(t) == args.steps and all(0 <= x < cfg.vocab for x in t) for t in res.outputs.values())
        print(f"lossless: n/a (sampling); tokens valid: {'yes' if valid else 'no'}")
        return 0 if valid else 1
    print(f"min top-2 logit margin (reference): {res.min_margin:.4g}")
    detail = ""
    if not res.lossless:
        detail = f" (first mismatch per request: {res.mismatches}; reference top-2 margin there: " + \
            ", ".join(f"{rid}: {m:.3g}" for rid, m in res.mismatch_margins.items()) + ")"
    print(f"lossless: {'yes' if res.lossless else 'no'}{detail}")
    return 0 if res.lossless else 1


def _main_distributed(args, cfg: TinyConfig) -> int:
    from impl.distributed.compare import expected, prepare, table
    from impl.distributed.launch import DistCase, DistributedRunError, launch, pick_backend
    from impl.distributed.lockstep import FaultPlan

    if args.sampling or args.graph:
        raise SystemExit("--world-size > 1 supports greedy eager decoding only (no --sampling / --graph)")
    backend = pick_backend(args.world_size)
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    g = cfg.gamma if args.gamma is None else args.gamma
    fault = FaultPlan.parse(args.fault) if args.fault else FaultPlan.from_env()
    case = prepare(DistCase(cfg, make_prompts(cfg, args.batch, g, args.seed), args.steps, algorithm=args.algo,
                            gamma=args.gamma, kv_backend=args.kv, platform=args.platform, num_slots=args.slots or 2,
                            draft=args.draft, checked=args.checked, seed=args.seed, fault=fault), device)
    try:
        per_rank = launch([case], args.world_size, backend=backend, timeout_s=args.timeout)[0]
    except DistributedRunError as err:
        print(f"distributed run failed: {str(err).split(chr(10) + '---')[0]}", file=sys.stderr)
        return 2
    exp = expected(case, device)
    print(f"config: preset={args.preset} algo={args.algo or 'env'} gamma={g} kv={args.kv or 'env'} draft={args.draft} "
          f"batch={args.batch} slots/rank={case.num_slots} world_size={args.world_size} backend={backend}")
    for r in per_rank:
        print(f"  rank {r.rank}: requests {sorted(r.outputs)} accept length {r.accept_length:.3f} "
              f"(busy {r.busy_steps}/{r.engine_steps} steps, {r.idle_phases} idle phases) "
              f"per request {r.accept_lens}")
    print(f"single-rank accept length: {exp.single_accept_length:.3f}")
    text, ok = table([case], [per_rank], [exp])
    print(text)
    print(f"lossless: {'yes' if ok else 'no'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
