"""Compile every Triton kernel the op table launches for the H200 and the MI35x, on a machine without a GPU.

CPU CI runs the kernels in Triton's interpreter, which accepts code the compiler
rejects (a variable redefined with another type inside a runtime ``if``, for
one): without this, only a GPU job would find out. Two fresh processes:

1. record (interpreter): run every op-table sample, once plain and once per
   variant of its op (the renorm paths the samples alone do not reach), and each
   bad-value sample (docs/design.md §10) once, and note
   each launch's specialization -- argument types, constexpr values, warps (a
   graph-safe op's kernels are not executed: its launches cannot depend on their
   results);
2. compile (compiled mode, no GPU needed: the triton wheel ships ptxas and its
   AMD backend): compile each recorded specialization for each target (default
   sm_90 and gfx950: the H200 and the MI35x) and report what failed and why. Flags a
   plan sets only on one backend's GPUs (BACKEND_FLAGS: inline-PTX stores and dependent
   launches, CUDA), which the interpreter never records on, are compiled on as well, for
   that backend's targets only.

    python -m ci.tools.compile_kernels [--target cuda:90] [--target hip:gfx950] [--covering]

``--covering`` (the per-commit ``cpu`` job) compiles a covering subset of the recorded
specializations (:func:`covering_subset`): every kernel, for every target, with every
path class of its constexprs (flags as they are, integers as 0 / 1 / more: a stage
switched off, one, several -- not every block size), every argument-type signature
and every launch-option set at least once. The nightly ``cpu`` job compiles them all.

Exit status 0 when every kernel compiled for every target that can be compiled
for here, 1 when any failed, 2 on a bad argument (one line, before any work),
3 when no target can be (a trivial kernel fails: no toolchain in this triton
build). A target that cannot be is named.

The op table comes from ``impl.testing.op_table`` (never from test code); the
ops' other code paths (renorm tunings: explicit ``RenormTuning`` objects) are the
table's ``variants``, passed as keyword arguments. This module must not import
``impl`` or torch at import time: the compile step has to make
``impl.kernels._backend`` choose compiled mode first.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NO_COMPILER = 3
DEFAULT_TARGETS = ("cuda:90", "hip:gfx950")  # the H200 and the MI35x the workflows target
_POINTER_TYPES = {
    "float32": "fp32", "float64": "fp64", "float16": "fp16", "bfloat16": "bf16", "int8": "i8", "int16": "i16",
    "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
}
_COMPILE_OPTIONS = ("num_warps", "num_stages")
# Flags a plan turns on only for compiled kernels of one backend, so the interpreter records them off: each
# recorded specialization holding one is also compiled with every such flag on, for that backend's targets
# only (renorm: PTX_STORES, inline-PTX stores; PDL, programmatic dependent launches).
BACKEND_FLAGS = {"PTX_STORES": "cuda", "PDL": "cuda", "SAT_CLAMPS": "cuda"}


def _is_constexpr(annotation) -> bool:
    return "constexpr" in (annotation if isinstance(annotation, str) else getattr(annotation, "__name__", ""))


def _arg_type(name: str, value) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in _POINTER_TYPES:
            raise TypeError(f"argument {name}: no triton pointer type for {value.dtype}")
        return "*" + _POINTER_TYPES[dtype]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    raise TypeError(f"argument {name}: cannot type {type(value).__name__}")


def _specialization(fn, args: tuple, kwargs: dict) -> dict:
    """One launch as {kernel, signature {name: type | "constexpr"}, constexprs {name: value}, options}."""
    params = inspect.signature(fn).parameters
    bound = dict(zip(params, args))
    bound.update({k: v for k, v in kwargs.items() if k in params})
    signature, constexprs = {}, {}
    for name, param in params.items():
        value = bound.get(name, param.default)
        if _is_constexpr(param.annotation):
            signature[name] = "constexpr"
            constexprs[name] = value
        else:
            signature[name] = _arg_type(name, value)
    options = {k: kwargs[k] for k in _COMPILE_OPTIONS if k in kwargs}
    return {"kernel": f"{fn.__module__}:{fn.__name__}", "signature": signature, "constexprs": constexprs,
            "options": options}


def record_launches(runs, *, execute_graph_safe: bool = False) -> list[dict]:
    """The distinct launch specializations of ``runs`` -- (op, sample, extra kwargs) triples -- in the
    interpreter. A graph-safe op's host code never reads device data (0 syncs, pinned by
    test_op_syncs), so its launches do not depend on what its kernels compute: they are recorded
    without running the kernels (``execute_graph_safe`` runs them anyway); other ops run in full."""
    from triton.runtime.interpreter import InterpretedFunction

    from impl.testing.op_table import clone_kwargs, run_op
    from impl.validation import check_mode

    seen: dict[str, dict] = {}
    original = InterpretedFunction.run
    execute = [True]

    def recording_run(self, *args, grid, warmup, **kwargs):
        spec = _specialization(self.fn, args, kwargs)
        seen.setdefault(json.dumps(spec, sort_keys=True), spec)
        return original(self, *args, grid=grid, warmup=warmup, **kwargs) if execute[0] else None

    InterpretedFunction.run = recording_run
    try:
        for op, sample, extra in runs:
            execute[0] = execute_graph_safe or not op.graph_safe
            if extra is None:   # a bad-value sample (docs/design.md §10): same kernels, check mode off
                with check_mode(False):
                    run_op(op, op.impl, clone_kwargs(sample.make("cpu")))
                continue
            run_op(op, functools.partial(op.impl, **extra), clone_kwargs(sample.make("cpu")))
    finally:
        InterpretedFunction.run = original
    return list(seen.values())


def record(out: Path) -> int:
    """Interpreter: the op table's launches (each sample plain and with each variant), written to ``out``."""
    from impl.testing.op_table import OPS

    launches: dict[str, dict] = {}
    for op in OPS:
        variants = [{}, *(op.variants() if op.variants else {}).values()]
        samples = op.samples(False)
        runs = [(op, sample, extra) for sample in samples for extra in variants]
        runs += [(op, sample, None) for sample in (op.bad_value_samples() if op.bad_value_samples else [])]
        for spec in record_launches(runs):
            launches.setdefault(json.dumps(spec, sort_keys=True), spec)
        print(f"  {op.name}: {len(samples)} samples x {len(variants)} variant(s); "
              f"{len(launches)} specializations so far", flush=True)
    out.write_text(json.dumps(list(launches.values()), indent=1))
    print(f"recorded {len(launches)} kernel specializations", flush=True)
    return 0


