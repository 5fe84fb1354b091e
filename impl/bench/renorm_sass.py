"""What each launch of a renorm call compiles to for the H200 (sm_90), on a machine without a GPU.

    python -m impl.bench.renorm_sass [--rows 64,256] [--op top_p|top_k|both] [--vocab 129280]
        [--variant JSON] [--sms 132] [--no-dependent-launches] [--json FILE]

For each batch and op, the call's plan (the shapes, constexprs and compile options a real call on an
H200 takes: inline-PTX stores, dependent launches below their row limit) is compiled launch by launch
with the installed triton for sm_90, and the cubin read with the CUDA tools triton ships (cuobjdump):

  regs, smem     registers a thread and static shared memory a program (cuobjdump --dump-resource-usage)
  per SM         programs an SM holds at once: the least of 32 programs, 64 warps, 65,536 registers (a
                 thread's rounded up to 8) and 228 KiB of shared memory
  waves          the launch's programs / (per SM x --sms)
  loop           the main loop's SASS: among the loops (backward branches) whose body loads from global
                 memory, the first in address order that loads BLOCK / threads 32-bit words a thread a step
                 (the launch's own block; a kernel may also hold loops over other blocks, like the finish's
                 copy of a narrowed row in 2048-entry steps), else the first; its instructions a step, the
                 entries a thread takes a step (BLOCK / threads), and per entry: all instructions and those of
                 INTEGER_PIPE, the opcodes that run on the integer/logic pipe (half the FP32 pipe's issue rate
                 on sm_90)

Register counts match Nsight Compute's on the H200 for the same triton version (renorm v25 and v26,
docs/performance.md); another triton may compile differently, so the output names its version. The
loop figure is a count, not a time: it says where a launch's issue slots go. Exit status 0, 2 on a bad
argument (one line), 3 when this triton cannot compile for sm_90 here.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from impl.cli_args import CliParser, bounded_int, fail, int_list

NO_COMPILER = 3
# SASS opcodes (before the first '.') that issue to the integer/logic pipe on sm_90: compares and selects,
# integer and float min / max, shifts, logic, integer adds and address arithmetic, predicate moves.
INTEGER_PIPE = frozenset({"ISETP", "SEL", "FSEL", "FSETP", "FMNMX", "VIMNMX", "IMNMX", "SHF", "LOP3", "IADD3",
                          "LEA", "P2R", "R2P", "PRMT", "PLOP3", "POPC", "FLO", "BMSK", "SGXT"})
REGISTERS_PER_SM, MAX_PROGRAMS, MAX_WARPS, SHARED_PER_SM = 65536, 32, 64, 228 * 1024
# the renorm kernels' run-time arguments: their types as a real call passes them (a tensor parameter)
_ARG_TYPES = {"probs_ptr": "*fp32", "out_ptr": "*fp32", "cand_ptr": "*fp32", "gath_ptr": "*fp32",
              "seg_ptr": "*i32", "list_ptr": "*i32", "part_ptr": "*fp64", "state_ptr": "*i64", "fstate_ptr": "*fp64",
              "param_scalar": "fp32", "V": "i32", "chunk_len": "i32", "num_chunks": "i32", "cap": "i32"}


def programs_per_sm(regs: int, warps: int, shared: int) -> int:
    """Programs of ``warps`` warps, ``regs`` registers a thread and ``shared`` bytes an SM holds at once."""
    by_regs = REGISTERS_PER_SM // (-(-regs // 8) * 8 * 32 * warps)
    by_shared = SHARED_PER_SM // shared if shared else MAX_PROGRAMS
    return max(0, min(MAX_PROGRAMS, MAX_WARPS // warps, by_regs, by_shared))


def parse_sass(text: str) -> list[tuple[int, str]]:
    """(address, instruction) of every SASS line of cuobjdump -sass output."""
    found = []
    for line in text.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            found.append((int(m.group(1), 16), m.group(2)))
    return found


def opcode(instruction: str) -> str:
    """The opcode of one SASS instruction, without its predicate guard and modifiers ('@!P0 ISETP.GE.AND' -> ISETP)."""
    words = instruction.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def loaded_words(body: list[str]) -> int:
    """32-bit words a thread loads from global memory in one pass over ``body`` (LDG.E 1, .64 2, .128 4)."""
    words = 0
    for text in body:
        if opcode(text) == "LDG":
            width = re.search(r"\.(64|128)\b", text.split()[1] if text.startswith("@") else text.split()[0])
            words += int(width.group(1)) // 32 if width else 1
    return words


def main_loop(instructions: list[tuple[int, str]], words: int | None = None) -> list[str] | None:
    """The body of the main loop (see the module doc): among the loops that load from global memory, the first
    in address order that loads ``words`` words a thread a step, else the first; None when no loop loads."""
    at = {address: i for i, (address, _) in enumerate(instructions)}
    loops = []
    for i, (address, text) in enumerate(instructions):
        if opcode(text) != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", text)
        target = int(m.group(1), 16) if m else None
        if target is not None and target < address and target in at:
            body = [t for _, t in instructions[at[target]:i + 1]]
            if any(opcode(t) == "LDG" for t in body):
                loops.append((target, body))
    loops.sort(key=lambda loop: loop[0])
    matching = [body for _, body in loops if words is not None and loaded_words(body) == words]
    return matching[0] if matching else (loops[0][1] if loops else None)


def _attrs(names: list[str], values: dict) -> dict:
    # what triton's launcher specializes on: 16-byte aligned pointers, integers divisible by 16
    attrs = {}
    for i, name in enumerate(names):
        value = values.get(name)
        if _ARG_TYPES.get(name, "").startswith("*") or (isinstance(value, int) and value % 16 == 0):
            attrs[(i,)] = [["tt.divisibility", 16]]
    return attrs


def _cuda_tool(name: str) -> str:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(path) if path.exists() else name


def compile_launch(launch, values: dict, top_p: bool) -> dict:
    """Compile one plan launch for sm_90; its resources and main loop."""
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    params = inspect.signature(launch.kernel.fn).parameters
    names = list(params)
    meta = dict(launch.meta)
    options = {"num_warps": meta.pop("num_warps")}
    if "maxnreg" in meta:
        options["maxnreg"] = meta.pop("maxnreg")
    meta.pop("launch_pdl", None)
    signature, constexprs = {}, {}
    for i, (name, param) in enumerate(params.items()):
        if "constexpr" in str(param.annotation):
            signature[name] = "constexpr"
            constexprs[(i,)] = meta[name] if name in meta else param.default
        elif name == "param_ptr":
            signature[name] = "*fp32" if top_p else "*i32"
        elif name in _ARG_TYPES:
            signature[name] = _ARG_TYPES[name]
        else:
            raise KeyError(f"no type for {launch.kernel.__name__}'s argument {name}")
    compiled = triton.compile(ASTSource(launch.kernel, signature, constexprs, _attrs(names, values)),
                              target=GPUTarget("cuda", 90, 32), options=options)
    cubin = Path(os.environ.get("TMPDIR", "/tmp")) / f"renorm-sass-{os.getpid()}.cubin"
    try:
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([_cuda_tool("cuobjdump"), "--dump-resource-usage", str(cubin)], capture_output=True,
                               text=True, timeout=120, check=True).stdout
        sass = subprocess.run([_cuda_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                              timeout=120, check=True).stdout
    finally:
        cubin.unlink(missing_ok=True)
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    shared = int(re.search(r"SHARED:(\d+)", usage).group(1))
    warps = options["num_warps"]
    entries = max(1, meta.get("BLOCK", 0) // (32 * warps))
    loop = main_loop(parse_sass(sass), entries)
    row = {"kernel": launch.kernel.__name__, "grid": list(launch.grid), "block": meta.get("BLOCK"), "warps": warps,
           "maxnreg": options.get("maxnreg"), "regs": regs, "shared": shared,
           "per_sm": programs_per_sm(regs, warps, shared)}
    if loop is not None:
        ops = Counter(opcode(t) for t in loop)
        integer = sum(n for op, n in ops.items() if op in INTEGER_PIPE)
        row["loop"] = {"instructions": len(loop), "entries": entries, "per_entry": round(len(loop) / entries, 2),
                       "integer_pipe_per_entry": round(integer / entries, 2), "opcodes": dict(ops.most_common())}
    return row


def report(rows: int, vocab: int, top_p: bool, tuning, dependent_launches: bool, sms: int) -> list[dict]:
    """Every launch of one call's plan, compiled (the rows of :func:`compile_launch`, plus waves)."""
    from impl.kernels.renorm import plan as rplan

    plan = rplan._plan(rows, vocab, top_p, True, tuning, dependent_launches, True)
    out = []
    for launch in (*plan.launches, plan.write):
        sizes = dict(zip(("V", "chunk_len", "num_chunks", "cap"), launch.sizes)) if launch.args != "finish" \
            else {"V": launch.sizes[0], "cap": launch.sizes[1]}
        row = compile_launch(launch, {**sizes, "param_scalar": 0}, top_p)  # a tensor parameter's call passes 0
        programs = 1
        for n in launch.grid:
            programs *= n
        row["waves"] = round(programs / (row["per_sm"] * sms), 2) if row["per_sm"] else None
        row["launch"] = launch.args
        out.append(row)
    return out


