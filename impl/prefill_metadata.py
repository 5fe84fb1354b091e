"""Per-token prefill metadata, expanded with ``repeat_interleave`` under the sync policy (docs/design.md §4).

Given per-request ``prefix_lens``, ``extend_lens`` and ``req_pool_indices``, the
builder lays the tokens out request after request (``extend_start_loc`` =
exclusive cumsum of ``extend_lens``) and gives token j of request r:

    position        = prefix_r + j
    seq_len_causal  = position + 1                 (invariant 9)
    req_index       = state_slot = req_pool_indices[r]
    final_pos       = prefix_r + extend_r - 1      (drives the window trim)

Rows past the real total on the graph path are padding: position 0,
seq_len_causal 1, the last request's slot, ``final_pos = window`` -- so the ring
store skips them (invariant 7). Zero-length requests own no rows.

The one ``repeat_interleave`` maps tokens to requests; whether it gets
``output_size`` is decided by :mod:`impl.sync_policy` and nothing else. In
check mode every ``output_size`` is compared with ``sum(repeats)`` before use
(invariant 12) and a mismatch raises a ValueError instead of writing out of
bounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from impl import sync_policy
from impl.gates import active_gates
from impl.kernels.metadata_workspace import MetadataWorkspace, check_workspace  # noqa: F401 (impl.MetadataWorkspace)
from impl.validation import INDEX_DTYPES, check_mode_enabled, check_same_device, check_tensor


@dataclass(frozen=True)
class TokenMetadata:
    """Per-token layout of one forward (prefill, extend or target verify)."""

    positions: torch.Tensor  # int64 [num_tokens]; padding rows 0
    seq_lens_causal: torch.Tensor  # int32 [num_tokens] = position + 1; padding rows 1
    req_indices: torch.Tensor  # int32 [num_tokens] request slot; padding rows: last request's slot
    final_pos: torch.Tensor  # int64 [num_tokens] request's last position; padding rows: window
    token_batch_index: torch.Tensor  # int64 [num_tokens] request index r in the batch (padding: bs-1)
    is_padding: torch.Tensor  # bool [num_tokens]
    extend_lens: torch.Tensor  # int32 [bs] real rows per request
    extend_start_loc: torch.Tensor  # int32 [bs] exclusive cumsum of extend_lens
    seq_lens: torch.Tensor  # int64 [bs] prefix + extend
    padded_lens: torch.Tensor | None  # int32 [padded_bs] graph layout lens summing to the tier, else None
    num_tokens: int  # rows laid out (the tier on the graph path)
    exact: bool  # num_tokens == sum(real extend_lens), known on the host
    used_output_size: bool  # repeat_interleave was given output_size (no sync)
    output_size: int | None  # the value passed, == sum(expanded_lens) (invariant 12)
    path: str  # "uniform" | "ragged-eager" | "ragged-graph"
    decision: str  # the sync policy decision applied
    platform: str
    algorithm: str
    tier: int | None = None  # graph token tier (graph path)

    @property
    def state_slot(self) -> torch.Tensor:
        """Per-token request slot for the ring address (same values as ``req_indices``)."""
        return self.req_indices

    @property
    def batch_size(self) -> int:
        return self.extend_lens.shape[0]


def resolve_platform_and_algorithm(platform: str | None, algorithm: str | None) -> tuple[str, str]:
    """Defaults: the current (possibly emulated) platform and the spec_algorithm gate in effect."""
    if platform is None:
        from impl.platform import current_platform

        platform = current_platform().backend
    if algorithm is None:
        algorithm = active_gates().spec_algorithm
    return platform, algorithm


def check_output_size(output_size: int, repeats: torch.Tensor) -> None:
    """Invariant 12 (check mode; syncs): ``output_size`` must equal ``sum(repeats)``."""
    if (repeats < 0).any():
        raise ValueError(f"repeats must be non-negative, got {repeats.tolist()}")
    total = int(repeats.sum())
    if total != output_size:
        raise ValueError(
            f"output_size={output_size} does not equal sum(repeats)={total}: passing it to "
            "repeat_interleave would write out of bounds on HIP (device assert on CUDA)"
        )


def _check_inputs(prefix_lens: torch.Tensor, extend_lens: torch.Tensor | int, req_pool_indices: torch.Tensor, *,
                  window: int, path: str, platform: str, algorithm: str, checks: bool) -> None:
    """Dtypes, shapes, device, ``window`` and the policy keys; in check mode also non-negative lengths.
    An int ``extend_lens`` (uniform path only) is every request's row count."""
    if isinstance(extend_lens, int) and not isinstance(extend_lens, bool):
        if path != "uniform" or extend_lens < 0:
            raise ValueError(f"extend_lens may be an int (rows per request, >= 0) only on the uniform path, "
                             f"got {extend_lens} on {path!r}")
        check_tensor("prefix_lens", prefix_lens, dtype=INDEX_DTYPES, ndim=1)
        bs = prefix_lens.shape[0]
    else:
        check_tensor("extend_lens", extend_lens, dtype=INDEX_DTYPES, ndim=1)
        bs = extend_lens.shape[0]
        check_tensor("prefix_lens", prefix_lens, dtype=INDEX_DTYPES, shape=[bs])
    check_tensor("req_pool_indices", req_pool_indices, dtype=INDEX_DTYPES, shape=[bs])
    ext_t = extend_lens if isinstance(extend_lens, torch.Tensor) else None
    dev = prefix_lens.get_device()  # device index ints (-1: CPU) are cheap; the message needs the devices
    if (req_pool_indices.get_device() != dev or req_pool_indices.is_cuda != prefix_lens.is_cuda
            or (ext_t is not None and (ext_t.get_device() != dev or ext_t.is_cuda != prefix_lens.is_cuda))):
        check_same_device(prefix_lens=prefix_lens, extend_lens=ext_t, req_pool_indices=req_pool_indices)
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive int, got {window!r}")
    sync_policy.lookup(platform, algorithm, path)  # validates the three keys
    if checks:
        if bs and bool((prefix_lens < 0).any()):
            raise ValueError(f"prefix_lens must be non-negative, got {prefix_lens.tolist()}")
        if bs and ext_t is not None and bool((ext_t < 0).any()):
            raise ValueError(f"extend_lens must be non-negative, got {ext_t.tolist()}")


