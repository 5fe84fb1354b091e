"""Reusable output buffers for the metadata builders (host time: no allocation per call).

A metadata call that allocates its ten outputs spends about half its host time doing so (one
``torch.empty`` split into views: ~34 us of ~67 on the H200's host). An engine builds the same
layout every step and drops it before the next, so it can hand the builder a
:class:`MetadataWorkspace`: the outputs of a layout (``num_tokens``, batch, padded batch, device)
are allocated once and returned again on every later call with that layout.

The contract (the price of the speed): the tensors a builder returns with ``workspace=ws`` are
views of ``ws``; the next call with ``ws`` and the same layout overwrites them (in stream order,
so kernels already queued on that stream read the old values). Use one workspace per call site
whose result is dead before that site's next call -- the engine's verify step, not two results
held side by side. Without a workspace every call gets fresh tensors, as before.
"""
from __future__ import annotations

import torch

MAX_LAYOUTS = 32  # distinct layouts kept per workspace (graph tiers x batch sizes); cleared when full


def allocate_outputs(n: int, bs: int, padded_bs: int | None, device) -> tuple:
    """Every output of one layout as views of one int64 allocation (its tail viewed as int32 and as
    bool): one allocation and two ``split_with_sizes`` instead of a tensor each (host time).

    Returns (positions, seq_lens_causal, req_indices, final_pos, token_batch_index, is_padding)
    ``[n]``, (extend_lens, extend_start_loc, seq_lens) ``[bs]``, and padded_lens ``[padded_bs]`` or
    None."""
    p = padded_bs or 0
    narrow = 2 * n + 2 * bs + p  # int32 words
    pos, final, batch, seq, words32, words8 = torch.empty(
        3 * n + bs + (narrow + 1) // 2 + (n + 7) // 8, dtype=torch.int64, device=device).split_with_sizes(
        [n, n, n, bs, (narrow + 1) // 2, (n + 7) // 8])
    causal, req, ext, start, padded, _ = words32.view(torch.int32).split_with_sizes(
        [n, n, bs, bs, p, narrow % 2])
    pad = words8.view(torch.bool)[:n]
    return pos, causal, req, final, batch, pad, ext, start, seq, padded if padded_bs is not None else None


class MetadataWorkspace:
    """Output buffers of the metadata builders, reused per layout (see the module docstring for
    the aliasing contract). Holds at most ``MAX_LAYOUTS`` layouts; when full it forgets them all
    (tensors already returned stay valid: they keep their storage)."""

    def __init__(self) -> None:
        self._layouts: dict[tuple, tuple] = {}

    def outputs(self, n: int, bs: int, padded_bs: int | None, device: torch.device) -> tuple:
        """The outputs of layout (n, bs, padded_bs) on ``device``: allocated on first use."""
        key = (n, bs, padded_bs, device)
        got = self._layouts.get(key)
        if got is None:
            if len(self._layouts) >= MAX_LAYOUTS:
                self._layouts.clear()
            got = self._layouts[key] = allocate_outputs(n, bs, padded_bs, device)
        return got

    def __len__(self) -> int:
        return len(self._layouts)

    def __repr__(self) -> str:
        return f"MetadataWorkspace({len(self._layouts)} layouts)"


def check_workspace(workspace: object) -> None:
    if workspace is not None and not isinstance(workspace, MetadataWorkspace):
        raise TypeError(f"workspace must be a MetadataWorkspace or None, got {type(workspace).__name__}")
