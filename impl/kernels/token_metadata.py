"""Per-token verify / prefill metadata in one Triton launch (docs/design.md §4); torch fallback.

``build_token_metadata`` turns per-request lengths into every per-token field the
metadata builders return (positions, causal lengths, slots, final positions,
batch index, padding mask) plus the per-request ones (int32 lens, exclusive
start offsets, seq_lens, and on the graph path the lens padded to the tier).
The row count is a host int (``num_tokens``): the op never reads a device value
back, so it is graph safe. Rows at or past ``sum(extend_lens)`` are padding
(position 0, causal length 1, the last request's slot, ``final_pos = window``).

How the kernel finds a token's request without ``repeat_interleave``: token t
belongs to the first request whose inclusive cumsum exceeds t, so its batch
index is the number of inclusive cumsums <= t and its offset inside the request
is t minus the lens summed over those requests. Every program recomputes the
cumsum over the batch in BLOCK_B chunks (a batch is a few hundred requests at
most per step; the work is tiny next to one launch) and program 0 also writes
the per-request fields. Outputs are views of one allocation, or a MetadataWorkspace's buffers
(impl/kernels/metadata_workspace.py: reused per layout, no allocation on the host path).
Never imports reference/, ci/ or registered/.
"""
from __future__ import annotations

import torch

from impl.kernels._backend import INTERPRETED, bound_launcher, direct_launch_ready, launch_mode, next_pow2, tl, triton
from impl.kernels.metadata_workspace import MetadataWorkspace, allocate_outputs
from impl.validation import INDEX_DTYPES, check_mode_enabled, check_positive_int, check_tensor

BLOCK_T = 32  # tokens per program
MAX_BLOCK_B = 256  # requests per chunk of the batch loop: one chunk up to 256 requests ([BLOCK_T, BLOCK_B] compare)
INT32_LIMIT = 2**31 - 1  # the count math is int32 while bs * (num_tokens + 1) stays below this (else torch)

# Nothing is specialized on values or alignment (the work is a few loads and stores per token): one
# compiled kernel per input dtype set and constexprs, and the outputs need no alignment padding.
_ARGS = ["prefix_ptr", "ext_ptr", "rpi_ptr", "pos_ptr", "final_ptr", "batch_ptr", "causal_ptr", "req_ptr", "pad_ptr",
         "ext_out_ptr", "start_ptr", "seq_ptr", "padded_ptr", "bs", "num_tokens", "padded_bs", "window", "rows"]


@triton.jit
def _lens(ext_ptr, b, rows, bs, UNIFORM: tl.constexpr):
    # (raw, clamped) int64 lens of requests b (0 past the batch); a negative length counts as 0
    if UNIFORM:
        raw = tl.where(b < bs, rows, 0).to(tl.int64)
    else:
        raw = tl.load(ext_ptr + b, mask=b < bs, other=0).to(tl.int64)
    return raw, tl.maximum(raw, 0)


