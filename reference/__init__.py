"""Pure-torch oracles, one per impl op, written for obviousness (loops, exact or
float64 arithmetic, no Triton). Add one import line per component module."""
from reference.ops_layout import (  # SPEC §3.4-§3.8
    build_commit_inject_layout,
    expand_prefill_causally,
    pad_verify_lens_to_bucket,
    prefill_inject_meta,
    select_token_tier,
    unified_inject_loc,
)
from reference.ops_ring import fused_norm_rope_, scatter_into_unified, store_swa_into_unified  # SPEC §3.1-§3.3
from reference.ops_sampling import top_k_renorm, top_p_renorm  # SPEC §3.9
# issue #4 (pools, metadata, DSpark/MTP components); appended, helper-1 owns the lines above
from reference.pools import DictPool  # SPEC §5
from reference.spec import greedy_verify, sampling_output_distribution  # SPEC §6
from reference.verify_metadata import field_rule_allows_output_size, token_metadata  # SPEC §4
from reference.decoder import greedy_decode_reference  # noqa: E402,F401  (e2e reference, helper-2)
