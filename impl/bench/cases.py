"""The benchmark sweep: for each op and size, the project's kernel and its baselines.

Each case builds its inputs once (random data, random unique locs over a pool at
least 4x the rows, 10% of rows skipped) and returns the callables to time and the
bytes each call really moves, so bandwidth is computed from data actually read
and written, not from tensor sizes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

import impl
from impl.bench import baselines

SKIP_FRACTION = 0.10


@dataclass
class Case:
    op: str
    shape: str
    rows: int
    bytes_moved: int
    variants: dict[str, Callable[[], object]] = field(default_factory=dict)
    project: str = "project"


def _copy_variant(nbytes: int, device: str) -> Callable[[], object]:
    # read + write counted: a copy of n/2 bytes moves n bytes
    src = torch.empty(max(nbytes // 2, 1), dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def _unique_locs(rows: int, pool_rows: int, device: str, gen: torch.Generator) -> torch.Tensor:
    loc = torch.randperm(pool_rows, generator=gen, device="cpu")[:rows]
    skip = torch.rand(rows, generator=gen) < SKIP_FRACTION
    loc = torch.where(skip, torch.full_like(loc, -1), loc)
    return loc.to(device=device, dtype=torch.int32)


def scatter_case(rows: int, dim: int, device: str, gen: torch.Generator, with_compile: bool) -> Case:
    pool = 4 * rows
    kv = torch.randn(rows, dim, generator=gen).to(device=device, dtype=torch.bfloat16)
    loc = _unique_locs(rows, pool, device, gen)
    unified = torch.empty(pool + 1, dim, dtype=torch.bfloat16, device=device)  # +1: trash row for index_copy_
    kept = int((loc >= 0).sum())
    nbytes = kept * dim * 2 * 2 + rows * 4
    target = unified[:pool]
    return Case(
        "scatter_into_unified", f"{rows}x{dim} bf16", rows, nbytes,
        {
            "copy": _copy_variant(nbytes, device),
            "project": lambda: impl.scatter_into_unified(kv, loc, target),
            "one-row-per-program": lambda: baselines.scatter_one_row_per_program(kv, loc, target),
            "torch index_copy_": lambda: baselines.scatter_index_copy(kv, loc, unified),
        },
    )


def store_swa_case(rows: int, dim: int, device: str, gen: torch.Generator, with_compile: bool) -> Case:
    window, gamma = 128, 5
    ring = window + gamma
    slots = max(4 * rows // ring, 1)
    kv = torch.randn(rows, dim, generator=gen).to(device=device, dtype=torch.bfloat16)
    # rows*ring/4 distinct (slot, pos) pairs so addresses are unique; 10% trimmed by final_pos
    flat = torch.randperm(slots * ring, generator=gen)[:rows]
    state_slot = (flat // ring).to(device=device, dtype=torch.int64)
    positions = (flat % ring + ring).to(device=device, dtype=torch.int64)
    trimmed = torch.rand(rows, generator=gen) < SKIP_FRACTION
    final_pos = torch.where(trimmed, positions.cpu() + window, positions.cpu()).to(device)
    unified = torch.empty(slots * ring + 1, dim, dtype=torch.bfloat16, device=device)  # +1: index_copy_ trash row
    kept = rows - int(trimmed.sum())
    nbytes = kept * dim * 2 * 2 + rows * 3 * 8
    loc = torch.where(trimmed.to(device), torch.full_like(state_slot, -1),
                      state_slot * ring + positions % ring).to(torch.int32)
    return Case(
        "store_swa_into_unified", f"{rows}x{dim} bf16", rows, nbytes,
        {
            "copy": _copy_variant(nbytes, device),
            "project": lambda: impl.store_swa_into_unified(
                kv, state_slot, positions, unified[:-1], window=window, ring=ring, final_pos=final_pos),
            "one-row-per-program (precomputed loc)": lambda: baselines.scatter_one_row_per_program(
                kv, loc, unified[:-1]),
            "torch index_copy_ (precomputed loc)": lambda: baselines.scatter_index_copy(kv, loc, unified),
        },
    )


def norm_rope_case(rows: int, dim: int, device: str, gen: torch.Generator, with_compile: bool) -> Case:
    """Two ceilings (see bench-results/README.md): "copy" moves the bytes counted for the op (kv read
    + write, the 8-byte position and the rope_dim fp32 cos/sin values each row gathers: 2312 B a row
    at dim 512), "copy_ same-size kv" is ``torch.Tensor.copy_`` of a kv-shaped bf16 tensor (2048 B a
    row: the HBM floor, since the 1 MiB cos/sin table stays in L2). Two compiled baselines, both
    ``torch.compile(dynamic=False)``, default mode: the bench formula (fp32, cat, copy_ into kv) and a
    straightforward fp32 formula (strided even/odd writes into a clone)."""
    rope_dim, max_pos = 64, 4096
    kv = torch.randn(rows, dim, generator=gen).to(device=device, dtype=torch.bfloat16)
    weight = (1 + 0.1 * torch.randn(dim, generator=gen)).to(device)
    inv = 1.0 / (10000 ** (torch.arange(0, rope_dim // 2, dtype=torch.float64) / (rope_dim // 2)))
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = ang.cos().float().to(device), ang.sin().float().to(device)
    positions = torch.randint(0, max_pos, (rows,), generator=gen).to(device)
    nbytes = rows * dim * 2 * 2 + rows * (8 + rope_dim * 4)
    same_size = torch.empty_like(kv)
    variants = {
        "copy": _copy_variant(nbytes, device),
        "copy_ same-size kv": lambda: same_size.copy_(kv),
        "project": lambda: impl.fused_norm_rope_(kv, weight, 1e-6, cos, sin, positions, rope_dim=rope_dim),
        "torch eager": lambda: baselines.norm_rope_torch(kv, weight, 1e-6, cos, sin, positions, rope_dim),
    }
    if with_compile and rows >= 262144:  # the compiled baselines matter where the op is bandwidth-bound
        compiled = torch.compile(baselines.norm_rope_torch, dynamic=False)
        variants["torch.compile"] = lambda: compiled(kv, weight, 1e-6, cos, sin, positions, rope_dim)
        simple = torch.compile(baselines.norm_rope_fp32_simple, dynamic=False)
        variants["torch.compile (straightforward fp32)"] = lambda: simple(
            kv, weight, 1e-6, cos, sin, positions, rope_dim)
    return Case("fused_norm_rope_", f"{rows}x{dim} bf16", rows, nbytes, variants)


def _renorm_inputs(batch: int, vocab: int, device: str, gen: torch.Generator):
    logits = torch.randn(batch, vocab, generator=gen) * 3
    probs = torch.softmax(logits, -1).to(device)
    k = torch.randint(1, 64, (batch,), generator=gen).to(device)
    p = (0.5 + 0.45 * torch.rand(batch, generator=gen)).to(device)
    return probs, k, p


_FLASHINFER: list = []  # [module or None], resolved once


def flashinfer_available(aot_dir: str | None = None) -> bool:
    """Whether FlashInfer's sampling module loads (not a project dependency): its renorm kernels
    are the contender rows. ``aot_dir``: a folder of prebuilt modules (``--flashinfer-aot``);
    the first call decides, later calls reuse the answer."""
    if not _FLASHINFER:
        _FLASHINFER.append(baselines.flashinfer_sampling(aot_dir))
    return _FLASHINFER[0] is not None


def _renorm_case(op: str, setting: str, probs: torch.Tensor, param: torch.Tensor, device: str) -> Case:
    """``op`` ("top_k" or "top_p") on ``probs`` with the per-row ``param``: the project's kernel, the
    sort-based baseline, a copy of the same bytes and (on CUDA, when it loads) FlashInfer's kernel."""
    batch, vocab = probs.shape
    nbytes = batch * vocab * 4 * 2
    project, sort_based = getattr(impl, f"{op}_renorm"), getattr(baselines, f"renorm_sort_{op}")
    variants = {
        "copy": _copy_variant(nbytes, device),
        "project": lambda: project(probs, param),
        "sort-based": lambda: sort_based(probs, param),
    }
    if device == "cuda" and flashinfer_available():
        flashinfer = getattr(_FLASHINFER[0], f"{op}_renorm_probs")
        variants["flashinfer"] = lambda: flashinfer(probs, param)
    return Case(f"{op}_renorm", f"{batch}x{vocab} fp32 {setting}", batch, nbytes, variants)


