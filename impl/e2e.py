"""End-to-end speculative decoding on the tiny DeepSeek-V4-like model (docs/design.md §7): the CLI.

    python -m impl.e2e [--algo dspark|mtp|none] [--gamma N] [--kv unified|paged]
                       [--platform cuda|hip|cpu] [--kernel-backend triton|triton-interpret|torch]
                       [--batch N] [--slots N] [--preset cpu-small|dsv4]
                       [--draft model|oracle|noisy:0.3|random] [--sampling]
                       [--graph [--capture-sizes 1,2,4,...]] [--profile]
                       [--steps N] [--seed S] [--checked]
                       [--world-size N [--fault RANK:STEP[:CALL[:MODE]]] [--timeout S]]

Runs one configuration: ``--batch`` requests with prompts shorter and longer
than the window join as slots free up (``--slots``, default half the batch,
so slots are reused) and each generates ``--steps`` tokens. Prints the
configuration first, progress lines on stderr while it runs, then the tokens
per request (abbreviated), the average accept length, engine steps, tokens/s,
and the lossless verdict against the reference decoder (greedy; one rule,
:mod:`impl.engine.verdict`, docs/design.md §7.3). Exit codes: 0 lossless
(``yes``, or ``near-tie``: requests diverge only where the reference's top-two
gap is within the measured logit error's margin), 1 not lossless (a mismatch
above that margin; for ``--sampling``, an invalid token), 2 a usage error.
``--graph`` captures one CUDA graph per batch size up front, derived from the
slots (``--capture-sizes`` names them instead; a step with more requests than
the largest size runs eagerly and is counted). ``--profile`` prints the median
per-step host and GPU time per component (metadata, draft, model, writes,
renorm, accept; docs/design.md §7.6). ``--world-size N`` (N > 1) runs the same requests on N ranks --
DP attention, tensor-parallel MLP (``impl.distributed``; gloo on CPU, NCCL
with one GPU per rank), ``--slots`` per rank -- and also compares with the
single-rank engine and prints each rank's accept length.

Kernel backend: on a machine without a GPU this CLI runs the data-moving ops
in torch unless ``--kernel-backend`` or ``DSPARK_KERNEL_BACKEND`` asks for
``triton-interpret`` (the Triton interpreter is exact but ~40x slower:
minutes for ``--algo mtp --sampling``). CI jobs pin their backend through the
catalog/variants, so this default changes nothing they cover.

Gates not given on the command line come from the environment
(``DSPARK_SPEC_ALGO``, ``DSPARK_KV_BACKEND``, ``DSPARK_PLATFORM``,
``DSPARK_KERNEL_BACKEND``, ``DSPARK_CHECK``), read once. Every argument is
checked before any work starts: a mistake is one line on stderr and exit 2.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from impl.cli_args import CliParser, Progress, bounded_float, bounded_int, fail
from impl.gates import GATES, GateError, gates_in_effect
from impl.run_options import RunOptions, SamplingParams

PROG = "python -m impl.e2e"
MAX_GAMMA = 16  # drafts per step; real deployments use 1-7, the reference decoder is O(tokens^2)
MAX_BATCH = 256
MAX_STEPS = 1024
MAX_WORLD = 8
INTERPRETER_NOTE = "Triton interpreter: exact but slow on CPU; --kernel-backend torch is ~40x faster"


def _capture_sizes(text: str) -> tuple[int, ...]:
    from impl.engine.graph_plan import parse_capture_sizes

    try:
        return parse_capture_sizes(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def slots_for(options: RunOptions) -> int:
    """Single-rank slots: ``--slots``, else half the batch (so slots are reused)."""
    return options.num_slots or max(1, (options.batch + 1) // 2)


def build_parser() -> CliParser:
    ap = CliParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", choices=["dspark", "mtp", "none"], default=None)
    ap.add_argument("--gamma", type=bounded_int(1, MAX_GAMMA), default=None, help=f"drafts per step, 1..{MAX_GAMMA}")
    ap.add_argument("--kv", choices=["unified", "paged"], default=None)
    ap.add_argument("--platform", choices=["cuda", "hip", "cpu"], default=None,
                    help="whose policies apply (hip on a CUDA/CPU device is emulation)")
    ap.add_argument("--kernel-backend", choices=list(GATES["kernel_backend"].values), default=None,
                    help="who runs the data-moving ops (default: triton on a GPU, torch on CPU)")
    ap.add_argument("--batch", type=bounded_int(1, MAX_BATCH), default=4, help=f"requests, 1..{MAX_BATCH}")
    ap.add_argument("--slots", type=bounded_int(1, MAX_BATCH), default=None, help="request slots (per rank)")
    ap.add_argument("--preset", choices=["cpu-small", "dsv4"], default="cpu-small")
    ap.add_argument("--draft", default="model", help="model | oracle | noisy:Q | random")
    ap.add_argument("--sampling", action="store_true", help="sampling verify (temperature 1, top-k 20, top-p 0.9)")
    ap.add_argument("--graph", action="store_true", help="CUDA graphs for the verify step (GPU only)")
    ap.add_argument("--capture-sizes", type=_capture_sizes, default=None,
                    help="with --graph: batch sizes to capture, e.g. 1,2,4,8 (default: derived from --slots)")
    ap.add_argument("--profile", action="store_true", help="print per-step host/GPU time per component")
    ap.add_argument("--steps", type=bounded_int(1, MAX_STEPS), default=16, help="new tokens per request")
    ap.add_argument("--seed", type=bounded_int(0, 2**31 - 1), default=0)
    ap.add_argument("--checked", action="store_true", help="verify pool contents after every step")
    ap.add_argument("--world-size", type=bounded_int(1, MAX_WORLD), default=1,
                    help="ranks: DP attention + TP MLP when > 1")
    ap.add_argument("--fault", default=None, help="fault injection RANK:STEP[:CALL[:MODE]] (also DSPARK_FAULT)")
    ap.add_argument("--timeout", type=bounded_float(0, 3600, low_open=True), default=60.0,
                    help="process-group timeout (s), world size > 1")
    return ap


def validate(args, environ) -> tuple[RunOptions, object, object]:
    """Everything that can be checked without torch: (options, cfg, fault plan); exits 2 on a mistake."""
    from impl.distributed.faults import FAULT_ENV, FaultPlan
    from impl.engine.drafting import DraftSource
    from impl.engine.prompts import prompt_lengths
    from impl.model.tiny_config import preset

    try:
        source = DraftSource.parse(args.draft)
    except ValueError as err:
        fail(PROG, f"argument --draft: {err}")
    sampling = SamplingParams(temperature=1.0, top_k=20, top_p=0.9, seed=args.seed) if args.sampling else None
    try:
        options = RunOptions.resolve(
            environ, algorithm=args.algo, gamma=args.gamma, kv_backend=args.kv, platform=args.platform,
            kernel_backend=args.kernel_backend, batch=args.batch, num_slots=args.slots, draft=args.draft,
            sampling=sampling, graph=args.graph, max_new_tokens=args.steps, seed=args.seed, checked=args.checked,
            capture_sizes=args.capture_sizes)
    except GateError as err:
        fail(PROG, str(err))
    if args.capture_sizes is not None:
        from impl.engine.graph_plan import plan_graphs

        if not args.graph:
            fail(PROG, "argument --capture-sizes: only applies with --graph")
        try:
            plan_graphs(slots_for(options), args.capture_sizes)
        except ValueError as err:
            fail(PROG, f"argument --capture-sizes: {err}")
    if options.algorithm == "none" and source.kind != "model":
        fail(PROG, f"argument --draft: {args.draft!r} needs --algo dspark or mtp (algorithm 'none' drafts nothing)")
    cfg = preset(args.preset, args.seed)
    g = options.gamma_for(cfg.gamma)
    longest = max(prompt_lengths(cfg.window, args.batch, g))
    if longest + args.steps + g + 1 > cfg.max_pos:
        fail(PROG, f"argument --steps: {args.steps} new tokens after a {longest}-token prompt with gamma {g} exceed "
                   f"preset {args.preset}'s max_pos {cfg.max_pos}")
    fault_text = args.fault if args.fault is not None else environ.get(FAULT_ENV, "").strip() or None
    fault = None
    if fault_text is not None:
        where = "--fault" if args.fault is not None else f"environment variable {FAULT_ENV}"
        try:
            fault = FaultPlan.parse(fault_text)
        except ValueError as err:
            fail(PROG, f"{where}: {err}")
        if args.world_size == 1:
            fail(PROG, f"{where}: fault injection needs --world-size > 1")
        if fault.rank >= args.world_size:
            fail(PROG, f"{where}: rank {fault.rank} is out of range for --world-size {args.world_size} "
                       f"(ranks 0..{args.world_size - 1})")
    if args.world_size > 1 and (args.sampling or args.graph or args.profile):
        fail(PROG, "--world-size > 1 supports greedy eager decoding only (no --sampling / --graph / --profile)")
    return options, cfg, fault


def settle_hardware(options: RunOptions, args, environ) -> RunOptions:
    """The checks that need torch (GPU present?) and the CPU kernel default; exits 2 on a mistake."""
    import torch

    gpu = torch.cuda.is_available()
    if options.graph and not gpu:
        fail(PROG, "argument --graph: CUDA graphs need a GPU; none is visible (torch.cuda.is_available() is False)")
    if options.kernel_backend == "triton" and not gpu:
        fail(PROG, "kernel backend 'triton' needs a GPU; on CPU use --kernel-backend torch or triton-interpret")
    if options.kernel_backend is None:
        options = options.replace(kernel_backend="triton" if gpu else "torch")
    # The kernel backend reaches the ops through the run's gates (``main`` and every engine step
    # run inside ``gates_in_effect(options.gates)``; impl.kernels, imported by the first op, decides
    # interpret-vs-compile from them). TRITON_INTERPRET is Triton's own switch and stays an
    # environment write: Triton reads it when *it* is imported -- possibly before impl.kernels --
    # and spawned rank processes inherit it.
    if options.kernel_backend == "triton-interpret":
        os.environ["TRITON_INTERPRET"] = "1"
    return options


def describe_backend(options: RunOptions) -> str:
    kb = options.kernel_backend
    return f"{kb} ({INTERPRETER_NOTE})" if kb == "triton-interpret" else kb


def speculation_fields(options: RunOptions, gamma: int) -> str:
    """The config line's speculative fields (gamma, draft): empty for --algo none, where they do not apply."""
    return "" if options.algorithm == "none" else f" gamma={gamma} draft={options.draft}"


