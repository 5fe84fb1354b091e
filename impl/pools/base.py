"""The contract both draft KV pools implement, so either can back the same model (docs/design.md §5).

A pool stores, per layer, one 2-D buffer of KV rows ``[num_rows, head_dim]``
(K is V: one latent head). Writers never compute addresses themselves; they ask
the pool:

* ``locate(state_slot, positions, final_pos=None) -> loc``: where to WRITE each
  token (int32, ``-1`` = skip). ``final_pos`` applies the window trim: a token is
  skipped when ``pos <= final_pos - window`` (only a request's last ``window``
  tokens survive; older ones would share ring rows and race).
* ``locate_commit(req_pool_indices, prefix_lens, commit_lens, stride=...)``:
  the verify-row layout ``[bs * stride]`` (row-major, position = prefix + col)
  with the commit gate: ``loc = -1`` where ``col >= commit_len``.
* ``read_loc(state_slot, positions) -> loc``: where to READ a token's row
  (``-1`` when the pool holds no row for it; the unified ring always answers).
* ``write(layer, kv, loc, positions=, norm_weight=, eps=, cos=, sin=)``: fused
  RMSNorm + interleaved RoPE *in place on kv* (kv is the caller's scratch), then
  scatter rows into the layer buffer, skipping ``loc < 0``. ``store`` is the
  scatter alone, for rows already normalised.
* ``gather(layer, state_slot, positions) -> [N, head_dim]``: the rows attention
  reads; zeros where ``read_loc`` is -1.
* ``release(slot)``: the request in ``slot`` is finished. Inject its prefill
  tokens BEFORE releasing: a released slot's rows may be handed to another request.

Target and draft pools must agree on window, ring, slot count and gamma
(:func:`check_pools_compatible`).
"""
from __future__ import annotations

import abc
from typing import ClassVar

import torch

from impl.config import SpecConfig
from impl.validation import INDEX_DTYPES, check_positive_int, check_same_device, check_tensor


def _ops():
    import impl.kernels as kernels  # imported lazily: the kernels module defines Triton kernels

    return kernels


def check_gamma_consistent(target: SpecConfig, draft: SpecConfig) -> None:
    """Target and draft configs must share gamma (the single source of truth for gamma)."""
    for name, cfg in (("target", target), ("draft", draft)):
        if not isinstance(cfg, SpecConfig):
            raise TypeError(f"{name} config must be a SpecConfig, got {type(cfg).__name__}")
    if target.gamma != draft.gamma:
        raise ValueError(
            f"gamma differs between target config (gamma={target.gamma}, verifies "
            f"{target.verify_rows('target')} rows) and draft config (gamma={draft.gamma}, verifies "
            f"{draft.verify_rows('draft')} rows); both must derive from one gamma"
        )


