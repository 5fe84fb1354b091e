"""ci.tools.compile_kernels: every kernel specialization the op table launches compiles for the H200 and MI35x.

CPU jobs run kernels in Triton's interpreter, which accepts code the compiler rejects; this
compiles them (no GPU needed) so such a bug fails per-commit CI, not the first GPU job. The
second test proves the check can fail: a kernel the interpreter runs but the compiler rejects.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ci.tools.compile_kernels import NO_COMPILER, backend_variants, covering_subset, path_features
from ci.registration import register
from registered.schedule import reduced
from registered.skips import registered_skip

REPO = Path(__file__).resolve().parents[1]
EXPECTED_KERNELS = ("_scatter_rows_kernel", "_norm_rope_kernel", "_probe_kernel", "_pass_kernel", "_compact_kernel",
                    "_finish_kernel", "_gather_finish_kernel", "_write_kernel")


def _run(*args: str, pythonpath: str = str(REPO)) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    result = subprocess.run([sys.executable, "-m", "ci.tools.compile_kernels", *args], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=1200)
    if result.returncode == NO_COMPILER:
        registered_skip("no-gpu-compiler")
    return result


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=240)
@register(suite="kernels", hardware=["cpu"], schedule="nightly", est_time=480)
def test_every_launched_kernel_compiles_for_the_h200_and_mi35x():
    """Per commit on cpu: the covering subset (every kernel x target x path class); nightly: every specialization."""
    covering = reduced()
    result = _run(*(["--covering"] if covering else []))
    output = result.stdout + result.stderr
    assert ("covering subset:" in result.stdout) == covering, output[-3000:]
    assert result.returncode == 0, output[-6000:]
    for target in ("cuda:90", "hip:gfx950"):
        summary = [line for line in result.stdout.splitlines() if line.startswith("compiled ") and target in line]
        assert summary, f"nothing compiled for {target}:\n{output[-3000:]}"
        missing = [k for k in EXPECTED_KERNELS if k not in summary[0]]
        assert not missing, f"kernels the op table should launch but did not: {missing}\n{summary[0]}"
    # the CUDA-only flags (inline-PTX stores, dependent launches) compiled on for sm_90, never for gfx950
    gated = {line.split(" for ")[1].split(" ")[0]: int(line.split("(")[1].split(" ")[0])
             for line in result.stdout.splitlines() if line.startswith("compiling ") and "backend's flags on" in line}
    assert gated.get("cuda:90", 0) > 0 and gated.get("hip:gfx950") == 0, (gated, output[-3000:])


def _spec(kernel: str, types: dict, constexprs: dict, warps: int = 4) -> dict:
    return {"kernel": kernel, "signature": {**types, **{k: "constexpr" for k in constexprs}},
            "constexprs": constexprs, "options": {"num_warps": warps}}


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_covering_subset_keeps_every_kernel_path_class_signature_and_options_and_drops_block_sizes():
    f32, b16 = {"x": "*fp32", "n": "i32"}, {"x": "*bf16", "n": "i32"}
    specs = [_spec("m:k", f32, {"FLAG": True, "STAGES": 1, "BLOCK": 64}),
             _spec("m:k", f32, {"FLAG": True, "STAGES": 1, "BLOCK": 128}),       # a block size: same path class
             _spec("m:k", f32, {"FLAG": True, "STAGES": 3, "BLOCK": 64}),        # several stages: another class
             _spec("m:k", f32, {"FLAG": False, "STAGES": 1, "BLOCK": 64}),
             _spec("m:k", b16, {"FLAG": True, "STAGES": 1, "BLOCK": 256}),        # another signature
             _spec("m:k", f32, {"FLAG": True, "STAGES": 0, "BLOCK": 64}, warps=8),  # stage off, other warps
             _spec("m:other", f32, {"BLOCK": 32}), _spec("m:other", f32, {"BLOCK": 16})]
    subset = covering_subset(specs)
    everything = set().union(*map(path_features, specs))
    assert set().union(*map(path_features, subset)) == everything
    assert {s["kernel"] for s in subset} == {"m:k", "m:other"}
    assert sum(s["kernel"] == "m:other" for s in subset) == 1          # block sizes alone: one of them
    assert not (specs[0] in subset and specs[1] in subset)             # same class, signature, options: one
    assert len(subset) < len(specs)
    assert covering_subset(list(reversed(specs))) == subset          # deterministic, whatever the recorded order
    assert covering_subset(specs[:1]) == specs[:1] and covering_subset([]) == []


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_backend_flags_are_compiled_on_for_their_backend_only():
    """A recorded specialization with PTX_STORES / PDL off gets one copy with both on for a cuda target, none for
    hip; one already on, or without the flags, gets none; copies are deduplicated."""
    f32 = {"x": "*fp32", "n": "i32"}
    off = _spec("m:k", f32, {"PTX_STORES": False, "PDL": False, "BLOCK": 64})
    half = _spec("m:k", f32, {"PTX_STORES": True, "PDL": False, "BLOCK": 64})
    plain = _spec("m:other", f32, {"BLOCK": 32})
    both_on = {"PTX_STORES": True, "PDL": True, "BLOCK": 64}
    assert backend_variants([off, plain], "cuda") == [_spec("m:k", f32, both_on)]
    assert backend_variants([off, half, plain], "cuda") == [_spec("m:k", f32, both_on)]  # the same copy once
    assert backend_variants([off, half, plain], "hip") == []
    assert backend_variants([_spec("m:k", f32, both_on), plain], "cuda") == []


BROKEN_KERNEL = '''
import torch
torch.cuda.is_available = lambda: True
import triton
import triton.language as tl


@triton.jit
def typed_twice(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    value = 0
    if n > 4:
        value = 1.5  # int32 before the runtime if, fp32 inside: the interpreter allows it
    tl.store(x_ptr + offs, value, mask=offs < n)
'''


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=10)
def test_a_kernel_only_the_compiler_rejects_fails_the_check(tmp_path):
    (tmp_path / "broken_kernels.py").write_text(textwrap.dedent(BROKEN_KERNEL))
    spec = {"kernel": "broken_kernels:typed_twice", "signature": {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
            "constexprs": {"BLOCK": 16}, "options": {"num_warps": 4}}
    launches = tmp_path / "launches.json"
    launches.write_text(json.dumps([spec]))
    result = _run("--compile", str(launches), pythonpath=f"{tmp_path}{os.pathsep}{REPO}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAILED broken_kernels:typed_twice" in result.stdout and "value" in result.stdout, result.stdout


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=2)
def test_a_bad_target_is_refused_in_one_line_before_any_work():
    result = _run("--target", "cuda:sm90", "--target", "hip:gfx950")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr.splitlines() == [
        "ci.tools.compile_kernels: --target must be cuda:<sm, e.g. 90> or hip:<gfx arch, e.g. gfx950>, got 'cuda:sm90'"]


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_check_imports_no_test_code_and_sets_no_module_globals():
    """The op table comes from impl.testing; renorm's paths come from explicit tuning objects."""
    tree = ast.parse((REPO / "ci" / "tools" / "compile_kernels.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "impl.testing.op_table" in imported
    assert not [m for m in imported if m.split(".")[0] == "registered"], imported
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "setattr" not in calls
