"""The two top-p semantics that differ from FlashInfer, run as docs/design.md §11 states them.

Each worked example of §11 runs on the oracle, the torch fallback and the Triton path
(interpreted on CPU, compiled on a GPU), with a scalar and a per-row tensor p. The
values are exact in fp32, so the expected rows are exact too. Each test also pins the
alternative reading the section contrasts with, so a change of rule cannot pass.
"""
from __future__ import annotations

import pytest
import torch

import reference
from ci.registration import register
from impl.kernels import top_p_renorm
from impl.kernels._backend import launch_mode
from impl.platform import default_device

DEV = default_device()

# §11.1: a row holding half the mass; the droppable mass is (1 - p) x the row's own sum.
RELATIVE_ROW, RELATIVE_P = [0.25, 0.125, 0.0625, 0.0625], 0.5
RELATIVE_KEPT = [2 / 3, 1 / 3, 0.0, 0.0]
ABSOLUTE_READING = [0.5, 0.25, 0.125, 0.125]  # p as an absolute mass keeps all four

# §11.2: the two smallest entries hold exactly 1 - p; we keep the boundary level.
BOUNDARY_ROW, BOUNDARY_P = [0.5, 0.375, 0.125, 0.0], 0.875
BOUNDARY_KEPT = [0.5, 0.375, 0.125, 0.0]
MINIMAL_NUCLEUS = [4 / 7, 3 / 7, 0.0, 0.0]  # FlashInfer's smallest set reaching p


def _run(where: str, row: list[float], p: float, p_as_tensor: bool, monkeypatch) -> torch.Tensor:
    probs = torch.tensor([row, row], dtype=torch.float32, device=DEV)
    p_arg = torch.full((2,), p, dtype=torch.float32, device=DEV) if p_as_tensor else p
    if where == "oracle":
        return reference.top_p_renorm(probs.cpu(), p_arg.cpu() if p_as_tensor else p_arg)
    if where == "torch":
        monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")
    else:
        monkeypatch.delenv("DSPARK_KERNEL_BACKEND", raising=False)
    assert launch_mode(probs) == where, f"asked for the {where} path, the op would take {launch_mode(probs)}"
    return top_p_renorm(probs, p_arg).cpu()


def _expect(out: torch.Tensor, row: list[float]) -> None:
    want = torch.tensor([row, row], dtype=torch.float32)
    torch.testing.assert_close(out, want, rtol=0, atol=1e-7)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("p_as_tensor", [False, True])
@pytest.mark.parametrize("where", ["oracle", "torch", "triton"])
def test_top_p_mass_is_relative_to_the_rows_own_sum(where, p_as_tensor, monkeypatch):
    """§11.1: [0.25, 0.125, 0.0625, 0.0625], p = 0.5 -> [2/3, 1/3, 0, 0]."""
    out = _run(where, RELATIVE_ROW, RELATIVE_P, p_as_tensor, monkeypatch)
    _expect(out, RELATIVE_KEPT)
    assert not torch.allclose(out, torch.tensor([ABSOLUTE_READING] * 2)), "p was read as an absolute mass"


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("p_as_tensor", [False, True])
@pytest.mark.parametrize("where", ["oracle", "torch", "triton"])
def test_top_p_keeps_the_level_at_an_exact_boundary(where, p_as_tensor, monkeypatch):
    """§11.2: [0.5, 0.375, 0.125, 0], p = 0.875 -> unchanged (FlashInfer: [4/7, 3/7, 0, 0])."""
    out = _run(where, BOUNDARY_ROW, BOUNDARY_P, p_as_tensor, monkeypatch)
    _expect(out, BOUNDARY_KEPT)
    assert not torch.allclose(out, torch.tensor([MINIMAL_NUCLEUS] * 2)), "the minimal nucleus was kept"


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("where", ["oracle", "torch", "triton"])
def test_top_p_drops_the_level_once_past_the_boundary(where, monkeypatch):
    """§11.2's other side: with p one fp32 step below 0.875 the droppable mass exceeds 0.125,
    so the 0.125 level's running total is strictly below it and the level goes."""
    p = float(torch.tensor(0.875, dtype=torch.float32).nextafter(torch.tensor(0.0)))
    assert p < BOUNDARY_P
    _expect(_run(where, BOUNDARY_ROW, p, False, monkeypatch), MINIMAL_NUCLEUS)
