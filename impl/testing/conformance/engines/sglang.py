"""The sglang adapter: its unified-KV ring writers and its commit-inject layout builder (data only).

Paths are relative to sglang's ``python/`` directory (the folder holding the ``sglang`` package;
``--root`` may name it or the repository root). The metadata builder ``_attach_unified_kv_prefill_meta``
of the HIP radix backend and the entries that feed it (as of ``c034120cb``, PR #29202, and its parent:
same names) are declared in ``UNIFIED_KV_PREFILL_META``; docs/conformance.md has the replay.
Kernel function names and signatures as of sglang ``ba7abd4f9`` (PR #30964),
unchanged at ``967cac801``. What sglang claims, read from its code and docstrings:
bf16 rows (``[T, head_dim] bf16``), loc < 0 skipped, the window trim ``pos <= final_pos - win``;
no structural checks beyond ``assert`` (so no error clause), no check mode, no §10 answers.
"""
from __future__ import annotations

from impl.testing.conformance.adapter import Arg, EngineAdapter, OpAdapter
from impl.testing.conformance.meta_adapter import MetadataAdapter, MetaPath

RUNTIME = "sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime"
ROPE = "sglang.kernels.ops.attention.deepseek_v4_rope"
VERIFY_WINDOW = "sglang.kernels.ops.speculative.dspark.dspark_verify_window"
HIP_RADIX = "sglang.srt.layers.attention.deepseek_v4_backend_hip_radix"
BACKEND = "DeepseekV4HipRadixBackend"

# init_forward_metadata_target_verify_old: the target-verify token count (uniform: rows * bs; ragged eager:
# sum(verify_lens) read back; ragged graph: the layout's total = the tier over padded lens), fed on to
# init_forward_metadata_prefill(need_compress=True) -> _attach_unified_kv_prefill_meta.
_VERIFY_ARGS = (Arg("max_seq_len"), Arg("req_pool_indices"), Arg("seq_lens", "prefix_lens"),
                Arg("seq_lens_cpu", "prefix_host"), Arg("ragged_layout", "layout"))
# init_forward_metadata_draft_extend: rows per request for every request (need_compress=False).
_DRAFT_EXTEND_ARGS = (Arg("max_seq_len"), Arg("req_pool_indices"), Arg("seq_lens"),
                      Arg("seq_lens_cpu", "seq_lens_host"), Arg("num_tokens_per_req", "rows"))

UNIFIED_KV_PREFILL_META = MetadataAdapter(
    name="unified_kv_prefill_meta",
    module=HIP_RADIX, builder=f"{BACKEND}._attach_unified_kv_prefill_meta",
    fields=(("state_slot", "unified.pf_state_slot"), ("chunk_start", "unified.pf_chunk_start"),
            ("cu_q", "unified.pf_cu_q"), ("final_pos", "unified.pf_final_pos")),
    paths=(
        MetaPath("target-verify uniform", f"{BACKEND}.init_forward_metadata_target_verify_old", _VERIFY_ARGS,
                 "uniform", notes="ragged_layout=None: target_verify_num_draft_tokens rows per request"),
        MetaPath("target-verify ragged eager", f"{BACKEND}.init_forward_metadata_target_verify_old", _VERIFY_ARGS,
                 "ragged-eager", notes="a device-assembled layout: total_verify_tokens None, the sum read back"),
        MetaPath("target-verify ragged graph", f"{BACKEND}.init_forward_metadata_target_verify_old", _VERIFY_ARGS,
                 "ragged-graph", notes="padded_to_bucket: lens padded to the tier, total_verify_tokens = the tier"),
        MetaPath("dspark-draft verify uniform", f"{BACKEND}.init_forward_metadata_target_verify_old", _VERIFY_ARGS,
                 "uniform", role="draft", algorithms=("dspark",),
                 notes="is_dspark_draft: the draft worker verifies gamma rows through the same entry"),
        MetaPath("draft-extend", f"{BACKEND}.init_forward_metadata_draft_extend", _DRAFT_EXTEND_ARGS, "uniform",
                 algorithms=("mtp",), notes="the MTP draft's extend after verify (EAGLE draft-extend bucket)"),
    ),
    standin=(("target_verify_num_draft_tokens", "rows"), ("device", "device"), ("_move_to_device", "to-device"),
             ("cuda_int32_kwargs", "int32-kwargs"), ("init_forward_metadata_prefill", "forward-to-builder")),
    layout_attrs=(("verify_lens", "verify_lens"), ("extend_start_loc", "extend_start_loc"),
                  ("total_verify_tokens", "total"), ("graph_num_tokens", "tier")),
    # is_unified_kv_triton() = is_hip() and SGLANG_HACK_FLASHMLA_BACKEND == "unified_kv_triton"
    values=(("sglang.srt.utils.is_hip", "is-platform:hip"),
            ("sglang.srt.environ.envs", "env:SGLANG_HACK_FLASHMLA_BACKEND=unified_kv_triton")),
    notes="the stand-in's init_forward_metadata_prefill calls the real builder with the arguments of the same "
          "names (the engine's own plumbing between the two is not run); the builder returns early off HIP",
)

ADAPTER = EngineAdapter(
    name="sglang",
    package="sglang",
    root_hint="sglang's repository root or its python/ directory",
    # the server stack and platform helpers its kernel modules import at module level
    stubs=("sglang.srt", "sglang.kernels.ops.quantization", "aiter", "msgspec", "sgl_kernel"),
    metadata=(UNIFIED_KV_PREFILL_META,),
    ops=(
        OpAdapter(
            op="scatter_into_unified",
            module=RUNTIME, function="scatter_bf16_into_unified",
            args=(Arg("kv"), Arg("loc"), Arg("unified_kv", "unified")),
            dtypes=("bfloat16",),
            notes="keyword-only; returns None, writes unified_kv in place",
        ),
        OpAdapter(
            op="store_swa_into_unified",
            module=RUNTIME, function="store_swa_into_unified",
            args=(Arg("kv"), Arg("state_slot"), Arg("positions"), Arg("unified_kv", "unified"), Arg("win", "window"),
                  Arg("ring_stride", "ring"), Arg("final_pos")),
            dtypes=("bfloat16",),
            notes="keyword-only; window -> win, ring -> ring_stride; returns None",
        ),
        OpAdapter(
            op="fused_norm_rope_",
            module=ROPE, function="fused_norm_rope_inplace_triton",
            args=(Arg("kv"), Arg("weight"), Arg("eps"), Arg("freqs_cis", derive="complex:cos,sin"), Arg("positions")),
            implied=("rope_dim",), arg_ranks=(("kv", 2),),
            notes="the Triton variant; cos/sin tables -> one complex freqs_cis table; rope_dim = its width x 2; "
                  "kv [M, head_dim] only",
        ),
        OpAdapter(
            op="build_commit_inject_layout",
            module=VERIFY_WINDOW, function="build_unified_commit_inject_layout",
            args=(Arg("req_pool_indices"), Arg("prefix_lens"), Arg("block_pos_offsets", derive="arange:stride"),
                  Arg("commit_lens"), Arg("stride"), Arg("ring_stride", "ring")),
            outputs=("positions", "swa_loc"),
            notes="block_pos_offsets (column offsets of the verify block) derived as arange(stride); "
                  "returns a struct (swa_loc, positions)",
        ),
    ),
)