def _size_class(value):
    """A constexpr's path class: flags and non-integers as they are, integers as 0, 1 or "many"."""
    if isinstance(value, bool) or not isinstance(value, int):
        return value
    return value if value in (0, 1) else "many"


def path_features(spec: dict) -> set[tuple[str, str, str]]:
    """What one specialization covers: (kernel, aspect, key) for its constexpr path class, its argument-type
    signature and its launch options."""
    kernel = spec["kernel"]
    path = sorted((name, _size_class(value)) for name, value in spec["constexprs"].items())
    types = {name: t for name, t in spec["signature"].items() if t != "constexpr"}
    return {(kernel, "path", json.dumps(path)), (kernel, "signature", json.dumps(types, sort_keys=True)),
            (kernel, "options", json.dumps(spec["options"], sort_keys=True))}


def covering_subset(specs: list[dict]) -> list[dict]:
    """A deterministic subset of ``specs`` with every feature of :func:`path_features` of the whole set: greedy,
    each step the specialization covering most features still missing (ties: the first in canonical order)."""
    ordered = sorted(specs, key=lambda spec: json.dumps(spec, sort_keys=True))
    missing = set().union(*(path_features(spec) for spec in ordered)) if ordered else set()
    chosen = []
    while missing:
        best = max(ordered, key=lambda spec: len(path_features(spec) & missing))
        chosen.append(best)
        missing -= path_features(best)
    return chosen


def backend_variants(specs: list[dict], backend: str) -> list[dict]:
    """For a target of ``backend``: each of ``specs`` holding a BACKEND_FLAGS flag that backend takes, recorded
    off, once more with all of them on (deduplicated; the others add nothing)."""
    flags = [name for name, only in BACKEND_FLAGS.items() if only == backend]
    variants: dict[str, dict] = {}
    for spec in specs:
        off = [name for name in flags if spec["constexprs"].get(name) is False]
        if off:
            on = {**spec, "constexprs": {**spec["constexprs"], **dict.fromkeys(off, True)}}
            variants.setdefault(json.dumps(on, sort_keys=True), on)
    return list(variants.values())


def target_problem(target: str) -> str | None:
    """Why ``target`` is not a backend:arch this check understands, or None (reads no toolchain)."""
    backend, _, arch = target.partition(":")
    if (backend == "cuda" and arch.isdigit()) or (backend == "hip" and arch.startswith("gfx") and arch[3:].isalnum()):
        return None
    return f"--target must be cuda:<sm, e.g. 90> or hip:<gfx arch, e.g. gfx950>, got {target!r}"


def _gpu_target(target: str):
    from triton.backends.compiler import GPUTarget

    backend, _, arch = target.partition(":")
    return GPUTarget("cuda", int(arch), 32) if backend == "cuda" else GPUTarget("hip", arch, 64)