class KVPool(abc.ABC):
    """Per-layer KV rows for the draft (or target) model; see the module docstring."""

    kind: ClassVar[str]

    def __init__(
        self,
        config: SpecConfig,
        *,
        num_layers: int,
        num_rows: int,
        dtype: torch.dtype = torch.bfloat16,
        device: torch.device | str | None = None,
    ) -> None:
        if not isinstance(config, SpecConfig):
            raise TypeError(f"config must be a SpecConfig, got {type(config).__name__}")
        check_positive_int("num_layers", num_layers)
        check_positive_int("num_rows", num_rows)
        from impl.platform import default_device

        self.config = config
        self.num_layers = num_layers
        self.dtype = dtype
        self.device = torch.device(device) if device is not None else default_device()
        self._buffers = [
            torch.zeros(num_rows, config.head_dim, dtype=dtype, device=self.device) for _ in range(num_layers)
        ]

    # ---- geometry (all from the config; never stored twice) ----
    @property
    def window(self) -> int:
        return self.config.window

    @property
    def ring(self) -> int:
        return self.config.ring

    @property
    def num_slots(self) -> int:
        return self.config.num_slots

    @property
    def head_dim(self) -> int:
        return self.config.head_dim

    @property
    def num_rows(self) -> int:
        return self._buffers[0].shape[0]

    def buffer(self, layer: int) -> torch.Tensor:
        """The raw ``[num_rows, head_dim]`` storage of ``layer`` (writes go through ``write``/``store``)."""
        if not isinstance(layer, int) or not 0 <= layer < self.num_layers:
            raise ValueError(f"layer must be an int in [0, {self.num_layers}), got {layer!r}")
        return self._buffers[layer]

    # ---- addressing (pool specific) ----
    @abc.abstractmethod
    def locate(
        self, state_slot: torch.Tensor, positions: torch.Tensor, *, final_pos: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Write loc per token, int32 ``[N]``; -1 where the window trim drops it."""

    @abc.abstractmethod
    def locate_commit(
        self,
        req_pool_indices: torch.Tensor,
        prefix_lens: torch.Tensor,
        commit_lens: torch.Tensor,
        *,
        stride: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Verify rows ``[bs*stride]``: (positions int64 = prefix + col, loc int32, -1 where col >= commit_len)."""

    @abc.abstractmethod
    def read_loc(self, state_slot: torch.Tensor | int, positions: torch.Tensor) -> torch.Tensor:
        """Read loc per token, int32 ``[N]``; -1 where the pool holds no row for it."""

    @abc.abstractmethod
    def release(self, slot: int) -> None:
        """Finish the request in ``slot`` (inject its prefill first)."""

    # ---- writing and reading (shared) ----
    def norm_rope_(
        self,
        kv: torch.Tensor,
        *,
        positions: torch.Tensor,
        norm_weight: torch.Tensor,
        eps: float,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> torch.Tensor:
        """Fused RMSNorm + interleaved RoPE on the trailing ``rope_dim`` columns, in place."""
        return _ops().fused_norm_rope_(kv, norm_weight, eps, cos, sin, positions, rope_dim=self.config.rope_dim)

    def store(self, layer: int, kv: torch.Tensor, loc: torch.Tensor) -> None:
        """Scatter already-normalised rows: ``buffer[loc[i]] = kv[i]`` unless ``loc[i] < 0``."""
        _ops().scatter_into_unified(kv, loc, self.buffer(layer))

    def write(
        self,
        layer: int,
        kv: torch.Tensor,
        loc: torch.Tensor,
        *,
        positions: torch.Tensor,
        norm_weight: torch.Tensor,
        eps: float,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> None:
        """The writer: norm + RoPE in place on ``kv``, then scatter (skip ``loc < 0``)."""
        if kv.dim() == 2 and kv.shape[0] == 0:
            return
        self.norm_rope_(kv, positions=positions, norm_weight=norm_weight, eps=eps, cos=cos, sin=sin)
        self.store(layer, kv, loc)

    def gather(self, layer: int, state_slot: torch.Tensor | int, positions: torch.Tensor) -> torch.Tensor:
        """Rows for (slot, position) pairs, ``[N, head_dim]``; zeros where the pool has none. No sync."""
        loc = self.read_loc(state_slot, positions)
        buf = self.buffer(layer)
        rows = buf.index_select(0, loc.clamp(min=0).to(torch.int64))
        return torch.where((loc >= 0).unsqueeze(1), rows, torch.zeros((), dtype=buf.dtype, device=buf.device))

    # ---- argument checks shared by the implementations ----
    def _slot_tensor(self, state_slot: torch.Tensor | int | None, positions: torch.Tensor) -> torch.Tensor:
        if state_slot is None:
            raise ValueError(
                f"state_slot is required by the {self.kind} pool: each token's request slot "
                "(its req_pool_idx) picks its rows"
            )
        if isinstance(state_slot, int) and not isinstance(state_slot, bool):
            if not 0 <= state_slot < self.num_slots:
                raise ValueError(f"state_slot must be in [0, {self.num_slots}), got {state_slot}")
            return torch.full(positions.shape, state_slot, dtype=torch.int64, device=positions.device)
        check_tensor("state_slot", state_slot, dtype=INDEX_DTYPES, ndim=1, shape=[positions.shape[0]])
        return state_slot

    def _check_tokens(self, positions: torch.Tensor, final_pos: torch.Tensor | None) -> None:
        check_tensor("positions", positions, dtype=INDEX_DTYPES, ndim=1)
        if final_pos is not None:
            check_tensor("final_pos", final_pos, dtype=INDEX_DTYPES, ndim=1, shape=[positions.shape[0]])
        check_same_device(positions=positions, final_pos=final_pos)

    def _check_commit_args(
        self, req_pool_indices: torch.Tensor, prefix_lens: torch.Tensor, commit_lens: torch.Tensor, stride: int
    ) -> None:
        check_tensor("req_pool_indices", req_pool_indices, dtype=INDEX_DTYPES, ndim=1)
        bs = req_pool_indices.shape[0]
        check_tensor("prefix_lens", prefix_lens, dtype=INDEX_DTYPES, shape=[bs])
        check_tensor("commit_lens", commit_lens, dtype=INDEX_DTYPES, shape=[bs])
        check_positive_int("stride", stride)
        if stride > self.ring:
            raise ValueError(f"stride ({stride}) must not exceed the ring ({self.ring}): verify rows would collide")

    def describe(self) -> str:
        return (
            f"{self.kind} pool: {self.num_layers} layers x [{self.num_rows}, {self.head_dim}] {self.dtype}, "
            f"window={self.window} ring={self.ring} slots={self.num_slots} gamma={self.config.gamma}"
        )


def check_pools_compatible(target: KVPool, draft: KVPool) -> None:
    """Target and draft pools must agree on window, ring, slot count and gamma."""
    for name, pool in (("target", target), ("draft", draft)):
        if not isinstance(pool, KVPool):
            raise TypeError(f"{name} pool must be a KVPool, got {type(pool).__name__}")
    check_gamma_consistent(target.config, draft.config)
    for attr in ("window", "ring", "num_slots"):
        t, d = getattr(target, attr), getattr(draft, attr)
        if t != d:
            raise ValueError(
                f"target and draft pools disagree on {attr}: target {attr}={t}, draft {attr}={d}; "
                "a request's slot and ring rows must mean the same thing in both"
            )
