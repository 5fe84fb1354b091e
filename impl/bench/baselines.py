"""Baselines the project's kernels are measured against, in the same process.

- ``copy_ceiling``: a device-to-device copy moving the same bytes (read + write).
- ``scatter_one_row_per_program``: the field's design -- one Triton program per
  row, 8 warps -- written here from its description.
- ``scatter_index_copy``: graph-safe torch: skipped rows go to a trash row.
- ``norm_rope_torch``: vectorised eager torch RMSNorm + interleaved RoPE (and
  its ``torch.compile``).
- ``norm_rope_fp32_simple``: the straightforward fp32 formula (strided writes, no cat), for
  ``torch.compile``.
- ``renorm_sort_top_k`` / ``renorm_sort_top_p``: sort-based renormalisation.
- ``flashinfer_sampling``: FlashInfer's sampling module when importable (the renorm peer).
"""
from __future__ import annotations

import torch

import impl.kernels  # noqa: F401  -- fixes interpreter mode before triton is first imported
import triton
import triton.language as tl


@triton.jit
def _one_row_per_program_kernel(kv_ptr, loc_ptr, out_ptr, D: tl.constexpr, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    loc = tl.load(loc_ptr + row).to(tl.int64)
    if loc >= 0:
        cols = tl.arange(0, BLOCK_D)
        mask = cols < D
        vals = tl.load(kv_ptr + row.to(tl.int64) * D + cols, mask=mask)
        tl.store(out_ptr + loc * D + cols, vals, mask=mask)


def scatter_one_row_per_program(kv: torch.Tensor, loc: torch.Tensor, unified: torch.Tensor) -> None:
    T, D = kv.shape
    if T:
        _one_row_per_program_kernel[(T,)](kv, loc, unified, D=D, BLOCK_D=triton.next_power_of_2(D), num_warps=8)


def scatter_index_copy(kv: torch.Tensor, loc: torch.Tensor, unified_with_trash: torch.Tensor) -> None:
    """``unified_with_trash`` has one extra last row that absorbs skipped (loc < 0) rows."""
    trash = unified_with_trash.shape[0] - 1
    idx = torch.where(loc < 0, torch.full_like(loc, trash), loc).to(torch.int64)
    unified_with_trash.index_copy_(0, idx, kv)


def norm_rope_torch(kv, weight, eps, cos, sin, positions, rope_dim: int):
    x = kv.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    rope = x[..., -rope_dim:].unflatten(-1, (rope_dim // 2, 2))
    c, s = cos[positions].unsqueeze(-1), sin[positions].unsqueeze(-1)
    even, odd = rope[..., 0:1], rope[..., 1:2]
    rotated = torch.cat([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)
    kv.copy_(torch.cat([x[..., :-rope_dim], rotated], dim=-1).to(kv.dtype))
    return kv


def norm_rope_fp32_simple(kv, weight, eps, cos, sin, positions, rope_dim: int):
    x = kv.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    out = y.clone()
    even, odd = y[:, -rope_dim::2], y[:, -rope_dim + 1::2]
    c, s = cos[positions], sin[positions]
    out[:, -rope_dim::2] = even * c - odd * s
    out[:, -rope_dim + 1::2] = even * s + odd * c
    kv.copy_(out)
    return kv


def flashinfer_sampling(aot_dir: str | None = None):
    """``flashinfer.sampling`` with its module loaded, or None (printing why) when it cannot be used.
    ``aot_dir``: where prebuilt modules live (FlashInfer JIT-builds with nvcc otherwise)."""
    try:
        import flashinfer.sampling as fs

        if aot_dir:
            from pathlib import Path

            from flashinfer.jit import env as jit_env

            jit_env.FLASHINFER_AOT_DIR = Path(aot_dir)
        fs.get_sampling_module()
        return fs
    except Exception as exc:  # noqa: BLE001  (absent, or present but unloadable: the row is skipped)
        print(f"[bench] flashinfer unavailable ({type(exc).__name__}: {str(exc)[:120]})", flush=True)
        return None


def renorm_sort_top_k(probs: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    sorted_p, _ = probs.sort(dim=-1, descending=True)
    kk = k.clamp(1, probs.shape[-1]).to(torch.int64).unsqueeze(-1)
    pivot = sorted_p.gather(-1, kk - 1)
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs))
    total = kept.sum(-1, keepdim=True)
    return torch.where(total > 0, kept / total.clamp_min(1e-30), torch.zeros_like(kept))


def renorm_sort_top_p(probs: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    sorted_p, _ = probs.sort(dim=-1, descending=False)  # ascending: smallest first
    cum = sorted_p.cumsum(-1)
    drop = cum < (1 - p.clamp(0, 1)).unsqueeze(-1)
    # pivot: smallest kept value (first entry whose cumulative mass reaches 1 - p)
    first_kept = drop.sum(-1, keepdim=True).clamp_max(probs.shape[-1] - 1)
    pivot = sorted_p.gather(-1, first_kept)
    kept = torch.where(probs >= pivot, probs, torch.zeros_like(probs))
    total = kept.sum(-1, keepdim=True)
    return torch.where(total > 0, kept / total.clamp_min(1e-30), torch.zeros_like(kept))
