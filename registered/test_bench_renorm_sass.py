"""impl.bench.renorm_sass on CPU: a renorm call's launches compiled for sm_90 with no GPU.

The tool's claims are counts, so the tests hold them to what can be checked without a GPU: the
occupancy arithmetic against hand-worked H200 cases, the SASS parsing on a made-up listing, and, on
the real compile, that each launch's programs an SM and waves follow from its registers, that the
register cap holds, and that top-p's first pass clamps with saturating multiplies (no float min left
in its loop) exactly when the tuning asks, seven mins an entry otherwise.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ci.registration import register
from impl.bench.renorm_sass import loaded_words, main_loop, opcode, parse_sass, programs_per_sm

ROOT = Path(__file__).resolve().parents[1]
PROG = "python -m impl.bench.renorm_sass"


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("regs, warps, shared, want", [
    (114, 1, 0, 17),     # v25's one-warp top-p compaction: 65536 // (120 x 32)
    (96, 1, 0, 21),      # v26's
    (89, 4, 1024, 5),    # the 64-row four-warp compaction
    (64, 1, 0, 32),      # capped at 64: the 32-program limit binds
    (63, 2, 0, 16),      # rounded up to 64 registers: 65536 // (64 x 64)
    (30, 8, 0, 8),       # the write: 64 warps an SM bind
    (32, 1, 100 * 1024, 2),  # shared memory binds
    (255, 32, 0, 0),     # more registers than an SM holds
])
def test_programs_an_sm_take_the_tightest_limit(regs, warps, shared, want):
    assert programs_per_sm(regs, warps, shared) == want


LISTING = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   ISETP.GE.AND P0, PT, R2, R3, PT ;
        /*0020*/              @!P0 BRA 0x10 ;
        /*0030*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0040*/                   FMNMX R5, R4, 1.0, PT ;
        /*0050*/              @!P1 SEL R6, R5, RZ, P2 ;
        /*0060*/               @P0 BRA 0x30 ;
        /*0070*/                   EXIT ;
"""


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_main_loop_is_the_first_loop_that_loads():
    instructions = parse_sass(LISTING)
    assert [a for a, _ in instructions] == list(range(0, 0x80, 0x10))
    assert opcode("@!P1 SEL R6, R5, RZ, P2") == "SEL" and opcode("ISETP.GE.AND P0, PT, R2, R3, PT") == "ISETP"
    body = main_loop(instructions)  # the loop at 0x10 holds no load; the one at 0x30 does
    assert [opcode(t) for t in body] == ["LDG", "FMNMX", "SEL", "BRA"]
    assert main_loop(parse_sass(LISTING.replace("LDG.E", "LDS"))) is None


TWO_LOOPS = """
        /*0000*/              @!P1 LDG.E.128 R4, desc[UR6][R8.64+0x2000] ;
        /*0010*/                   LDG.E.128 R8, desc[UR6][R44.64] ;
        /*0020*/                   STG.E desc[UR6][R2.64], R4 ;
        /*0030*/              @!P2 BRA 0x0 ;
        /*0040*/                   ISETP.GE.AND P0, PT, R2, R3, PT ;
        /*0050*/              @!P1 LDG.E R6, desc[UR6][R32.64] ;
        /*0060*/              @!P1 LDG.E R7, desc[UR6][R32.64+0x4] ;
        /*0070*/                   LDG.E.64 R62, desc[UR6][R32.64+0x8] ;
        /*0080*/                   DADD R10, R10, R6 ;
        /*0090*/               @P0 BRA 0x40 ;
        /*00a0*/                   EXIT ;
"""


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_main_loop_is_the_one_that_loads_the_launchs_block():
    # a kernel with a loop over another block first (the finish copies a narrowed row 8 words a thread a
    # step before its passes load 4): the loop loading the launch's words a step is its main loop
    instructions = parse_sass(TWO_LOOPS)
    copy, passes = main_loop(instructions, 8), main_loop(instructions, 4)
    assert [opcode(t) for t in copy] == ["LDG", "LDG", "STG", "BRA"] and loaded_words(copy) == 8
    assert [opcode(t) for t in passes] == ["ISETP", "LDG", "LDG", "LDG", "DADD", "BRA"] and loaded_words(passes) == 4
    assert main_loop(instructions, 3) == copy and main_loop(instructions) == copy  # no match: the first