def _toolchain_missing(gpu) -> str | None:
    """Why this triton cannot compile for gpu here (a trivial kernel fails), or None."""
    import triton
    import triton.language as tl
    from triton.compiler import ASTSource

    @triton.jit
    def copy_one(x_ptr, y_ptr):
        tl.store(y_ptr, tl.load(x_ptr))

    try:
        triton.compile(ASTSource(fn=copy_one, signature={"x_ptr": "*fp32", "y_ptr": "*fp32"}), target=gpu)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).strip()[:500]}"
    return None


def compile_recorded(path: Path, targets: list[str], *, covering: bool = False) -> int:
    """Compiled mode: compile each recorded specialization (``covering``: :func:`covering_subset`) for each
    target ("cuda:90", "hip:gfx950")."""
    for name in ("TRITON_INTERPRET", "DSPARK_KERNEL_BACKEND"):  # compiled mode, whatever the job set
        os.environ.pop(name, None)
    import torch

    torch.cuda.is_available = lambda: True  # so impl.kernels._backend picks compiled mode (nothing launches)
    import triton
    from triton.compiler import ASTSource

    specs = json.loads(path.read_text())
    if covering:
        recorded = len(specs)
        specs = covering_subset(specs)
        print(f"covering subset: {len(specs)} of {recorded} recorded specializations (every kernel x constexpr "
              "path class, argument-type signature and launch options)", flush=True)
    kernels = sorted({s["kernel"] for s in specs})
    failures, compiled_for = [], 0
    recorded = specs
    for target in targets:
        extra = backend_variants(recorded, target.partition(":")[0])
        specs = recorded + extra
        print(f"compiling {len(specs)} specializations for {target} ({len(extra)} with its backend's flags on: "
              f"{', '.join(n for n, b in BACKEND_FLAGS.items() if b == target.partition(':')[0]) or 'none'}) ...",
              flush=True)
        gpu = _gpu_target(target)
        missing = _toolchain_missing(gpu)
        if missing:
            print(f"cannot compile for {target} here: {missing}")
            continue
        compiled_for += 1
        failed_before = len(failures)
        for spec in specs:
            module, name = spec["kernel"].split(":")
            kernel = getattr(importlib.import_module(module), name)
            names = list(spec["signature"])
            constexprs = {(names.index(k),): v for k, v in spec["constexprs"].items()}
            try:
                source = ASTSource(fn=kernel, signature=spec["signature"], constexprs=constexprs)
                triton.compile(source, target=gpu, options=spec["options"])
            except Exception as exc:  # noqa: BLE001  (reported, with the specialization, below)
                failures.append((target, spec, exc))
        ok = len(specs) - (len(failures) - failed_before)
        print(f"compiled {ok} of {len(specs)} specializations of {len(kernels)} kernels for {target}: "
              f"{', '.join(k.split(':')[1] for k in kernels)}")
    for target, spec, exc in failures:
        constexprs = ", ".join(f"{k}={v}" for k, v in spec["constexprs"].items())
        print(f"FAILED {spec['kernel']} for {target} [{constexprs}] {spec['options']}:\n  {str(exc).strip()[:2000]}")
    if failures:
        return 1
    return 0 if compiled_for else NO_COMPILER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="append", dest="targets",
                        help="backend:arch to compile for, repeatable (default: cuda:90 and hip:gfx950, the H200 "
                             "and MI35x)")
    parser.add_argument("--covering", action="store_true",
                        help="compile a covering subset: every kernel x constexpr path class, argument-type "
                             "signature and launch options (default: every recorded specialization)")
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--compile", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    targets = args.targets or list(DEFAULT_TARGETS)
    problem = next(filter(None, map(target_problem, targets)), None)
    if problem:
        print(f"ci.tools.compile_kernels: {problem}", file=sys.stderr)
        return 2
    if args.record:
        return record(args.record)
    if args.compile:
        return compile_recorded(args.compile, targets, covering=args.covering)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "DSPARK_KERNEL_BACKEND")}
    with tempfile.TemporaryDirectory() as tmp:
        specs = Path(tmp) / "launches.json"
        steps = [("recording the op table's kernel launches in the interpreter", ["--record", str(specs)],
                  {**env, "TRITON_INTERPRET": "1", "DSPARK_KERNEL_BACKEND": "triton-interpret"}),
                 (f"compiling them for {', '.join(targets)}", ["--compile", str(specs),
                                                             *(f"--target={t}" for t in targets),
                                                             *(["--covering"] if args.covering else [])], env)]
        for number, (what, step_args, step_env) in enumerate(steps, 1):
            print(f"step {number}/{len(steps)}: {what}", flush=True)
            status = subprocess.run([sys.executable, "-m", "ci.tools.compile_kernels", *step_args],
                                    env=step_env).returncode
            if status:
                return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