def _total_tokens(path: str, num_tokens: int | None, extend_lens: torch.Tensor) -> tuple[int, bool]:
    """The number of rows to lay out for ``path``, and whether it is the exact real total."""
    if path == "uniform":
        if num_tokens is None:
            raise ValueError("the uniform path needs num_tokens (rows * bs, a host int)")
        exact = True
    elif path == "ragged-eager":
        if num_tokens is None:
            from impl.kernels.token_metadata import real_total

            num_tokens = real_total(extend_lens)  # the eager total (negatives count 0): one sync, counted
        exact = True
    else:
        if num_tokens is None:
            raise ValueError("the ragged-graph path needs num_tokens = the captured token tier")
        if extend_lens.shape[0] == 0:
            raise ValueError("the ragged-graph path needs at least one request (padding takes the last slot)")
        exact = False
    if not isinstance(num_tokens, int) or isinstance(num_tokens, bool) or num_tokens < 0:
        raise ValueError(f"num_tokens must be a non-negative int, got {num_tokens!r}")
    return num_tokens, exact


def _output_size(decision: str, ext: torch.Tensor, num_tokens: int,
                 padded_bs: int | None) -> tuple[int | None, torch.Tensor | None]:
    """The ``output_size`` the sync policy allows (None: keep the sync), and the graph layout's padded lens."""
    if decision == sync_policy.PADDED_TIER:
        from impl.kernels import pad_verify_lens_to_bucket

        if check_mode_enabled():
            real = int(ext.sum())
            if real > num_tokens:
                raise ValueError(f"verify/extend lens sum to {real}, above the graph token tier {num_tokens}")
        # the graph layout: lens padded over padded_bs rows to sum to the tier (invariant 8)
        bs = ext.shape[0]
        return num_tokens, pad_verify_lens_to_bucket(ext, num_tokens, bs if padded_bs is None else padded_bs)
    if decision == sync_policy.OUTPUT_SIZE:
        if check_mode_enabled():
            check_output_size(num_tokens, ext)
        return num_tokens, None
    return None, None  # keep the sync: repeat_interleave reads the total back


