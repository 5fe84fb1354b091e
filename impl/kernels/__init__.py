"""The docs/design.md §3 kernels and layout builders.

Data-moving ops (scatter, SWA store, norm+RoPE, top-k/top-p) run as Triton
kernels -- compiled on a GPU, interpreted on CPU -- or in torch when the
kernel_backend gate says "torch". The small index builders are torch, except the per-token
metadata (one Triton launch, impl/kernels/token_metadata.py).
Every op validates its arguments (ValueError/TypeError naming the argument);
value checks that read device memory run only in check mode.
"""
from impl.kernels.layout import (
    build_commit_inject_layout,
    expand_prefill_causally,
    pad_verify_lens_to_bucket,
    prefill_inject_meta,
    select_token_tier,
    unified_inject_loc,
)
from impl.kernels.norm_rope import fused_norm_rope_
from impl.kernels.renorm import top_k_renorm, top_p_renorm
from impl.kernels.token_metadata import build_token_metadata
from impl.kernels.scatter import scatter_into_unified, store_swa_into_unified

__all__ = [
    "scatter_into_unified",
    "store_swa_into_unified",
    "fused_norm_rope_",
    "build_commit_inject_layout",
    "unified_inject_loc",
    "expand_prefill_causally",
    "pad_verify_lens_to_bucket",
    "select_token_tier",
    "prefill_inject_meta",
    "build_token_metadata",
    "top_k_renorm",
    "top_p_renorm",
]
