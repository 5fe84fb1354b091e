"""Pure-torch oracles, one per impl op, written for obviousness (loops, exact or
float64 arithmetic, no Triton). Add one import line per component module, and its
public names to ``__all__``."""
from reference.decoder import greedy_decode_reference  # docs/design.md §7.3
from reference.ops_layout import (  # docs/design.md §3.4-§3.8
    build_commit_inject_layout,
    expand_prefill_causally,
    pad_verify_lens_to_bucket,
    prefill_inject_meta,
    select_token_tier,
    unified_inject_loc,
)
from reference.ops_ring import (  # docs/design.md §3.1-§3.3
    fused_norm_rope_,
    scatter_into_unified,
    store_swa_into_unified,
)
from reference.ops_sampling import top_k_renorm, top_p_renorm  # docs/design.md §3.9
from reference.pools import DictPool  # docs/design.md §5
from reference.spec import (  # docs/design.md §6
    greedy_verify,
    sampling_output_distribution,
)
from reference.verify_metadata import (  # docs/design.md §4
    build_token_metadata,
    field_rule_allows_output_size,
    token_metadata,
)

__all__ = [
    "DictPool",
    "build_commit_inject_layout",
    "build_token_metadata",
    "expand_prefill_causally",
    "field_rule_allows_output_size",
    "fused_norm_rope_",
    "greedy_decode_reference",
    "greedy_verify",
    "pad_verify_lens_to_bucket",
    "prefill_inject_meta",
    "sampling_output_distribution",
    "scatter_into_unified",
    "select_token_tier",
    "store_swa_into_unified",
    "token_metadata",
    "top_k_renorm",
    "top_p_renorm",
    "unified_inject_loc",
]
