"""Fused RMSNorm + interleaved partial RoPE, in place (docs/design.md §3.3, graph safe).

Per row of width D (a [T, D] or [T, H, D] tensor): y = x * rsqrt(mean(x^2) + eps) * w
in fp32, then the trailing ``rope_dim`` columns rotate in pairs (2j, 2j+1):
even' = e*cos - o*sin, odd' = e*sin + o*cos, with cos/sin [max_pos, rope_dim/2]
(fp32) read at the row's position. Positions outside [0, max_pos) are clamped
so the tables are never read out of bounds; check mode reports them instead.
"""
from __future__ import annotations

import torch

from impl.kernels import _checks
from impl.kernels._backend import LaunchCache, cdiv, launch_mode, next_pow2, specialization_key, tl, triton
from impl.validation import check_mode_enabled, check_tensor

KV_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
_COMPILED = LaunchCache()  # eager calls launch the compiled kernel directly (impl/kernels/_backend.py)


@triton.jit
def _to_out(y, out_ty: tl.constexpr):
    """fp32 -> the row's dtype, rounding to nearest even for bf16 *explicitly*.

    Compiled Triton rounds to nearest even, but the Triton interpreter (CPU CI)
    truncates; doing the rounding in integer arithmetic makes both store the
    same bits as torch's ``.to(torch.bfloat16)``.
    """
    if out_ty == tl.bfloat16:
        bits = y.to(tl.int32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)  # round half to even on the 16 dropped bits
        return (bits >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    return y.to(out_ty)


@triton.jit
def _norm_rope_kernel(
    kv_ptr, w_ptr, cos_ptr, sin_ptr, pos_ptr,
    num_rows, heads, max_pos, eps,
    D: tl.constexpr, ROPE: tl.constexpr, ROWS: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # One [ROWS, D] tile per program: each row is read once and written once, contiguously.
    # Requires D - ROPE even when ROPE > 0, so RoPE pairs (2j, 2j+1) line up with the row.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < num_rows
    base = rows.to(tl.int64) * D
    cols = tl.arange(0, BLOCK_D)
    if BLOCK_D == D:
        mask = row_ok[:, None]  # row-uniform mask keeps the loads/stores 16 bytes wide
    else:
        mask = row_ok[:, None] & (cols < D)[None, :]
    ptrs = kv_ptr + base[:, None] + cols[None, :]
    # 1) RMSNorm over the whole row, in fp32 (bf16 arithmetic is never used).
    x = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)  # [ROWS]
    w = tl.load(w_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    if ROPE > 0:
        # 2) Interleaved RoPE on the trailing ROPE columns: view the row as D/2 (even, odd)
        #    pairs and rotate every pair; pairs outside the rope part get cos=1, sin=0
        #    (masked table loads: no memory traffic for them), which leaves them unchanged.
        j = tl.arange(0, BLOCK_D // 2) - (D - ROPE) // 2  # table column of each pair (<0: nope pair)
        in_rope = (j >= 0) & (j < ROPE // 2)
        # Rows of [T, H, D] share their token's position.
        pos = tl.load(pos_ptr + rows // heads, mask=row_ok, other=0).to(tl.int64)
        pos = tl.minimum(tl.maximum(pos, 0), max_pos - 1)
        table = pos[:, None] * (ROPE // 2) + j[None, :]
        tmask = row_ok[:, None] & in_rope[None, :]
        c = tl.load(cos_ptr + table, mask=tmask, other=1.0)
        s = tl.load(sin_ptr + table, mask=tmask, other=0.0)
        e, o = tl.split(tl.reshape(y, [ROWS, BLOCK_D // 2, 2]))
        y = tl.reshape(tl.join(e * c - o * s, e * s + o * c), [ROWS, BLOCK_D])
    tl.store(ptrs, _to_out(y, kv_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _norm_rope_strided_kernel(
    kv_ptr, w_ptr, cos_ptr, sin_ptr, pos_ptr,
    num_rows, heads, max_pos, eps,
    D: tl.constexpr, ROPE: tl.constexpr, ROWS: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    # Fallback for an odd number of nope columns (pairs do not line up with the row):
    # store the nope part, then reload the rope columns as strided (even, odd) pairs.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < num_rows
    base = rows.to(tl.int64) * D
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < D
    x = tl.load(kv_ptr + base[:, None] + cols[None, :], mask=row_ok[:, None] & col_ok[None, :], other=0.0)
    x = x.to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)  # [ROWS]
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    y = x * inv_rms[:, None] * w[None, :]
    NOPE = D - ROPE  # constexpr arithmetic stays constexpr
    # The "nope" columns are final; the rope columns are rewritten below.
    nope_mask = row_ok[:, None] & (cols < NOPE)[None, :]
    tl.store(kv_ptr + base[:, None] + cols[None, :], _to_out(y, kv_ptr.dtype.element_ty), mask=nope_mask)
    # They were not stored above, so these loads still see the original row.
    j = tl.arange(0, BLOCK_HALF)
    pair_mask = row_ok[:, None] & (j < ROPE // 2)[None, :]
    even_ptr = kv_ptr + base[:, None] + (NOPE + 2 * j)[None, :]
    e = tl.load(even_ptr, mask=pair_mask, other=0.0).to(tl.float32)
    o = tl.load(even_ptr + 1, mask=pair_mask, other=0.0).to(tl.float32)
    w_e = tl.load(w_ptr + NOPE + 2 * j, mask=j < ROPE // 2, other=0.0).to(tl.float32)
    w_o = tl.load(w_ptr + NOPE + 2 * j + 1, mask=j < ROPE // 2, other=0.0).to(tl.float32)
    e = e * inv_rms[:, None] * w_e[None, :]
    o = o * inv_rms[:, None] * w_o[None, :]
    pos = tl.load(pos_ptr + rows // heads, mask=row_ok, other=0).to(tl.int64)
    pos = tl.minimum(tl.maximum(pos, 0), max_pos - 1)
    table = pos[:, None] * (ROPE // 2) + j[None, :]
    c = tl.load(cos_ptr + table, mask=pair_mask, other=0.0)
    s = tl.load(sin_ptr + table, mask=pair_mask, other=0.0)
    out_ty = kv_ptr.dtype.element_ty
    tl.store(even_ptr, _to_out(e * c - o * s, out_ty), mask=pair_mask)
    tl.store(even_ptr + 1, _to_out(e * s + o * c, out_ty), mask=pair_mask)


def _launch_config(block_d: int, num_rows: int) -> tuple[int, int]:
    """(rows per program, num_warps): 1024 elements (2 KB of bf16) per program, 2 warps at D = 512.

    On the H200 at 1M x 512 bf16 (do_bench median, one run, 2026-12-01; torch copy_ of the same
    tensor 506 us): 2 rows/2 warps 554 us (91% of copy_), 4/4 601 us, 1/1 642, 1/2 646, 2/4 645,
    4/8 664, 8/8 628 (an earlier run had 4/4 at 555 us: runs differ by ~8%).
    """
    rows = max(1, min(32, 1024 // block_d))
    return rows, max(2, min(8, rows * block_d // 512))


def _norm_rope_torch(kv, weight, eps, cos, sin, positions, rope_dim) -> None:
    d = kv.shape[-1]
    heads = kv.shape[1] if kv.dim() == 3 else 1
    x = kv.reshape(-1, d).float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    if rope_dim:
        nope = d - rope_dim
        pos = positions.to(torch.int64).clamp(0, cos.shape[0] - 1)
        pos = pos[:, None].expand(-1, heads).reshape(-1)
        c, s = cos[pos], sin[pos]
        e, o = y[:, nope::2].clone(), y[:, nope + 1::2].clone()
        y[:, nope::2] = e * c - o * s
        y[:, nope + 1::2] = e * s + o * c
    kv.copy_(y.reshape(kv.shape).to(kv.dtype))


def fused_norm_rope_(kv, weight, eps, cos, sin, positions, *, rope_dim):
    """RMSNorm + interleaved RoPE on the trailing ``rope_dim`` columns, in place; returns kv."""
    check_tensor("kv", kv, dtype=KV_DTYPES, ndim=(2, 3))
    num_tokens, d = kv.shape[0], kv.shape[-1]
    check_tensor("weight", weight, dtype=KV_DTYPES, shape=(d,))
    eps = _checks.float_scalar("eps", eps, minimum=0.0)
    _checks.int_scalar("rope_dim", rope_dim, minimum=0)
    if rope_dim % 2 or rope_dim > d:
        raise ValueError(f"rope_dim must be even and <= head width {d}, got {rope_dim}")
    check_tensor("cos", cos, dtype=torch.float32, ndim=2)
    check_tensor("sin", sin, dtype=torch.float32, shape=tuple(cos.shape))
    if cos.shape[1] != rope_dim // 2 or (rope_dim and cos.shape[0] == 0):
        raise ValueError(f"cos must have shape [max_pos >= 1, rope_dim // 2 = {rope_dim // 2}], got {list(cos.shape)}")
    _checks.index_vector("positions", positions, num_tokens)
    _checks.same_device(kv=kv, weight=weight, cos=cos, sin=sin, positions=positions)
    if check_mode_enabled() and positions.numel() and rope_dim:
        if bool(((positions < 0) | (positions >= cos.shape[0])).any()):
            raise ValueError(f"positions must lie in [0, {cos.shape[0]}) (the cos/sin table length)")
    if kv.numel() == 0:
        return kv
    if launch_mode(kv, weight, cos, sin, positions) == "torch":
        _norm_rope_torch(kv, weight, eps, cos, sin, positions, rope_dim)
        return kv
    heads = kv.shape[1] if kv.dim() == 3 else 1
    num_rows = num_tokens * heads
    block_d = next_pow2(d)
    args = (kv, weight, cos, sin, positions, num_rows, heads, max(cos.shape[0], 1), eps)
    if rope_dim and (d - rope_dim) % 2:
        rows = max(1, min(16, 2048 // block_d))
        kernel = _norm_rope_strided_kernel
        meta = dict(D=d, ROPE=rope_dim, ROWS=rows, BLOCK_D=block_d, BLOCK_HALF=next_pow2(max(rope_dim // 2, 1)),
                    num_warps=4 if block_d <= 256 else 8)
    else:
        rows, warps = _launch_config(block_d, num_rows)
        kernel = _norm_rope_kernel
        meta = dict(D=d, ROPE=rope_dim, ROWS=rows, BLOCK_D=block_d, num_warps=warps)
    key = (kv.device.index, kernel is _norm_rope_kernel, *meta.values(), *specialization_key(*args))
    _COMPILED.launch(key, _COMPILED.stream(kv.device.index), kernel, (cdiv(num_rows, rows),), args, meta)
    return kv