@triton.jit(do_not_specialize=_ARGS)
def _token_metadata_kernel(
    prefix_ptr, ext_ptr, rpi_ptr,  # [bs] inputs (ext unused when UNIFORM: every request has `rows`)
    pos_ptr, final_ptr, batch_ptr,  # [num_tokens] int64 outputs
    causal_ptr, req_ptr,  # [num_tokens] int32 outputs
    pad_ptr,  # [num_tokens] bool output
    ext_out_ptr, start_ptr, seq_ptr,  # [bs] int32, int32, int64 outputs
    padded_ptr,  # [padded_bs] int32 output (PADDED only)
    bs, num_tokens, padded_bs, window, rows,
    UNIFORM: tl.constexpr, PADDED: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_B: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid == 0:  # the per-request fields, once
        _request_fields(prefix_ptr, ext_ptr, ext_out_ptr, start_ptr, seq_ptr, padded_ptr, bs, num_tokens,
                        padded_bs, rows, UNIFORM, PADDED, BLOCK_B)
    t = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    count = tl.zeros([BLOCK_T], tl.int32)  # requests wholly before token t
    start = tl.zeros([BLOCK_T], tl.int32)  # tokens of those requests
    carry = tl.zeros([], tl.int32)  # lens summed over the chunks done
    for b0 in range(0, bs, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        _, ext = _lens(ext_ptr, b, rows, bs, UNIFORM)
        # A length capped at num_tokens changes no token < num_tokens (its request still covers
        # every later one), and keeps the int32 sums exact (the host checks bs * (num_tokens + 1)).
        ext = tl.minimum(ext, num_tokens).to(tl.int32)
        incl = tl.cumsum(ext, 0) + carry
        done = (incl[None, :] <= t[:, None]) & (b < bs)[None, :]
        count += tl.sum(done.to(tl.int32), 1)
        start += tl.sum(tl.where(done, ext[None, :], 0), 1)
        carry += tl.sum(ext, 0)

    # per token: its request r (padding rows: the last request) and its offset inside r
    is_pad = t >= carry
    r = tl.minimum(count, bs - 1)
    live = t < num_tokens
    prefix_r = tl.maximum(tl.load(prefix_ptr + r, mask=live, other=0).to(tl.int64), 0)
    _, ext_r = _lens(ext_ptr, r, rows, bs, UNIFORM)
    pos = tl.where(is_pad, 0, prefix_r + (t - start))
    tl.store(pos_ptr + t, pos, mask=live)
    tl.store(causal_ptr + t, (pos + 1).to(tl.int32), mask=live)
    tl.store(req_ptr + t, tl.load(rpi_ptr + r, mask=live, other=0).to(tl.int32), mask=live)
    tl.store(final_ptr + t, tl.where(is_pad, window, prefix_r + ext_r - 1), mask=live)
    tl.store(batch_ptr + t, r.to(tl.int64), mask=live)
    tl.store(pad_ptr + t, is_pad, mask=live)


@triton.jit
def _request_fields(prefix_ptr, ext_ptr, ext_out_ptr, start_ptr, seq_ptr, padded_ptr, bs, num_tokens, padded_bs,
                    rows, UNIFORM: tl.constexpr, PADDED: tl.constexpr, BLOCK_B: tl.constexpr):
    # int32 lens as given, exclusive start offsets, seq_lens = prefix + len (int64 sums: exact for any lens)
    carry = tl.zeros([], tl.int64)
    for b0 in range(0, bs, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        raw, ext = _lens(ext_ptr, b, rows, bs, UNIFORM)
        prefix = tl.maximum(tl.load(prefix_ptr + b, mask=b < bs, other=0).to(tl.int64), 0)
        incl = tl.cumsum(ext, 0) + carry
        tl.store(ext_out_ptr + b, raw.to(tl.int32), mask=b < bs)
        tl.store(start_ptr + b, (incl - ext).to(tl.int32), mask=b < bs)
        tl.store(seq_ptr + b, prefix + ext, mask=b < bs)
        carry += tl.sum(ext, 0)
    if PADDED:
        _padded_lens(ext_ptr, padded_ptr, bs, padded_bs, num_tokens - carry, rows, UNIFORM, BLOCK_B)


@triton.jit
def _padded_lens(ext_ptr, padded_ptr, bs, padded_bs, leftover, rows, UNIFORM: tl.constexpr,
                 BLOCK_B: tl.constexpr):
    # docs/design.md §3.7: the real lens, then pad rows sharing the leftover (the first
    # leftover % n_pad get one more); without pad rows the last real row absorbs it.
    # A tier below the sum leaves the padding at 0 (never negative).
    leftover = tl.maximum(leftover, 0)
    n_pad = padded_bs - bs
    for b0 in range(0, padded_bs, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        _, ext = _lens(ext_ptr, b, rows, bs, UNIFORM)
        i = tl.maximum(b - bs, 0)  # index among the pad rows
        share = leftover // tl.maximum(n_pad, 1) + (i < leftover % tl.maximum(n_pad, 1)).to(tl.int64)
        value = tl.where(b < bs, ext, share)
        value += tl.where((n_pad == 0) & (b == bs - 1), leftover, 0)
        tl.store(padded_ptr + b, value.to(tl.int32), mask=b < padded_bs)


@triton.jit(do_not_specialize=["ext_ptr", "total_ptr", "bs"])
def _total_kernel(ext_ptr, total_ptr, bs, BLOCK_B: tl.constexpr):
    # sum(max(lens, 0)) in int64: the eager ragged total, one launch (then read back: the sync kept)
    acc = tl.zeros([BLOCK_B], tl.int64)
    for b0 in range(0, bs, BLOCK_B):
        b = b0 + tl.arange(0, BLOCK_B)
        acc += tl.maximum(tl.load(ext_ptr + b, mask=b < bs, other=0).to(tl.int64), 0)
    tl.store(total_ptr, tl.sum(acc, 0))


def _torch_metadata(prefix, ext_raw, rpi, window, num_tokens, padded_bs, outs) -> None:
    """The same fields with torch ops (no sync: ``searchsorted`` plays the kernel's count)."""
    pos, causal, req, final, batch, pad, ext_out, start, seq, padded = outs
    bs = prefix.shape[0]
    ext = ext_raw.to(torch.int64).clamp_min(0)
    pre = prefix.to(torch.int64).clamp_min(0)
    incl = torch.cumsum(ext, 0)
    t = torch.arange(num_tokens, device=prefix.device, dtype=torch.int64)
    r = torch.searchsorted(incl, t, right=True).clamp_max(bs - 1)
    is_pad = t >= incl[-1]
    p = torch.where(is_pad, 0, pre[r] + t - (incl - ext)[r])
    pos.copy_(p)
    causal.copy_(p + 1)
    req.copy_(rpi[r])
    final.copy_(torch.where(is_pad, window, pre[r] + ext[r] - 1))
    batch.copy_(r)
    pad.copy_(is_pad)
    ext_out.copy_(ext_raw)
    start.copy_(incl - ext)
    seq.copy_(pre + ext)
    if padded is not None:
        leftover = (num_tokens - incl[-1]).clamp_min(0)
        n_pad = padded_bs - bs
        padded[:bs] = ext.to(torch.int32)
        if n_pad:
            extra = (torch.arange(n_pad, device=padded.device) < leftover % n_pad).to(torch.int64)
            padded[bs:] = (leftover // n_pad + extra).to(torch.int32)
        else:
            padded[bs - 1] += leftover.to(torch.int32)


def build_token_metadata(prefix_lens, extend_lens, req_pool_indices, *, window, num_tokens, padded_bs=None):
    """Per-token metadata of ``num_tokens`` rows from per-request lengths (graph safe, no sync).

    prefix_lens, req_pool_indices: ``[bs]`` int32/int64. extend_lens: ``[bs]`` int32/int64, or
    an int (every request extends that many rows: the uniform verify layout, no lens tensor).
    num_tokens: rows laid out, >= sum(extend_lens) (check mode verifies); rows past the sum are
    padding. padded_bs: with it, also the graph layout's lens padded over ``padded_bs`` rows to sum
    to ``num_tokens`` (docs/design.md §3.7). Out of contract (check mode raises): negative lengths
    count as 0; ``num_tokens`` below the sum keeps the first ``num_tokens`` rows.

    Returns (positions int64, seq_lens_causal int32, req_indices int32, final_pos int64,
    token_batch_index int64, is_padding bool) ``[num_tokens]``, then (extend_lens int32,
    extend_start_loc int32, seq_lens int64) ``[bs]``, then padded_lens int32 ``[padded_bs]``
    when ``padded_bs`` is given. (The builders may pass a :class:`MetadataWorkspace` to
    :func:`token_metadata_checked` to hold the outputs; this op, the oracle's pair, allocates.)
    """
    check_tensor("prefix_lens", prefix_lens, dtype=INDEX_DTYPES, ndim=1)
    bs = prefix_lens.shape[0]
    check_tensor("req_pool_indices", req_pool_indices, dtype=INDEX_DTYPES, shape=(bs,))
    uniform = isinstance(extend_lens, int) and not isinstance(extend_lens, bool)
    if uniform:
        check_positive_int("extend_lens", extend_lens, minimum=0)
    else:
        check_tensor("extend_lens", extend_lens, dtype=INDEX_DTYPES, shape=(bs,))
        if extend_lens.device != prefix_lens.device:
            raise ValueError(f"tensors must share one device: extend_lens on {extend_lens.device}, "
                             f"prefix_lens on {prefix_lens.device}")
    if req_pool_indices.device != prefix_lens.device:
        raise ValueError(f"tensors must share one device: req_pool_indices on {req_pool_indices.device}, "
                         f"prefix_lens on {prefix_lens.device}")
    check_positive_int("window", window)
    check_positive_int("num_tokens", num_tokens, minimum=0)
    if padded_bs is not None:
        check_positive_int("padded_bs", padded_bs, minimum=bs)
    if bs == 0:
        raise ValueError("prefix_lens must hold at least one request (padding rows take the last one's slot)")
    if check_mode_enabled():
        _check_values(prefix_lens, extend_lens, num_tokens, bs)
    return token_metadata_checked(prefix_lens, extend_lens, req_pool_indices, window, num_tokens, padded_bs)


def token_metadata_checked(prefix_lens, extend_lens, req_pool_indices, window: int, num_tokens: int,
                           padded_bs: int | None, gates=None, workspace: MetadataWorkspace | None = None) -> tuple:
    """:func:`build_token_metadata` for a caller that has made its argument checks (the metadata
    builders): the same outputs, without checking twice on the host path; with ``workspace`` they
    are its buffers for this layout (impl/kernels/metadata_workspace.py: overwritten by its next
    call with the same layout)."""
    bs = prefix_lens.shape[0]
    uniform = isinstance(extend_lens, int)
    outs = (allocate_outputs(num_tokens, bs, padded_bs, prefix_lens.device) if workspace is None
            else workspace.outputs(num_tokens, bs, padded_bs, prefix_lens.device))
    if launch_mode(prefix_lens, req_pool_indices, gates=gates) == "torch" or bs * (num_tokens + 1) > INT32_LIMIT:
        ext = (torch.full((bs,), extend_lens, dtype=torch.int32, device=prefix_lens.device) if uniform
               else extend_lens)
        _torch_metadata(prefix_lens, ext, req_pool_indices, window, num_tokens, padded_bs, outs)
    else:
        _launch(prefix_lens, extend_lens, req_pool_indices, window, num_tokens, padded_bs, outs, uniform, bs)
    return outs if padded_bs is not None else outs[:-1]


def real_total(extend_lens: torch.Tensor) -> int:
    """``int(sum(max(extend_lens, 0)))`` in one launch, then read back (a sync: the eager ragged
    path's total, which the policy keeps)."""
    bs = extend_lens.shape[0]
    if launch_mode(extend_lens) == "torch" or not bs:
        return int(extend_lens.clamp_min(0).sum().item())
    total = torch.empty(1, dtype=torch.int64, device=extend_lens.device)
    block = min(next_pow2(bs), 1024)
    _run(_total_kernel, ("total", extend_lens.get_device(), extend_lens.dtype, block), (1,), (extend_lens, total),
         (bs,), {"BLOCK_B": block})
    return int(total.item())


def _check_values(prefix_lens, extend_lens, num_tokens: int, bs: int) -> None:
    """Check mode (reads device values): non-negative lengths and a row count that holds them."""
    if bool((prefix_lens < 0).any()):
        raise ValueError(f"prefix_lens must be non-negative, got {prefix_lens.tolist()}")
    if isinstance(extend_lens, int):
        total = extend_lens * bs  # a negative int was refused with the argument checks
    else:
        if bool((extend_lens < 0).any()):
            raise ValueError(f"extend_lens must be non-negative, got {extend_lens.tolist()}")
        total = int(extend_lens.to(torch.int64).sum())
    if total > num_tokens:
        raise ValueError(f"num_tokens={num_tokens} is smaller than sum(extend_lens)={total}")


# Launches after the first of a specialization skip ``kernel[grid](...)`` (argument binding and
# specialization lookup cost tens of microseconds a launch): the compiled kernel's C launcher is bound
# once per (specialization, grid, stream) and called with raw pointers (impl/kernels/_backend.py).
_COMPILED: dict[tuple, object] = {}  # specialization key -> compiled kernel
_BOUND: dict[tuple, tuple] = {}  # (key, grid, stream) -> (launcher, packed)
BOUND_ENTRIES = 256  # a bound on _BOUND (grids differ per token count): cleared when full
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda dev: torch.cuda.current_stream(dev).cuda_stream)


def _launch(prefix, ext, rpi, window, num_tokens, padded_bs, outs, uniform: bool, bs: int) -> None:
    pos, causal, req, final, batch, pad, ext_out, start, seq, padded = outs
    block_b = min(next_pow2(bs), MAX_BLOCK_B)
    ext_arg = ext_out if uniform else ext  # a placeholder pointer when UNIFORM (never read)
    meta = {"UNIFORM": uniform, "PADDED": padded is not None, "BLOCK_T": BLOCK_T, "BLOCK_B": block_b}
    key = ("metadata", prefix.get_device(), prefix.dtype, rpi.dtype, ext_arg.dtype, *meta.values())
    tensors = (prefix, ext_arg, rpi, pos, final, batch, causal, req, pad, ext_out, start, seq,
               ext_out if padded is None else padded)
    _run(_token_metadata_kernel, key, (max(1, -(-num_tokens // BLOCK_T)),), tensors,
         (bs, num_tokens, padded_bs or 0, window, ext if uniform else 0), meta)


def _run(kernel, key: tuple, grid: tuple, tensors: tuple, ints: tuple, meta: dict) -> None:
    """Launch ``kernel`` (its parameters: ``tensors``, ``ints``, then the constexprs ``meta``): through
    the bound C launcher once this specialization has compiled, else ``kernel[grid](...)``."""
    device = tensors[0]
    if device.is_cuda and direct_launch_ready():
        stream = _RAW_STREAM(device.get_device())
        bound = _BOUND.get((key, grid, stream))
        if bound is None and key in _COMPILED:
            if len(_BOUND) >= BOUND_ENTRIES:
                _BOUND.clear()
            bound = _BOUND[(key, grid, stream)] = bound_launcher(_COMPILED[key], grid, stream)
        if bound is not None:
            launch, packed = bound
            args = (*(t.data_ptr() for t in tensors), *ints, *meta.values())
            launch(args) if packed else launch(*args)
            return
    compiled = kernel[grid](*tensors, *ints, **meta)
    if device.is_cuda and compiled is not None and not INTERPRETED:
        _COMPILED[key] = compiled
