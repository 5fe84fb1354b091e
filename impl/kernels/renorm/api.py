"""The public renorm functions, top_k_renorm and top_p_renorm: their contract, then the full path.

A call first tries the fast path (impl/kernels/renorm/fast_path.py) when the gates are the ones a
compiled, checks-off call ran under; otherwise it checks its arguments (checks.py), resolves the
backend, and runs the torch path (torch_path.py) or the plan (plan.py) through a workspace
(workspace.py). No module of the package imports this one (``__init__`` re-exports its public names).
"""
from __future__ import annotations

import torch

from impl.gates import active_gates
from impl.kernels._backend import INTERPRETED, dependent_launch_ok, launch_mode, ptx_ok
from impl.kernels.renorm import torch_path
from impl.kernels.renorm.checks import _P_DTYPES, _check_probs, _fp32, _param_tensor, _plain_param, _tuning
from impl.kernels.renorm.fast_path import _FAST_GATES, _fast_call
from impl.kernels.renorm.plan import _Plan, _plan_for
from impl.kernels.renorm.tuning import DEFAULT_TUNING, RenormTuning
from impl.kernels.renorm.workspace import _CURRENT_DEVICE, _launch_all
from impl.validation import INDEX_DTYPES


def top_k_renorm(probs, k, *, tuning: RenormTuning | None = None):
    """Keep each row's entries >= its k-th largest and renormalise them to sum to 1 (a new tensor).

    probs: float32, 2-D ``[rows, vocab]``, contiguous, on any device (CPU runs the interpreter or
        torch, docs/design.md §3.9). Rows need not sum to 1: the kept mass is renormalised.
    k: an int (numpy integers and a 0-d integer tensor too), or an int32 / int64 tensor of shape
        ``[rows]`` on probs' device (one k per row). k is clamped to ``[1, vocab]``.
    Ties: every entry equal to the k-th largest is kept, so a row may keep more than k entries.
    Bad values (docs/design.md §10.7): NaN, +-inf and negative entries weigh 0; with check mode on
        (``DSPARK_CHECK=on``) they raise ValueError instead. A row of zeros stays zeros.
    Never syncs with the device and is CUDA-graph safe. ``tuning``: how the kernels launch (None:
    the defaults); never changes the result. Reference: ``reference.top_k_renorm``."""
    gates = active_gates()
    if gates is _FAST_GATES[0]:
        out = _fast_call(probs, k, False, tuning)
        if out is not None:
            return out
    checks = gates.check_mode == "on"
    _check_probs(probs, checks)
    k = _plain_param(k, probs, integral=True)
    k_t = _param_tensor("k", k, probs.shape[0], INDEX_DTYPES, (int,), probs, checks)
    if k_t is None:
        k = min(max(k, 1), max(probs.shape[1], 1))  # host-side clamp keeps the scalar in range
    t = DEFAULT_TUNING if tuning is None else _tuning(tuning)
    mode = launch_mode(probs, k_t, gates=gates)
    if mode == "triton" and not checks and not INTERPRETED:
        _FAST_GATES[0] = gates
    return _run(probs, k, k_t, top_p=False, tuning=t, mode=mode)


def top_p_renorm(probs, p, *, tuning: RenormTuning | None = None):
    """Keep the largest entries of each row whose mass reaches p of the row's total, renormalise them
    to sum to 1 (a new tensor): the entries holding < (1 - p) of the mass are dropped.

    probs: float32, 2-D ``[rows, vocab]``, contiguous, on any device; rows need not sum to 1 (mass is
        measured against the row's own total, docs/design.md §11.1).
    p: a float (numpy floats and a 0-d float tensor too), or a float32 / float64 tensor of shape
        ``[rows]`` on probs' device. p means the fp32 value nearest to it, clamped to ``[0, 1]``;
        p = 0 keeps the largest entry (and its ties), p = 1 keeps every positive entry.
    Ties and the boundary: entries equal to the smallest kept value are all kept; where the
        cumulative mass reaches p exactly, that level is kept (docs/design.md §11.2).
    Bad values (docs/design.md §10.7): NaN, +-inf and negative entries weigh 0; with check mode on they
        raise ValueError, as does a NaN p (a NaN p with checks off keeps the whole row).
    Never syncs with the device and is CUDA-graph safe. ``tuning``: how the kernels launch (None:
    the defaults); never changes the result. Reference: ``reference.top_p_renorm``."""
    gates = active_gates()
    if gates is _FAST_GATES[0]:
        out = _fast_call(probs, p, True, tuning)
        if out is not None:
            return out
    checks = gates.check_mode == "on"
    _check_probs(probs, checks)
    p = _plain_param(p, probs, integral=False)
    p_t = _param_tensor("p", p, probs.shape[0], _P_DTYPES, (int, float), probs, checks)
    if p_t is None:
        p = _fp32(min(max(p, 0), 1))  # clamping first: rounding keeps 0 and 1 and is monotone
    t = DEFAULT_TUNING if tuning is None else _tuning(tuning)
    mode = launch_mode(probs, p_t, gates=gates)
    if mode == "triton" and not checks and not INTERPRETED:
        _FAST_GATES[0] = gates
    return _run(probs, p, p_t, top_p=True, tuning=t, mode=mode)


def _run(probs, param, param_t, *, top_p: bool, tuning: RenormTuning, mode: str) -> torch.Tensor:
    """The full path after the checks: the torch path, or the plan's launches into a new output."""
    bs, vocab = probs.shape
    if bs == 0 or vocab == 0:
        return torch.zeros_like(probs)
    if mode == "torch":
        if param_t is None:
            param_t = torch.full((bs,), param, dtype=torch.float32 if top_p else torch.int64, device=probs.device)
        return torch_path._top_p_torch(probs, param_t) if top_p else torch_path._top_k_torch(probs, param_t)
    plan = _plan_for(bs, vocab, top_p, param_t is not None, tuning, dependent_launch_ok(probs), ptx_ok(probs))
    out = torch.empty_like(probs)
    if probs.is_cuda and probs.get_device() != _CURRENT_DEVICE():  # Triton launches on the current device
        with torch.cuda.device(probs.device):
            _launch_all(probs, param, param_t, plan, out)
    else:
        _launch_all(probs, param, param_t, plan, out)
    return out


def _select(probs, param, param_t, plan: _Plan):
    """The select alone (no write): returns ``(state,)``, the per-row state words (tests read them)."""
    return (_launch_all(probs, param, param_t, plan, None).state,)
