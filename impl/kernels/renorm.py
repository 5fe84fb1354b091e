"""Top-k / top-p renormalisation of probability rows (SPEC §3.9, graph safe).

Pivot semantics: a row keeps every entry ``>= pivot`` (ties at the pivot all
survive), then is divided by its kept mass (zero mass -> zeros, never NaN).
  top-k: pivot = the k-th largest entry, k clamped to [1, V].
  top-p: drop the smallest entries whose cumulative mass is < (1 - p) * row mass,
         p clamped to [0, 1]; for a row summing to 1 this is SPEC's "< 1 - p".
         p = 1 is a no-op, p = 0 keeps the largest entries (and their ties).

The Triton kernel finds the pivot without sorting: non-negative fp32 values
order like their int32 bit patterns, so a 31-step binary search over bit
patterns, each step one pass over the row (a count for top-k, an fp64 mass for
top-p), lands exactly on the pivot value.
"""
from __future__ import annotations

import torch

from impl.kernels._backend import launch_mode, next_pow2, tl, triton
from impl.validation import INDEX_DTYPES, check_mode_enabled, check_tensor

BLOCK_V_MAX = 4096


@triton.jit
def _renorm_kernel(
    probs_ptr, out_ptr, param_ptr, param_scalar, num_rows, V,
    TOP_P: tl.constexpr, PARAM_IS_TENSOR: tl.constexpr, ROWS: tl.constexpr, BLOCK_V: tl.constexpr,
):
    # ROWS rows per program (many for small vocabularies, one for large), BLOCK_V columns per step.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < num_rows
    base = rows.to(tl.int64) * V
    if PARAM_IS_TENSOR:
        param = tl.load(param_ptr + rows, mask=row_ok, other=0)
    else:
        param = tl.zeros([ROWS], tl.float64) + param_scalar
    if TOP_P:
        p = tl.minimum(tl.maximum(param.to(tl.float64), 0.0), 1.0)
        total = tl.zeros([ROWS], tl.float64)
        for start in range(0, V, BLOCK_V):
            offs = start + tl.arange(0, BLOCK_V)
            m = row_ok[:, None] & (offs < V)[None, :]
            x = tl.load(probs_ptr + base[:, None] + offs[None, :], mask=m, other=0.0)
            total += tl.sum(x.to(tl.float64), axis=1)
        target = (1.0 - p) * total
    else:
        k = tl.minimum(tl.maximum(param.to(tl.int64), 1), V)

    # Binary search, per row, for the pivot's bit pattern in [0, 2^31): invariant "lo qualifies,
    # hi does not". top-k: lo = largest t with count(bits >= t) >= k (the k-th largest).
    # top-p: lo = largest t with mass(bits < t) < target (the smallest kept value).
    lo = tl.zeros([ROWS], tl.int64)
    hi = lo + 2147483648
    for _ in range(31):
        mid = (lo + hi) // 2
        acc = tl.zeros([ROWS], tl.float64)
        for start in range(0, V, BLOCK_V):
            offs = start + tl.arange(0, BLOCK_V)
            m = row_ok[:, None] & (offs < V)[None, :]
            x = tl.load(probs_ptr + base[:, None] + offs[None, :], mask=m, other=0.0)
            bits = x.to(tl.int32, bitcast=True).to(tl.int64)
            if TOP_P:
                acc += tl.sum(tl.where(m & (bits < mid[:, None]), x.to(tl.float64), 0.0), axis=1)
            else:
                acc += tl.sum(tl.where(m & (bits >= mid[:, None]), 1.0, 0.0).to(tl.float64), axis=1)
        if TOP_P:
            ok = acc < target
        else:
            ok = acc >= k
        lo = tl.where(ok, mid, lo)
        hi = tl.where(ok, hi, mid)

    # Renormalise the kept entries (fp64 mass, guarded against zero).
    kept = tl.zeros([ROWS], tl.float64)
    for start in range(0, V, BLOCK_V):
        offs = start + tl.arange(0, BLOCK_V)
        m = row_ok[:, None] & (offs < V)[None, :]
        x = tl.load(probs_ptr + base[:, None] + offs[None, :], mask=m, other=0.0)
        keep = m & (x.to(tl.int32, bitcast=True).to(tl.int64) >= lo[:, None])
        kept += tl.sum(tl.where(keep, x.to(tl.float64), 0.0), axis=1)
    scale = tl.where(kept > 0.0, 1.0 / tl.where(kept > 0.0, kept, 1.0), 0.0)
    for start in range(0, V, BLOCK_V):
        offs = start + tl.arange(0, BLOCK_V)
        m = row_ok[:, None] & (offs < V)[None, :]
        x = tl.load(probs_ptr + base[:, None] + offs[None, :], mask=m, other=0.0)
        keep = x.to(tl.int32, bitcast=True).to(tl.int64) >= lo[:, None]
        y = tl.where(keep, x.to(tl.float64) * scale[:, None], 0.0)
        tl.store(out_ptr + base[:, None] + offs[None, :], y.to(tl.float32), mask=m)


