"""One table of the docs/design.md §3 ops: impl, oracle, samples, error inputs, dtypes, comparison, syncs.

Generic tests (``test_ops_vs_reference``, ``test_op_error_inputs``, ``test_op_syncs``,
``test_ops_torch_backend``, ``test_ops_cuda``), ``python -m impl.testing.op_report`` and
``python -m ci.tools.compile_kernels`` iterate :data:`OPS`. Import the table's names from here.
Imports impl, reference and impl.testing; never ci/, registered/ or pytest.
"""
from __future__ import annotations

from typing import Callable

import torch

import impl.kernels as K
import reference as R
from impl.testing import error_inputs as E
from impl.testing import samples as S
from impl.testing.compare import EXACT, NORM_ROPE, RENORM, Comparison, max_abs_error, mismatch
from impl.testing.op_info import (
    ErrorInput,
    Kwargs,
    OpInfo,
    Sample,
    clone_kwargs,
    expected_syncs,
    oracle_mismatches,
    run_op,
    run_reference,
    sample_mismatches,
)
from impl.testing.tunings import top_k_variants, top_p_variants
from impl.testing import bad_values as B
from impl.testing.op_info import BadValueSample, bad_value_cases, check_mode_rejection

__all__ = ["EXACT", "NORM_ROPE", "RENORM", "Comparison", "ErrorInput", "Kwargs", "OpInfo", "Sample", "OPS",
           "OPS_BY_NAME", "HELPERS", "case_id", "cases", "clone_kwargs", "error_cases", "error_case_id",
           "expected_syncs", "max_abs_error", "mismatch", "oracle_mismatches", "run_op", "run_reference",
           "sample_mismatches"]
__all__ += ["BadValueSample", "bad_value_cases", "check_mode_rejection"]

INDEX = (torch.int32, torch.int64)
FP8 = tuple(getattr(torch, name) for name in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, name))
# data movement copies raw bits: every dtype but bool (and complex)
ROW_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
              torch.float32, torch.float64, *FP8)

OPS: list[OpInfo] = [
    OpInfo("scatter_into_unified", K.scatter_into_unified, R.scatter_into_unified, S.scatter_samples,
           E.scatter_errors, EXACT, dtypes=ROW_DTYPES, dtype_args=("kv", "unified"), graph_safe=True, syncs=0,
           mutates="unified", written_rows=S.scatter_written, tags=("triton",), bad_value_samples=B.scatter_bad_values),
    OpInfo("store_swa_into_unified", K.store_swa_into_unified, R.store_swa_into_unified, S.swa_samples,
           E.swa_errors, EXACT, dtypes=ROW_DTYPES, dtype_args=("kv", "unified"), graph_safe=True, syncs=0,
           mutates="unified", written_rows=S.swa_written, tags=("triton",), bad_value_samples=B.swa_bad_values),
    OpInfo("fused_norm_rope_", K.fused_norm_rope_, R.fused_norm_rope_, S.norm_rope_samples, E.norm_rope_errors,
           NORM_ROPE, dtypes=(torch.bfloat16, torch.float16, torch.float32), dtype_args=("kv",), graph_safe=True,
           syncs=0, mutates="kv", tags=("triton",), bad_value_samples=B.norm_rope_bad_values),
    OpInfo("build_commit_inject_layout", K.build_commit_inject_layout, R.build_commit_inject_layout,
           S.commit_samples, E.commit_errors, EXACT, dtypes=INDEX,
           dtype_args=("req_pool_indices", "prefix_lens", "commit_lens"), graph_safe=True, syncs=0,
           bad_value_samples=B.commit_bad_values),
    OpInfo("unified_inject_loc", K.unified_inject_loc, R.unified_inject_loc, S.inject_samples, E.inject_errors,
           EXACT, dtypes=INDEX, dtype_args=("positions", "state_slot"), graph_safe=True, syncs=0,
           bad_value_samples=B.inject_bad_values),
    OpInfo("expand_prefill_causally", K.expand_prefill_causally, R.expand_prefill_causally, S.expand_samples,
           E.expand_errors, EXACT, dtypes=INDEX, dtype_args=("seq_lens", "extend_lens", "req_pool_indices"),
           graph_safe=True, syncs=0, notes="graph safe when num_tokens is given; 1 sync without",
           bad_value_samples=B.expand_bad_values),
    OpInfo("pad_verify_lens_to_bucket", K.pad_verify_lens_to_bucket, R.pad_verify_lens_to_bucket, S.pad_samples,
           E.pad_errors, EXACT, dtypes=INDEX, dtype_args=("verify_lens",), graph_safe=True, syncs=0,
           notes="tier >= sum is checked only in check mode", bad_value_samples=B.pad_bad_values),
    OpInfo("prefill_inject_meta", K.prefill_inject_meta, R.prefill_inject_meta, S.prefill_samples,
           E.prefill_errors, EXACT, dtypes=INDEX, dtype_args=("req_pool_indices", "prefix_lens", "extend_lens"),
           graph_safe=False, syncs=1, notes="one repeat_interleave without output_size (eager prefill)",
           bad_value_samples=B.prefill_bad_values),
    OpInfo("build_token_metadata", K.build_token_metadata, R.build_token_metadata, S.token_meta_samples,
           E.token_meta_errors, EXACT, dtypes=INDEX, dtype_args=("prefix_lens", "req_pool_indices"), graph_safe=True,
           syncs=0, notes="the metadata builders' one launch where the sync policy elides the sync",
           tags=("triton",), bad_value_samples=B.token_meta_bad_values),
    OpInfo("top_k_renorm", K.top_k_renorm, R.top_k_renorm, S.topk_samples, E.topk_errors, RENORM,
           dtypes=(torch.float32,), dtype_args=("probs",), graph_safe=True, syncs=0,
           variants=top_k_variants, tags=("triton",), bad_value_samples=B.topk_bad_values),
    OpInfo("top_p_renorm", K.top_p_renorm, R.top_p_renorm, S.topp_samples, E.topp_errors, RENORM,
           dtypes=(torch.float32,), dtype_args=("probs",), graph_safe=True, syncs=0,
           variants=top_p_variants, tags=("triton",), bad_value_samples=B.topp_bad_values),
]

OPS_BY_NAME = {op.name: op for op in OPS}

# Host-side helpers outside the sample table (ints in, an int out: nothing to compare): error inputs only.
HELPERS: dict[str, tuple[Callable, Callable[[], list[ErrorInput]]]] = {
    "select_token_tier": (K.select_token_tier, E.tier_errors),
}


def cases(large: bool = False) -> list[tuple[OpInfo, Sample]]:
    """Every (op, sample) pair; ``pytest.mark.parametrize`` ids come from :func:`case_id`."""
    return [(op, s) for op in OPS for s in op.samples(large)]


def case_id(case: tuple[OpInfo, Sample]) -> str:
    return f"{case[0].name}-{case[1].name}"


def error_cases() -> list[tuple[str, Callable, ErrorInput]]:
    """Every (op name, op, error input) triple, table ops first, then the host-side helpers."""
    entries = [(op.name, op.impl, op.error_inputs) for op in OPS]
    entries += [(name, fn, errors) for name, (fn, errors) in HELPERS.items()]
    return [(name, fn, err) for name, fn, errors in entries for err in errors()]


def error_case_id(case: tuple[str, Callable, ErrorInput]) -> str:
    return f"{case[0]}-{case[2].name}"
