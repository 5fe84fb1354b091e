"""dspark-suite implementation: platform and gates, config, kernels, pools, metadata,
DSpark/MTP components and the tiny model.

Public ops are exported lazily (PEP 562) so that ``import impl.gates`` -- used by
the CI audit on machines without torch -- does not import torch or triton.
"""
from __future__ import annotations

from impl.lazy_exports import lazy_exports

_LAZY = {
    # docs/design.md §3 ops, same names and signatures as in reference/
    "scatter_into_unified": "impl.kernels",
    "store_swa_into_unified": "impl.kernels",
    "fused_norm_rope_": "impl.kernels",
    "build_commit_inject_layout": "impl.kernels",
    "unified_inject_loc": "impl.kernels",
    "expand_prefill_causally": "impl.kernels",
    "pad_verify_lens_to_bucket": "impl.kernels",
    "select_token_tier": "impl.kernels",
    "prefill_inject_meta": "impl.kernels",
    "top_k_renorm": "impl.kernels",
    "top_p_renorm": "impl.kernels",
    # platform, gates, config
    "SpecConfig": "impl.config",
    "current_platform": "impl.platform",
    "emulate": "impl.platform",
    "GATES": "impl.gates",
    "check_mode": "impl.validation",
    # one run's options, resolved once at the edge; the e2e library call
    "RunOptions": "impl.run_options",
    "resolve_gates": "impl.gates",
    "run_case": "impl.engine.run",
    # pools, metadata, sync policy, DSpark/MTP components
    "UnifiedKVPool": "impl.pools",
    "PagedKVPool": "impl.pools",
    "make_pool": "impl.pools",
    "check_pools_compatible": "impl.pools",
    "TargetHiddenInjector": "impl.spec",
    "greedy_verify": "impl.spec",
    "sampling_verify": "impl.spec",
    "AcceptanceStats": "impl.spec",
    "build_verify_metadata": "impl.verify_metadata",
    "RaggedVerifyLayout": "impl.verify_metadata",
    "build_prefill_metadata": "impl.prefill_metadata",
    "MetadataWorkspace": "impl.prefill_metadata",  # the builders' output buffers (not an op)
    # multi-rank: DP attention + TP MLP
    "DpEngine": "impl.distributed.dp_engine",
    "TensorParallelMlp": "impl.distributed.tp_mlp",
    "launch_distributed": "impl.distributed.launch",
}

__all__, __getattr__ = lazy_exports(__name__, _LAZY)
