"""CLI mistakes get one line on stderr and exit 2, before any work (issue 17 §4).

Each case runs the real command in a subprocess with a clean gate environment
(every DSPARK_* variable removed, then the case's own set) and checks the exit
code, that stderr is exactly one line without a traceback, and the message.
Most cases fail while parsing, before torch is imported (well under a second);
the ones that need to know whether a GPU is present import torch first.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from ci.registration import register

E2E = ["-m", "impl.e2e"]
NCCL = ["-m", "impl.distributed.check_nccl"]
GATES = ["-m", "impl.gates"]


def _has_gpus(n: int) -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() >= n


def _run(args: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DSPARK_")}
    clean.update(env or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=clean, timeout=timeout,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _assert_one_line_exit_2(proc: subprocess.CompletedProcess, pattern: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, f"exit {proc.returncode}, stderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(err.splitlines()) == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    assert re.search(pattern, err), f"{err!r} does not match {pattern!r}"
    return err


CASES = [  # (id, argv, extra env, message regex)
    ("bad-platform-gate", E2E, {"DSPARK_PLATFORM": "rocm"},
     r"^python -m impl\.e2e: error: gate 'platform': environment variable DSPARK_PLATFORM='rocm' is not allowed"),
    ("bad-check-gate", E2E + ["--steps", "2"], {"DSPARK_CHECK": "yes"}, r"DSPARK_CHECK='yes' is not allowed"),
    ("gamma-0", E2E + ["--gamma", "0"], {}, r"argument --gamma: must be in \[1, 16\], got 0"),
    ("gamma-1000", E2E + ["--gamma", "1000"], {}, r"argument --gamma: must be in \[1, 16\], got 1000"),
    ("gamma-text", E2E + ["--gamma", "three"], {}, r"argument --gamma: expected an integer"),
    ("draft-bogus", E2E + ["--draft", "bogus"], {}, r"argument --draft: draft source must be one of"),
    ("draft-noisy-2", E2E + ["--draft", "noisy:2"], {}, r"argument --draft: .*must be in \[0, 1\]"),
    ("draft-without-algo", E2E + ["--algo", "none", "--draft", "oracle"], {},
     r"argument --draft: 'oracle' needs --algo dspark or mtp"),
    ("batch-0", E2E + ["--batch", "0"], {}, r"argument --batch: must be in \[1, 256\], got 0"),
    ("slots-0", E2E + ["--slots", "0"], {}, r"argument --slots: must be in \[1, 256\], got 0"),
    ("steps-0", E2E + ["--steps", "0"], {}, r"argument --steps: must be in \[1, 1024\], got 0"),
    ("steps-past-max-pos", E2E + ["--steps", "1000"], {}, r"argument --steps: .*exceed preset cpu-small's max_pos"),
    ("timeout-0", E2E + ["--world-size", "2", "--timeout", "0"], {},
     r"argument --timeout: must be in \(0, 3600\] seconds, got 0"),
    ("world-size-0", E2E + ["--world-size", "0"], {}, r"argument --world-size: must be in \[1, 8\], got 0"),
    ("fault-rank-out-of-range", E2E + ["--world-size", "2", "--fault", "2:1"], {},
     r"--fault: rank 2 is out of range for --world-size 2 \(ranks 0\.\.1\)"),
    ("fault-single-rank", E2E + ["--fault", "0:1"], {}, r"--fault: fault injection needs --world-size > 1"),
    ("fault-garbage-env", E2E + ["--world-size", "2"], {"DSPARK_FAULT": "soon"},
     r"environment variable DSPARK_FAULT: fault plan must be RANK:STEP"),
    ("distributed-sampling", E2E + ["--world-size", "2", "--sampling"], {},
     r"--world-size > 1 supports greedy eager decoding only"),
    ("unknown-flag", E2E + ["--bogus"], {}, r"unrecognized arguments: --bogus"),
    ("capture-sizes-without-graph", E2E + ["--capture-sizes", "1,2"], {},
     r"argument --capture-sizes: only applies with --graph"),
    ("capture-sizes-text", E2E + ["--graph", "--capture-sizes", "1,two"], {},
     r"argument --capture-sizes: expected comma-separated positive integers like 1,2,4,8, got '1,two'"),
    ("capture-sizes-above-slots", E2E + ["--graph", "--batch", "4", "--slots", "2", "--capture-sizes", "4,8"], {},
     r"argument --capture-sizes: every capture size in 4,8 exceeds the 2 slot\(s\) in flight"),
    ("nccl-world-size-1", NCCL + ["--world-size", "1"], {}, r"argument --world-size: must be in \[2, 8\], got 1"),
    ("nccl-timeout-0", NCCL + ["--timeout", "0"], {}, r"argument --timeout: must be in \(0, 3600\]"),
    ("nccl-draft-bogus", NCCL + ["--draft", "bogus", "--backend", "gloo"], {}, r"argument --draft: draft source"),
    ("nccl-bad-gate", NCCL + ["--backend", "gloo"], {"DSPARK_KV_BACKEND": "ring"},
     r"DSPARK_KV_BACKEND='ring' is not allowed"),
]


@register(suite="foundation", hardware="cpu", schedule="per-commit", est_time=12)
@pytest.mark.parametrize("argv, env, pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cli_mistake_is_one_line_and_exit_2(argv, env, pattern):
    _assert_one_line_exit_2(_run(argv, env), pattern)


@register(suite="foundation", hardware="cpu", schedule="per-commit", est_time=20)
def test_hardware_mistakes_on_cpu_are_one_line_and_exit_2():
    """--graph, --kernel-backend triton and check_nccl over NCCL need GPUs (torch is imported to know).

    The subprocesses see no GPU even on a GPU machine (every device hidden), so this never skips."""
    no_gpu = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}
    _assert_one_line_exit_2(_run(E2E + ["--graph"], no_gpu), r"argument --graph: CUDA graphs need a GPU")
    _assert_one_line_exit_2(_run(E2E + ["--kernel-backend", "triton"], no_gpu),
                            r"kernel backend 'triton' needs a GPU")
    _assert_one_line_exit_2(_run(NCCL, no_gpu), r"--backend nccl with --world-size 2 needs 2 GPUs, found 0 "
                                        r"\(use --backend gloo to run on CPU\)")


@register(suite="foundation", hardware="cpu", schedule="per-commit", est_time=2)
def test_gates_cli_shows_values_and_rejects_invalid_ones():
    ok = _run(GATES, {"DSPARK_KV_BACKEND": "paged"})
    assert ok.returncode == 0 and not ok.stderr, ok.stderr
    rows = {line.split()[0]: line for line in ok.stdout.splitlines()[2:]}
    assert set(rows) == {"platform", "spec_algorithm", "kv_backend", "kernel_backend", "check_mode"}
    assert rows["kv_backend"].rstrip().endswith("paged") and rows["check_mode"].rstrip().endswith("off (default)")
    assert rows["platform"].rstrip().endswith(("cpu (detected)", "cuda (detected)", "hip (detected)"))
    assert rows["kernel_backend"].rstrip().endswith(("triton-interpret (detected)", "triton (detected)"))
    bad = _run(GATES, {"DSPARK_CHECK": "maybe", "DSPARK_SPEC_ALGO": "mtp"})
    err = _assert_one_line_exit_2(bad, r"^error: gate 'check_mode': environment variable DSPARK_CHECK='maybe' "
                                       r"is not allowed; expected one of \['off', 'on'\]$")
    assert "'maybe' INVALID" in bad.stdout and err
    rows = {line.split()[0]: line for line in bad.stdout.splitlines()[2:]}
    assert rows["spec_algorithm"].rstrip().endswith("mtp")
    _assert_one_line_exit_2(_run(GATES + ["--list"]), r"takes no arguments")


@register(suite="foundation", hardware="cpu", schedule="per-commit", est_time=25)
def test_e2e_cli_says_what_it_runs():
    """A short run: the config line names the kernel backend (torch by default on CPU), progress
    goes to stderr, the verdict to stdout."""
    proc = _run(E2E + ["--batch", "2", "--steps", "3"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    config = proc.stdout.splitlines()[0]
    want = "triton" if _has_gpus(1) else "torch"
    assert config.startswith("config: ") and f"kernel_backend={want}" in config, config
    assert "lossless: yes" in proc.stdout
    assert re.search(r"^\[e2e +[\d.]+ s\] reference \(decoder\): 2 request\(s\)", proc.stderr, re.M), proc.stderr
    assert re.search(r"^\[e2e +[\d.]+ s\] done: \d+ steps, 6 tokens$", proc.stderr, re.M), proc.stderr
    interp = _run(E2E + ["--batch", "1", "--steps", "1", "--kernel-backend", "triton-interpret"], timeout=300)
    if not _has_gpus(1):
        assert interp.returncode == 0, interp.stderr
        assert "kernel_backend=triton-interpret (Triton interpreter: exact but slow" in interp.stdout
