"""Target-hidden injector: projected target hidden states -> the draft's KV (docs/design.md §6).

DSpark drafts attend over the target's hidden states at committed positions.
For every draft layer the injector projects the hidden states to one KV row per
token (``project(layer, hidden) -> [T, head_dim]``), applies the pool writer
(fused RMSNorm + interleaved RoPE, then scatter, skipping ``loc < 0``):

* ``inject_prefill``: every prefill token, window trim via ``final_pos`` (only a
  request's last ``window`` tokens are kept, docs/design.md §9.4), no commit gate.
  Call it BEFORE ``pool.release`` of a finished request: the slot's rows may be
  recycled by the next request.
* ``inject_verify``: verify rows in the uniform ``[bs, stride]`` layout with the
  commit gate (``col >= commit_len`` skipped; ``min(commit_len, stride)`` rows
  written per request, invariant 3).
* ``inject_verify_ragged``: the same for a ragged verify layout (``verify_lens``,
  ``extend_start_loc``); rows are regrouped into ``[bs, stride]`` by a gather.

Addresses come from the pool (``locate`` / ``locate_commit``), so the same
injector drives the unified ring and the paged pool. Empty input is a no-op.
On the unified pool the verify paths are sync-free; prefill trim is too.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from impl.pools.base import KVPool
from impl.validation import INDEX_DTYPES, check_locs, check_mode_enabled, check_positive_int, check_tensor

Projector = Callable[[int, torch.Tensor], torch.Tensor]


class TargetHiddenInjector:
    """Writes projected target hidden states into ``pool`` for ``layers`` (default: all)."""

    def __init__(
        self,
        pool: KVPool,
        *,
        norm_weights: Sequence[torch.Tensor],
        eps: float,
        cos: torch.Tensor,
        sin: torch.Tensor,
        project: Projector | None = None,
        layers: Sequence[int] | None = None,
    ) -> None:
        if not isinstance(pool, KVPool):
            raise TypeError(f"pool must be a KVPool, got {type(pool).__name__}")
        self.pool = pool
        self.layers = tuple(range(pool.num_layers)) if layers is None else tuple(layers)
        for layer in self.layers:
            pool.buffer(layer)  # validates the index
        if len(norm_weights) != len(self.layers):
            raise ValueError(
                f"norm_weights must have one weight per injected layer ({len(self.layers)}), got {len(norm_weights)}"
            )
        for i, w in enumerate(norm_weights):
            check_tensor(f"norm_weights[{i}]", w, ndim=1, shape=[pool.head_dim])
        self.norm_weights = tuple(norm_weights)
        self.eps = float(eps)
        self.cos, self.sin = cos, sin
        self.project = project

    # ---- shared pieces ----
    def _kv_for(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        if self.project is None:
            # hidden already holds KV rows; copy so the in-place norm/RoPE leaves the caller's tensor alone
            kv = hidden.to(self.pool.dtype).clone()
        else:
            kv = self.project(layer, hidden)
        check_tensor(f"project(layer={layer}) output", kv, dtype=self.pool.dtype, ndim=2,
                     shape=[hidden.shape[0], self.pool.head_dim])
        return kv

    def _write_all(self, hidden: torch.Tensor, positions: torch.Tensor, loc: torch.Tensor) -> None:
        if check_mode_enabled():
            check_locs("loc", loc, self.pool.num_rows)
        for i, layer in enumerate(self.layers):
            kv = self._kv_for(layer, hidden)
            self.pool.write(layer, kv, loc, positions=positions, norm_weight=self.norm_weights[i],
                            eps=self.eps, cos=self.cos, sin=self.sin)

    def _check_hidden(self, hidden: torch.Tensor, rows: int | None = None) -> None:
        check_tensor("hidden", hidden, ndim=2, shape=None if rows is None else [rows, None])

    # ---- (a) prefill tokens ----
    def inject_prefill(
        self,
        hidden: torch.Tensor,
        *,
        positions: torch.Tensor,
        state_slot: torch.Tensor | None,
        final_pos: torch.Tensor | None,
    ) -> torch.Tensor:
        """Inject prefill tokens; returns the write loc (int32, -1 = trimmed by the window).

        ``state_slot[T]`` is each token's request slot (required: it picks the
        ring rows); ``final_pos[T]`` is the request's last prefill position
        (required: the window trim keeps ``pos > final_pos - window``). Padding
        rows of a graph layout (position 0, ``final_pos = window``) are skipped.
        """
        self._check_hidden(hidden)
        if state_slot is None:
            raise ValueError(
                f"state_slot is required for {self.pool.kind} injection: the per-token draft "
                "req_pool_indices select each token's ring rows"
            )
        if final_pos is None:
            raise ValueError("final_pos is required for prefill injection: it drives the window trim")
        check_tensor("positions", positions, dtype=INDEX_DTYPES, shape=[hidden.shape[0]])
        if hidden.shape[0] == 0:
            return torch.empty(0, dtype=torch.int32, device=hidden.device)
        loc = self.pool.locate(state_slot, positions, final_pos=final_pos)
        self._write_all(hidden, positions, loc)
        return loc

    # ---- (b) verify rows ----
    def inject_verify(
        self,
        hidden: torch.Tensor,
        *,
        req_pool_indices: torch.Tensor,
        prefix_lens: torch.Tensor,
        commit_lens: torch.Tensor,
        stride: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Inject committed verify rows from a uniform ``[bs * stride]`` layout.

        Row ``r*stride + j`` holds request r's hidden state at position
        ``prefix_lens[r] + j``; it is written iff ``j < commit_lens[r]``.
        ``stride`` defaults to the target's verify rows (gamma + 1).
        Returns (positions int64 [bs*stride], loc int32 [bs*stride]).
        """
        stride = self.pool.config.verify_rows("target") if stride is None else stride
        check_positive_int("stride", stride)
        check_tensor("req_pool_indices", req_pool_indices, dtype=INDEX_DTYPES, ndim=1)
        bs = req_pool_indices.shape[0]
        self._check_hidden(hidden, bs * stride)
        if check_mode_enabled():
            self._check_commit_values(commit_lens, stride, None)
        positions, loc = self.pool.locate_commit(req_pool_indices, prefix_lens, commit_lens, stride=stride)
        if bs == 0:
            return positions, loc
        self._write_all(hidden, positions, loc)
        return positions, loc

    def inject_verify_ragged(
        self,
        hidden: torch.Tensor,
        *,
        req_pool_indices: torch.Tensor,
        prefix_lens: torch.Tensor,
        commit_lens: torch.Tensor,
        verify_lens: torch.Tensor,
        extend_start_loc: torch.Tensor,
        stride: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Inject committed verify rows from a ragged layout (request r's rows start at
        ``extend_start_loc[r]``, ``verify_lens[r]`` of them). Commit is capped at
        ``verify_lens`` (check mode raises if a commit_len exceeds it). ``stride``
        (default gamma + 1) must be >= every verify_len. Sync-free on the unified pool.
        """
        stride = self.pool.config.verify_rows("target") if stride is None else stride
        check_positive_int("stride", stride)
        check_tensor("req_pool_indices", req_pool_indices, dtype=INDEX_DTYPES, ndim=1)
        bs = req_pool_indices.shape[0]
        check_tensor("verify_lens", verify_lens, dtype=INDEX_DTYPES, shape=[bs])
        check_tensor("extend_start_loc", extend_start_loc, dtype=INDEX_DTYPES, shape=[bs])
        check_tensor("commit_lens", commit_lens, dtype=INDEX_DTYPES, shape=[bs])
        self._check_hidden(hidden)
        if check_mode_enabled():
            self._check_commit_values(commit_lens, stride, verify_lens)
        # regroup ragged rows into [bs, stride]; columns past a request's rows are
        # clamped reads that the commit gate (capped at verify_len) never writes
        col = torch.arange(stride, device=hidden.device, dtype=torch.int64).view(1, -1)
        src = extend_start_loc.to(torch.int64).view(-1, 1) + col
        src = src.clamp(0, max(hidden.shape[0] - 1, 0)).reshape(-1)
        commit = torch.minimum(commit_lens.to(torch.int64), verify_lens.to(torch.int64)).to(commit_lens.dtype)
        positions, loc = self.pool.locate_commit(req_pool_indices, prefix_lens, commit, stride=stride)
        if bs == 0 or hidden.shape[0] == 0:
            return positions, torch.full_like(loc, -1)
        self._write_all(hidden.index_select(0, src), positions, loc)
        return positions, loc

    @staticmethod
    def _check_commit_values(commit_lens: torch.Tensor, stride: int, verify_lens: torch.Tensor | None) -> None:
        """Check-mode value checks (they sync): 0 <= commit_len <= verify rows."""
        if commit_lens.numel() == 0:
            return
        c = commit_lens.to(torch.int64)
        if bool((c < 0).any()):
            raise ValueError(f"commit_lens must be >= 0, got {c.tolist()}")
        if verify_lens is not None and bool((verify_lens.to(torch.int64) > stride).any()):
            raise ValueError(f"verify_lens must be <= stride ({stride}), got {verify_lens.tolist()}")
        limit = torch.full_like(c, stride) if verify_lens is None else verify_lens.to(torch.int64)
        over = c > limit
        if bool(over.any()):
            r = int(over.nonzero()[0])
            what = f"stride {stride}" if verify_lens is None else f"verify_lens[{r}] = {int(limit[r])}"
            raise ValueError(
                f"commit_lens[{r}] = {int(c[r])} is longer than the request's verify rows ({what}): "
                "a request cannot commit rows it did not verify"
            )