def top_k_case(batch: int, vocab: int, device: str, gen: torch.Generator, with_compile: bool, k: int = 50) -> Case:
    probs, _, _ = _renorm_inputs(batch, vocab, device, gen)
    return _renorm_case("top_k", f"k={k}", probs, torch.full((batch,), k, dtype=torch.int32, device=device), device)


def top_p_case(batch: int, vocab: int, device: str, gen: torch.Generator, with_compile: bool, p: float = 0.9) -> Case:
    probs, _, _ = _renorm_inputs(batch, vocab, device, gen)
    return _renorm_case("top_p", f"p={p}", probs, torch.full((batch,), p, dtype=torch.float32, device=device), device)


GPU_SWEEP = {
    "scatter": (scatter_case, [(r, 512) for r in (256, 1024, 16384, 262144, 1048576)]),
    "store_swa": (store_swa_case, [(r, 512) for r in (256, 1024, 16384, 262144, 1048576)]),
    "norm_rope": (norm_rope_case, [(r, 512) for r in (256, 1024, 16384, 262144, 1048576)]),
    "top_k": (top_k_case, [(1, 129280), (64, 129280), (256, 129280)]),
    "top_p": (top_p_case, [(1, 129280), (64, 129280), (256, 129280)]),
}

CPU_SMOKE_SWEEP = {
    "scatter": (scatter_case, [(16, 64)]),
    "store_swa": (store_swa_case, [(16, 64)]),
    "norm_rope": (norm_rope_case, [(16, 128)]),
    "top_k": (top_k_case, [(2, 256)]),
    "top_p": (top_p_case, [(2, 256)]),
}
