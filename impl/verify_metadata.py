"""Target-verify metadata from a uniform or ragged layout (docs/design.md §4).

* Uniform: every request verifies ``config.verify_rows(role)`` rows (target
  gamma+1, DSpark draft gamma). Total = rows * bs in host ints: exact, no sync.
* Ragged eager: ``verify_lens [bs]``; total = ``sum(verify_lens)`` read back
  (one sync): exact.
* Ragged graph: the layout carries a captured token tier ``T`` (picked on the
  host by ``select_token_tier`` from an upper bound, so no sync): the lens are
  padded to ``T`` and the expansion passes ``output_size=T``. Not exact.

The per-token expansion and the sync decision live in
:func:`impl.prefill_metadata.build_prefill_metadata`; this module only turns a
verify layout into its lengths and total.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from impl.config import SpecConfig
from impl.prefill_metadata import TokenMetadata, build_prefill_metadata
from impl.validation import INDEX_DTYPES, check_mode_enabled, check_tensor


@dataclass(frozen=True)
class RaggedVerifyLayout:
    """Ragged verify: ``verify_lens[r]`` rows for request r; with ``tier`` the CUDA-graph path.

    ``tier`` is a captured token count (one of ``config.graph_token_tiers``) and
    ``padded_bs`` the captured batch size the lens are padded over (default bs).
    """

    verify_lens: torch.Tensor
    tier: int | None = None
    padded_bs: int | None = None

    def __post_init__(self) -> None:
        check_tensor("verify_lens", self.verify_lens, dtype=INDEX_DTYPES, ndim=1)
        bs = self.verify_lens.shape[0]
        if self.tier is not None and (not isinstance(self.tier, int) or self.tier < 1):
            raise ValueError(f"tier must be a positive int or None, got {self.tier!r}")
        if self.padded_bs is not None and (not isinstance(self.padded_bs, int) or self.padded_bs < bs):
            raise ValueError(f"padded_bs must be an int >= bs ({bs}), got {self.padded_bs!r}")

    @property
    def is_graph(self) -> bool:
        return self.tier is not None

    @classmethod
    def for_graph(
        cls, verify_lens: torch.Tensor, config: SpecConfig, *, need: int | None = None, role: str = "target"
    ) -> "RaggedVerifyLayout":
        """Pick the smallest captured tier >= ``need`` (default: the host-side bound
        ``bs * verify_rows(role)``, so no sync) and the smallest captured batch size >= bs."""
        from impl.kernels import select_token_tier

        check_tensor("verify_lens", verify_lens, dtype=INDEX_DTYPES, ndim=1)
        bs = verify_lens.shape[0]
        need = bs * config.verify_rows(role) if need is None else need
        tier = select_token_tier(need, config.graph_token_tiers)
        fitting = [b for b in sorted(config.capture_batch_sizes) if b >= bs]
        return cls(verify_lens, tier=int(tier), padded_bs=fitting[0] if fitting else bs)


def layout_path(ragged: RaggedVerifyLayout | None) -> str:
    if ragged is None:
        return "uniform"
    return "ragged-graph" if ragged.is_graph else "ragged-eager"


def build_verify_metadata(
    config: SpecConfig,
    *,
    seq_lens: torch.Tensor,
    req_pool_indices: torch.Tensor,
    role: str = "target",
    ragged: RaggedVerifyLayout | None = None,
    platform: str | None = None,
    algorithm: str | None = None,
    workspace=None,
) -> TokenMetadata:
    """Per-token metadata for one verify forward.

    seq_lens: ``[bs]`` committed lengths before the step; the anchor sits at
        position ``seq_lens[r]`` and the result's ``seq_lens`` = before + rows.
    req_pool_indices: ``[bs]`` request slots.
    ragged: None for the uniform layout, else a :class:`RaggedVerifyLayout`.
    platform / algorithm: default to the current platform and the
        ``spec_algorithm`` gate; they pick the sync policy cell.
    workspace: a :class:`impl.kernels.metadata_workspace.MetadataWorkspace` to hold the outputs
        (no allocation per call; overwritten by its next call with the same layout), or None.
    """
    if not isinstance(config, SpecConfig):
        raise TypeError(f"config must be a SpecConfig, got {type(config).__name__}")
    rows = config.verify_rows(role)
    check_tensor("seq_lens", seq_lens, dtype=INDEX_DTYPES, ndim=1)
    bs = seq_lens.shape[0]
    path = layout_path(ragged)
    if ragged is None:
        extend_lens: torch.Tensor | int = rows  # every request: no lens tensor to build
        num_tokens: int | None = rows * bs
        padded_bs = None
    else:
        extend_lens = ragged.verify_lens
        if extend_lens.shape[0] != bs:
            raise ValueError(f"ragged.verify_lens must have shape [{bs}] (one per request), "
                             f"got {list(extend_lens.shape)}")
        if check_mode_enabled() and bs and bool(((extend_lens < 0) | (extend_lens > rows)).any()):
            raise ValueError(
                f"verify_lens must be in [0, {rows}] ({role} verifies at most {rows} rows), got {extend_lens.tolist()}"
            )
        num_tokens = ragged.tier  # None on the eager path: the builder reads the sum back
        padded_bs = ragged.padded_bs
    return build_prefill_metadata(
        seq_lens,
        extend_lens,
        req_pool_indices,
        window=config.window,
        path=path,
        num_tokens=num_tokens,
        padded_bs=padded_bs,
        platform=platform,
        algorithm=algorithm,
        workspace=workspace,
    )