def _run(tmp_path, *args) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "sass.json"
    proc = subprocess.run([sys.executable, "-m", "impl.bench.renorm_sass", "--json", str(out), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def _launches(report: dict, op: str) -> list[dict]:
    return next(r["launches"] for r in report["results"] if r["op"] == op)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=60)
def test_a_compiled_call_reports_consistent_occupancy_and_the_first_pass_clamps_as_asked(tmp_path):
    proc, report = _run(tmp_path, "--rows", "64", "--op", "both")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "top_p 64 rows:" in proc.stdout and "top_k 64 rows:" in proc.stdout
    for op in ("top_p", "top_k"):
        launches = _launches(report, op)
        assert [r["launch"] for r in launches][0] == "first" and launches[-1]["launch"] == "write"
        for r in launches:
            assert 0 < r["regs"] <= 255, r
            assert r["per_sm"] == programs_per_sm(r["regs"], r["warps"], r["shared"]), r
            programs = r["grid"][0] * (r["grid"][1] if len(r["grid"]) > 1 else 1)
            assert r["waves"] == round(programs / (r["per_sm"] * report["sms"]), 2), r
            if r["maxnreg"]:
                assert r["regs"] <= r["maxnreg"], r
    assert any(r["maxnreg"] for r in _launches(report, "top_k")), "top-k's 64-row compaction is capped by default"
    first = _launches(report, "top_p")[0]
    assert first["kernel"] == "_first_pass_kernel" and first["loop"]["opcodes"].get("FMNMX", 0) == 0, first["loop"]
    assert first["loop"]["opcodes"].get("FMUL", 0) >= 7 * first["loop"]["entries"], first["loop"]

    proc, report = _run(tmp_path, "--rows", "64", "--op", "top_p", "--variant", '{"sat_clamps": false}')
    assert proc.returncode == 0, proc.stderr[-2000:]
    loop = _launches(report, "top_p")[0]["loop"]
    assert loop["opcodes"].get("FMNMX", 0) == 7 * loop["entries"], loop  # a min a bucket start an entry
    assert loop["integer_pipe_per_entry"] > first["loop"]["integer_pipe_per_entry"] + 6, (loop, first["loop"])


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=10)
def test_bad_arguments_exit_2_in_one_line():
    for args in (["--rows", "0"], ["--op", "top_q"], ["--variant", "[1]"], ["--variant", '{"sat_clamps": 1}'],
                 ["--sms", "0"]):
        proc = subprocess.run([sys.executable, "-m", "impl.bench.renorm_sass", *args], capture_output=True,
                              text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{PROG}: error:"), (args, proc.stderr)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=20)
def test_top_ps_finish_moves_its_candidates_without_a_barrier_a_step(tmp_path):
    """finish_warp_rows (renorm v28): at 256 rows top-p's finish moves each candidate within its warp's row,
    so the loop over its candidates holds no barrier; the block-wide move it replaces held five a step."""
    loops = {}
    for rows_a_warp in (True, False):
        proc, report = _run(tmp_path, "--rows", "256", "--op", "top_p", "--variant",
                            json.dumps({"finish_warp_rows": [False, rows_a_warp]}))
        assert proc.returncode == 0, proc.stderr[-2000:]
        finish = _launches(report, "top_p")[-2]
        assert finish["kernel"] == "_finish_kernel" and finish["loop"]["entries"] == 4, finish
        loops[rows_a_warp] = finish["loop"]["opcodes"]
    assert loops[True].get("BAR", 0) == 0 and loops[True].get("LDS", 0) == 0, loops[True]
    assert loops[False].get("BAR", 0) >= 3, loops[False]