def _table(rows: int, op: str, launches: list[dict]) -> str:
    lines = [f"{op} {rows} rows:",
             "  launch    kernel                 grid         BLOCK x warps  regs  per SM  waves  loop: instr / "
             "entries a step, per entry (integer pipe)"]
    for r in launches:
        loop = r.get("loop")
        text = (f"{loop['instructions']} / {loop['entries']}, {loop['per_entry']} ({loop['integer_pipe_per_entry']})"
                if loop else "-")
        shape = f"{r['block']} x {r['warps']}" + (f" (maxnreg {r['maxnreg']})" if r["maxnreg"] else "")
        lines.append(f"  {r['launch']:<9} {r['kernel']:<22} {str(tuple(r['grid'])):<12} {shape:<14} {r['regs']:>4}"
                     f"  {r['per_sm']:>6}  {r['waves'] if r['waves'] is not None else '-':>5}  {text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = CliParser(prog="python -m impl.bench.renorm_sass", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int_list(1, 1 << 16), default=(64, 256))
    parser.add_argument("--op", choices=("top_p", "top_k", "both"), default="both")
    parser.add_argument("--vocab", type=bounded_int(1, 1 << 24), default=129280)
    parser.add_argument("--variant", default="{}", help="RenormTuning changes as a JSON object")
    parser.add_argument("--sms", type=bounded_int(1, 1024), default=132, help="SMs of the GPU (H200: 132)")
    parser.add_argument("--no-dependent-launches", action="store_true",
                        help="plan as on a GPU without programmatic dependent launches")
    parser.add_argument("--json", type=Path, help="also write every launch's figures here")
    args = parser.parse_args(argv)
    for name in ("TRITON_INTERPRET", "DSPARK_KERNEL_BACKEND"):  # compiled mode, whatever the caller set
        os.environ.pop(name, None)
    if "impl.kernels._backend" in sys.modules and sys.modules["impl.kernels._backend"].INTERPRETED:
        fail(parser.prog, "the kernels were imported in interpreter mode in this process: run it as its own process")
    import torch

    torch.cuda.is_available = lambda: True  # compiled mode for impl.kernels (nothing is launched)
    from impl.bench.renorm_kernel_profile import _variant
    from impl.kernels.renorm import DEFAULT_TUNING

    try:
        changes = _variant(args.variant)
    except Exception as exc:  # noqa: BLE001  (argparse's type errors: one line, exit 2)
        fail(parser.prog, f"--variant: {exc}")
    import dataclasses

    import triton

    tuning = dataclasses.replace(DEFAULT_TUNING, **changes)
    ops = ("top_p", "top_k") if args.op == "both" else (args.op,)
    print(f"# sm_90 compile with triton {triton.__version__}; {args.sms} SMs; tuning changes: {changes or 'none'}")
    results = []
    for rows in args.rows:
        for op in ops:
            try:
                launches = report(rows, args.vocab, op == "top_p", tuning, not args.no_dependent_launches, args.sms)
            except (FileNotFoundError, subprocess.CalledProcessError, RuntimeError) as exc:
                print(f"cannot compile for sm_90 here: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
                return NO_COMPILER
            print(_table(rows, op, launches), flush=True)
            results.append({"rows": rows, "op": op, "launches": launches})
    if args.json:
        args.json.write_text(json.dumps({"triton": triton.__version__, "sms": args.sms, "changes": changes,
                                         "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