def _abbrev(tokens: list[int], n: int = 8) -> str:
    return " ".join(map(str, tokens)) if len(tokens) <= n else " ".join(map(str, tokens[:n])) + f" ... ({len(tokens)})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    options, cfg, fault = validate(args, os.environ)
    options = settle_hardware(options, args, os.environ)
    with gates_in_effect(options.gates):
        if args.world_size > 1:
            return _main_distributed(args, cfg, options, fault)
        return _main_single(args, cfg, options)


def _main_single(args, cfg, options: RunOptions) -> int:
    from impl.engine.run import run_case
    from impl.platform import default_device, platform_for

    device = default_device()
    spec = speculation_fields(options, options.gamma_for(cfg.gamma))
    print(f"config: preset={args.preset} algo={options.algorithm}{spec} "
          f"kv={options.kv_backend} platform={platform_for(options.platform).backend} "
          f"sampling={bool(options.sampling)} graph={options.graph} batch={options.batch} "
          f"slots={slots_for(options)} device={device} "
          f"kernel_backend={describe_backend(options)}", flush=True)
    progress = Progress("e2e")
    timer = None
    if args.profile:
        from impl.step_timing import StepTimer

        timer = StepTimer(device)

    def on_step(eng) -> None:
        done = len(eng.finished)
        progress(f"step {eng.step_index}: requests {done}/{options.batch} done, {eng.generated_tokens} tokens, "
                 f"{eng.tokens_per_second:.1f} tokens/s")

    with timer.active() if timer is not None else contextlib.nullcontext():
        res = run_case(cfg, options, on_step=on_step, log=lambda text: progress(text, force=True))
    eng = res.engine
    progress(f"done: {eng.step_index} steps, {eng.generated_tokens} tokens", force=True)
    for rid, toks in res.outputs.items():
        req = eng.finished[rid]
        print(f"  req {rid} (prompt {len(req.prompt)}, slot {req.slot}, "
              f"steps {req.joined_step}-{req.finished_step}): {_abbrev(toks)}")
    if options.algorithm != "none":   # without drafts every step emits one token: nothing was accepted
        print(f"accept length: {res.accept_length:.3f} tokens/step ({eng.stats.summary()})")
    print(f"engine steps: {eng.step_index}, tokens/s: {eng.tokens_per_second:.1f}")
    if eng.graph_runner is not None:
        gr = eng.graph_runner
        print(f"graphs: {len(gr.graphs)} captured ({gr.plan.describe()}) in {eng.capture_seconds:.2f} s; "
              f"{gr.replays} replayed steps, {gr.eager_steps} eager steps (more requests than the largest size)")
    if timer is not None:
        from impl.step_timing import format_summary

        print(format_summary(timer.summary()))
    if options.sampling is not None:
        valid = all(len(t) == args.steps and all(0 <= x < cfg.vocab for x in t) for t in res.outputs.values())
        print(f"lossless: n/a (sampling); tokens valid: {'yes' if valid else 'no'}")
        return 0 if valid else 1
    print(f"min top-2 logit margin (reference): {res.min_margin:.4g}")
    verdict = res.verdict
    print(verdict.line)
    return verdict.exit_code