def _expand_to_requests(seq_lens: torch.Tensor, ext: torch.Tensor, num_tokens: int,
                        output_size: int | None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Per token: its causal length and its request index r; plus the rows laid out."""
    # One repeat_interleave (inside expand_prefill_causally) maps tokens to requests.
    # Expanding the batch indices 0..bs-1 instead of the slots gives r per token
    # (padding: the last request, as docs/design.md §3.6 says).
    from impl.kernels import expand_prefill_causally

    batch = torch.arange(ext.shape[0], device=ext.device, dtype=torch.int64)
    causal, r = expand_prefill_causally(seq_lens, ext, batch, num_tokens=output_size)
    if output_size is None:
        if check_mode_enabled() and causal.shape[0] != num_tokens:
            raise ValueError(f"num_tokens={num_tokens} does not match sum(extend_lens)={causal.shape[0]}")
        num_tokens = causal.shape[0]
    return causal, r, num_tokens


def _empty_metadata(ext: torch.Tensor, prefix: torch.Tensor, **common: Any) -> TokenMetadata:
    """The metadata of a batch without requests: no rows."""
    empty = torch.empty(0, dtype=torch.int64, device=ext.device)
    return TokenMetadata(
        positions=empty, seq_lens_causal=empty.to(torch.int32), req_indices=empty.to(torch.int32),
        final_pos=empty, token_batch_index=empty, is_padding=empty.to(torch.bool),
        extend_start_loc=ext.to(torch.int32), seq_lens=prefix, num_tokens=0, **common,
    )


def build_prefill_metadata(
    prefix_lens: torch.Tensor,
    extend_lens: torch.Tensor,
    req_pool_indices: torch.Tensor,
    *,
    window: int,
    path: str,
    num_tokens: int | None = None,
    padded_bs: int | None = None,
    platform: str | None = None,
    algorithm: str | None = None,
    workspace: Any = None,
) -> TokenMetadata:
    """Expand per-request lengths into per-token metadata.

    path "uniform": ``num_tokens`` (host int, = rows * bs) is required and exact; ``extend_lens``
        may be an int there (every request extends that many rows).
    path "ragged-eager": ``num_tokens`` defaults to ``int(extend_lens.sum())`` (one sync).
    path "ragged-graph": ``num_tokens`` is the captured tier (required); lens are
        padded to it with ``pad_verify_lens_to_bucket`` over ``padded_bs`` rows
        (default: bs) and rows past the real total are padding.
    workspace: an :class:`impl.kernels.metadata_workspace.MetadataWorkspace` whose buffers hold the
        per-token and per-request fields where the policy elides the sync (no allocation per call;
        the next call with it and the same layout overwrites them), or None for fresh tensors.
    """
    platform, algorithm = resolve_platform_and_algorithm(platform, algorithm)
    check_workspace(workspace)
    gates = active_gates()  # one lookup for the call: check mode and the kernel backend
    checks = gates.check_mode == "on"
    _check_inputs(prefix_lens, extend_lens, req_pool_indices, window=window, path=path,
                  platform=platform, algorithm=algorithm, checks=checks)
    return _expand_metadata(prefix_lens, extend_lens, req_pool_indices, window=window, path=path,
                            num_tokens=num_tokens, padded_bs=padded_bs, platform=platform, algorithm=algorithm,
                            gates=gates, workspace=workspace)


def _expand_metadata(prefix_lens: torch.Tensor, extend_lens: torch.Tensor | int, req_pool_indices: torch.Tensor, *,
                    window: int, path: str, num_tokens: int | None, padded_bs: int | None, platform: str,
                    algorithm: str, gates, workspace=None) -> TokenMetadata:
    """:func:`build_prefill_metadata` after its argument checks; ``extend_lens`` may be an int on the
    uniform path (every request extends that many rows: the verify layout, no lens tensor to build).

    Where the policy elides the expansion's sync (``pass output_size``, the padded tier) the whole
    layout is one launch of :func:`impl.kernels.build_token_metadata` sized by the host total; where
    it keeps the sync, ``repeat_interleave`` without ``output_size`` reads the total back as before.
    """
    uniform_rows = extend_lens if isinstance(extend_lens, int) else None
    bs = prefix_lens.shape[0]
    num_tokens, exact = _total_tokens(path, num_tokens, extend_lens)
    decision = sync_policy.decide(platform, algorithm, path, exact_num_tokens=exact)
    if decision != sync_policy.KEEP_SYNC and bs:
        return _one_launch(prefix_lens, extend_lens, req_pool_indices, window=window, path=path,
                           num_tokens=num_tokens, padded_bs=padded_bs, decision=decision, exact=exact,
                           platform=platform, algorithm=algorithm, gates=gates, workspace=workspace)
    if uniform_rows is not None:
        extend_lens = torch.full((bs,), uniform_rows, dtype=torch.int32, device=prefix_lens.device)
    # out of contract (check mode raised above): negative lengths count as 0
    ext = extend_lens.to(torch.int64).clamp_min(0)
    prefix = prefix_lens.to(torch.int64).clamp_min(0)
    output_size, padded_lens = _output_size(decision, ext, num_tokens, padded_bs)
    common: dict[str, Any] = dict(  # the fields that do not depend on the per-token layout
        extend_lens=extend_lens.to(torch.int32), padded_lens=padded_lens, exact=exact,
        used_output_size=output_size is not None, output_size=output_size, path=path,
        decision=decision, platform=platform, algorithm=algorithm,
    )
    if bs == 0:
        return _empty_metadata(ext, prefix, **common)
    seq_lens = prefix + ext
    causal, r, num_tokens = _expand_to_requests(seq_lens, ext, num_tokens, output_size)

    # ---- per-token fields: gathers only, no sync ----
    t = torch.arange(num_tokens, device=ext.device, dtype=torch.int64)
    is_pad = t >= ext.sum()
    positions = torch.where(is_pad, 0, causal - 1)
    return TokenMetadata(
        positions=positions,
        seq_lens_causal=(positions + 1).to(torch.int32),
        req_indices=req_pool_indices.to(torch.int32)[r],
        final_pos=torch.where(is_pad, window, seq_lens[r] - 1),
        token_batch_index=r,
        is_padding=is_pad,
        extend_start_loc=(torch.cumsum(ext, 0) - ext).to(torch.int32),
        seq_lens=seq_lens,
        num_tokens=num_tokens,
        tier=None if exact else num_tokens,
        **common,
    )


def _one_launch(prefix_lens, extend_lens, req_pool_indices, *, window, path, num_tokens, padded_bs, decision,
                exact, platform, algorithm, gates, workspace) -> TokenMetadata:
    """The layout where the policy elides the sync: one kernel sized by the host total (no sync)."""
    from impl.kernels.token_metadata import token_metadata_checked

    graph = decision == sync_policy.PADDED_TIER
    if gates.check_mode == "on":  # invariant 12 before use (reads the device: check mode only)
        bs = prefix_lens.shape[0]
        ext = (torch.full((bs,), extend_lens, dtype=torch.int64, device=prefix_lens.device)
               if isinstance(extend_lens, int) else extend_lens.to(torch.int64).clamp_min(0))
        if graph:
            real = int(ext.sum())
            if real > num_tokens:
                raise ValueError(f"verify/extend lens sum to {real}, above the graph token tier {num_tokens}")
        else:
            check_output_size(num_tokens, ext)
    # the arguments were checked by the builder (_check_inputs, _total_tokens)
    fields = token_metadata_checked(prefix_lens, extend_lens, req_pool_indices, window, num_tokens,
                                    (padded_bs or prefix_lens.shape[0]) if graph else None, gates=gates,
                                    workspace=workspace)
    # TokenMetadata's own __init__ sets its 19 frozen fields one object.__setattr__ at a time
    # (a few us of a call's host time); the instance is the same built this way.
    meta = object.__new__(TokenMetadata)
    meta.__dict__.update(zip(_FIELDS, fields[:9]), padded_lens=fields[9] if graph else None, num_tokens=num_tokens,
                         exact=exact, used_output_size=True, output_size=num_tokens, path=path, decision=decision,
                         platform=platform, algorithm=algorithm, tier=None if exact else num_tokens)
    return meta


_FIELDS = ("positions", "seq_lens_causal", "req_indices", "final_pos", "token_batch_index", "is_padding",
           "extend_lens", "extend_start_loc", "seq_lens")
