"""The sglang adapter: its unified-KV ring writers and its commit-inject layout builder (data only).

Paths are relative to ``--root`` = sglang's ``python/`` directory (the folder holding the
``sglang`` package). Function names and signatures as of sglang ``ba7abd4f9`` (PR #30964),
unchanged at ``967cac801``. What sglang claims, read from its code and docstrings:
bf16 rows (``[T, head_dim] bf16``), loc < 0 skipped, the window trim ``pos <= final_pos - win``;
no structural checks beyond ``assert`` (so no error clause), no check mode, no §10 answers.
"""
from __future__ import annotations

from impl.testing.conformance.adapter import Arg, EngineAdapter, OpAdapter

RUNTIME = "sglang.kernels.ops.attention.dsv4.unified_kv_kernels.runtime"
ROPE = "sglang.kernels.ops.attention.deepseek_v4_rope"
VERIFY_WINDOW = "sglang.kernels.ops.speculative.dspark.dspark_verify_window"

ADAPTER = EngineAdapter(
    name="sglang",
    package="sglang",
    root_hint="sglang's python/ directory (holds the sglang package)",
    # the server stack and platform helpers its kernel modules import at module level
    stubs=("sglang.srt", "sglang.kernels.ops.quantization", "aiter", "msgspec", "sgl_kernel"),
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