def _main_distributed(args, cfg, options: RunOptions, fault) -> int:
    import torch

    from impl.distributed.compare import expected, prepare, table
    from impl.distributed.launch import DistCase, DistributedRunError, launch, pick_backend
    from impl.engine.drafting import DraftSource
    from impl.engine.prompts import make_prompts

    backend = pick_backend(args.world_size)
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    g = options.gamma_for(cfg.gamma)
    print(f"config: preset={args.preset} algo={options.algorithm}{speculation_fields(options, g)} "
          f"kv={options.kv_backend} batch={options.batch} slots/rank={options.num_slots or 2} "
          f"world_size={args.world_size} backend={backend} kernel_backend={describe_backend(options)}", flush=True)
    progress = Progress("e2e")
    case = DistCase(cfg, make_prompts(cfg, options.batch, g, options.seed), options, fault=fault)
    if DraftSource.parse(options.draft).needs_continuation:
        progress(f"reference continuations for the {options.draft} draft", force=True)
    case = prepare(case, device)
    progress(f"distributed run on {args.world_size} ranks ({backend})", force=True)
    try:
        per_rank = launch([case], args.world_size, backend=backend, timeout_s=args.timeout,
                          progress=Progress("e2e", every_s=10.0))[0]
    except DistributedRunError as err:
        print(f"distributed run failed: {str(err).split(chr(10) + '---')[0]}", file=sys.stderr)
        return 2
    progress("expected tokens: single-rank engine and reference decoder", force=True)
    exp = expected(case, device)
    speculative = options.algorithm != "none"
    for r in per_rank:
        accept = f" accept length {r.accept_length:.3f}" if speculative else ""
        print(f"  rank {r.rank}: requests {sorted(r.outputs)}{accept} "
              f"(busy {r.busy_steps}/{r.engine_steps} steps, {r.idle_phases} idle phases)"
              + (f" per request {r.accept_lens}" if speculative else ""))
    if speculative:
        print(f"single-rank accept length: {exp.single_accept_length:.3f}")
    text, ok = table([case], [per_rank], [exp])
    print(text)
    print(f"lossless: {'yes' if ok else 'no'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