def _renormalise_torch(probs: torch.Tensor, pivot: torch.Tensor) -> torch.Tensor:
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs)).double()
    mass = kept.sum(-1, keepdim=True)
    scale = torch.where(mass > 0, 1.0 / torch.where(mass > 0, mass, torch.ones_like(mass)), torch.zeros_like(mass))
    return (kept * scale).float()


def _top_k_torch(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    desc = probs.sort(dim=-1, descending=True).values
    k_idx = (k.to(torch.int64).clamp(1, probs.shape[1]) - 1)[:, None]
    return _renormalise_torch(probs, desc.gather(1, k_idx))


def _top_p_torch(probs: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    asc = probs.sort(dim=-1).values
    cum = asc.double().cumsum(-1)
    # The total is the cumsum's last entry, so p = 0 keeps exactly the largest entries.
    target = (1.0 - p.double().clamp(0.0, 1.0))[:, None] * cum[:, -1:]
    dropped = (cum < target).sum(-1, keepdim=True)  # how many of the smallest go
    pivot = asc.gather(1, dropped.clamp(max=probs.shape[1] - 1))
    pivot = torch.where(dropped < probs.shape[1], pivot, torch.full_like(pivot, float("inf")))
    return _renormalise_torch(probs, pivot)


def _param_tensor(name, value, bs, dtypes, kind, device) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        check_tensor(name, value, dtype=dtypes, shape=(bs,))
        if value.device != device:
            raise ValueError(f"{name} must be on device {device} (probs' device), got {value.device}")
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind[-1].__name__} or a tensor of shape [bs], got {type(value).__name__}")
    if value != value:
        raise ValueError(f"{name} must not be NaN")
    return None


def _check_probs(probs) -> None:
    check_tensor("probs", probs, dtype=torch.float32, ndim=2)
    if check_mode_enabled() and probs.numel() and not bool((probs >= 0).all()):
        raise ValueError("probs must be non-negative and not NaN")


def _run(probs, param, param_t, *, top_p: bool) -> torch.Tensor:
    bs, vocab = probs.shape
    if probs.numel() == 0:
        return torch.zeros_like(probs)
    if launch_mode(probs, param_t) == "torch":
        if param_t is None:
            # scalar p is used at fp32 precision, as the kernel receives it
            param_t = torch.full((bs,), param, dtype=torch.float32 if top_p else torch.int64, device=probs.device)
        return _top_p_torch(probs, param_t) if top_p else _top_k_torch(probs, param_t)
    out = torch.empty_like(probs)
    block_v = min(next_pow2(vocab), BLOCK_V_MAX)
    rows = max(1, min(next_pow2(bs), BLOCK_V_MAX // block_v, 16))
    _renorm_kernel[(triton.cdiv(bs, rows),)](
        probs, out, probs if param_t is None else param_t, 0 if param_t is not None else param, bs, vocab,
        TOP_P=top_p, PARAM_IS_TENSOR=param_t is not None, ROWS=rows, BLOCK_V=block_v,
    )
    return out


def top_k_renorm(probs, k):
    """Keep each row's entries >= its k-th largest and renormalise (new tensor)."""
    _check_probs(probs)
    k_t = _param_tensor("k", k, probs.shape[0], INDEX_DTYPES, (int,), probs.device)
    if k_t is None:
        k = min(max(k, 1), max(probs.shape[1], 1))  # host-side clamp keeps the scalar in range
    return _run(probs, k, k_t, top_p=False)


def top_p_renorm(probs, p):
    """Drop the smallest entries holding < (1 - p) of each row's mass and renormalise."""
    _check_probs(probs)
    p_t = _param_tensor("p", p, probs.shape[0], (torch.float32, torch.float64), (int, float), probs.device)
    if p_t is None:
        p = min(max(float(p), 0.0), 1.0)
    return _run(probs, p, p_t, top_p=True)
