"""Small things a user meets first: renorm's parameters in the forms people pass them, its contract
in ``help()``, command-line tables that end quietly in a pipe, and a usage error before any work."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import impl
from ci.registration import register
from registered.fixture_repo import REAL_ROOT


def _probs(rows: int = 3, vocab: int = 96) -> torch.Tensor:
    return torch.softmax(3 * torch.randn(rows, vocab, generator=torch.Generator().manual_seed(7)), dim=-1)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("k", [np.int64(7), np.int32(7), torch.tensor(7), torch.tensor(7, dtype=torch.int32)],
                         ids=["numpy-int64", "numpy-int32", "0d-int64", "0d-int32"])
def test_top_k_takes_numpy_integers_and_0d_tensors(k):
    probs = _probs()
    assert torch.equal(impl.top_k_renorm(probs, k), impl.top_k_renorm(probs, 7))
    assert int((impl.top_k_renorm(probs, k) > 0).sum(dim=1).min()) >= 7


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("p", [np.float32(0.8), np.float64(0.8), torch.tensor(0.8),
                               torch.tensor(0.8, dtype=torch.float64)],
                         ids=["numpy-float32", "numpy-float64", "0d-float32", "0d-float64"])
def test_top_p_takes_numpy_floats_and_0d_tensors(p):
    probs = _probs()
    assert torch.equal(impl.top_p_renorm(probs, p), impl.top_p_renorm(probs, 0.8))


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("bad", ["5", True, np.bool_(True), 5.0, torch.tensor(5.0)], ids=str)
def test_top_k_still_refuses_what_is_not_an_integer(bad):
    with pytest.raises(TypeError, match=r"^k must (be|have)"):
        impl.top_k_renorm(_probs(), bad)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_help_states_the_whole_contract():
    for op, words in ((impl.top_k_renorm, ("float32", "2-D", "contiguous", "int32 / int64", "clamped", "Ties",
                                           "NaN", "check mode", "sync")),
                      (impl.top_p_renorm, ("float32", "2-D", "contiguous", "float32 / float64", "fp32 value",
                                           "clamped", "Ties", "NaN", "sync"))):
        doc = op.__doc__ or ""
        assert all(w in doc for w in words), [w for w in words if w not in doc]


def _into_closed_pipe(module: str) -> subprocess.CompletedProcess:
    """``python -m module`` writing into a pipe whose reader is already gone (``| head -0``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", module], stdout=write, stderr=subprocess.PIPE, text=True,
                              cwd=REAL_ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(REAL_ROOT)})
    finally:
        os.close(write)
    return proc


@register(suite="foundation", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("module", ["impl.gates", "impl.sync_policy"])
def test_a_table_into_a_closed_pipe_ends_quietly(module):
    proc = _into_closed_pipe(module)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_pr_refuses_an_unknown_hardware_label_before_any_check():
    proc = subprocess.run([sys.executable, "-m", "ci.runner.pr", "--check-arguments", "--hardware", "mi99"],
                          capture_output=True, text=True, cwd=REAL_ROOT, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--hardware 'mi99': not a label of ci/hardware.yaml; choose from cpu," in proc.stderr
    ok = subprocess.run([sys.executable, "-m", "ci.runner.pr", "--check-arguments", "--hardware", "cpu"],
                        capture_output=True, text=True, cwd=REAL_ROOT, timeout=60)
    assert ok.returncode == 0 and "===" not in ok.stdout   # nothing ran
    noxfile = (REAL_ROOT / "noxfile.py").read_text()
    body = noxfile[noxfile.index("def pr("):noxfile.index("OP_REPORT =")]
    assert body.index('"--check-arguments"') < body.index('"ruff"') < body.index('"-m", "ci.runner.pr", *args')
