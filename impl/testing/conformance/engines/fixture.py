"""The fixture engine's adapters (``registered/fixtures/engine_tree``, self-written): ``fixture``
maps our ops to its correct functions, ``fixture-buggy`` to its planted bugs (one per op family;
the kit's tests swap in the others with ``EngineAdapter.with_function``)."""
from __future__ import annotations

from impl.testing.conformance.adapter import Arg, EngineAdapter, OpAdapter
from impl.testing.conformance.meta_adapter import MetadataAdapter, MetaPath

RING = "toyengine.ops.kv.ring_write"
LAYOUT = "toyengine.ops.spec.commit_layout"
RING_META = "toyengine.attention.ring_meta"

_VERIFY = (Arg("slots", "req_pool_indices"), Arg("committed", "prefix_lens"), Arg("layout"))
RING_META_BUILDER = MetadataAdapter(
    name="ring_meta",
    module=RING_META, builder="ToyBackend.attach_ring_meta",
    fields=(("state_slot", "ring.slot"), ("chunk_start", "ring.start"), ("cu_q", "ring.qstart"),
            ("final_pos", "ring.last")),
    paths=(MetaPath("verify uniform", "ToyBackend.plan_verify", _VERIFY, "uniform"),
           MetaPath("verify ragged eager", "ToyBackend.plan_verify", _VERIFY, "ragged-eager"),
           MetaPath("verify ragged graph", "ToyBackend.plan_verify", _VERIFY, "ragged-graph")),
    standin=(("verify_rows", "rows"), ("upload", "to-device"), ("plan_extend", "forward-to-builder")),
    layout_attrs=(("lens", "verify_lens"), ("real", "real_lens"), ("tier", "tier")),
    values=(("toyengine.serving.platform.on_rocm", "is-platform:hip"),),
    count_arg="count", lens_arg="extend_lens",
)
# planted metadata mistakes -> (builder, {path: entry}) the tests swap in
META_MISTAKES = {
    "sync-dropped-on-hip-target": ("ToyBackend.attach_ring_meta_fast_everywhere", {}),
    "padded-tier-as-count": (None, {"verify ragged graph": "ToyBackend.plan_verify_tier_as_count"}),
    "chunk-start-off-by-one": ("ToyBackend.attach_ring_meta_start_off_by_one", {}),
}

ADAPTER = EngineAdapter(
    name="fixture",
    package="toyengine",
    root_hint="registered/fixtures/engine_tree",
    stubs=("toyengine.serving",),  # needs the native runtime; unrelated to the kernels
    metadata=(RING_META_BUILDER,),
    ops=(
        OpAdapter(op="scatter_into_unified", module=RING, function="copy_rows_to_cache",
                  args=(Arg("rows", "kv"), Arg("dest_index", "loc"), Arg("cache", "unified")),
                  claims=("core", "§10.3")),
        OpAdapter(op="store_swa_into_unified", module=RING, function="store_window_rows",
                  args=(Arg("rows", "kv"), Arg("slot_ids", "state_slot"), Arg("token_pos", "positions"),
                        Arg("cache", "unified"), Arg("span", "window"), Arg("slot_rows", "ring"),
                        Arg("last_pos", "final_pos")),
                  claims=("core", "§10.3")),
        OpAdapter(op="build_commit_inject_layout", module=LAYOUT, function="verify_commit_layout",
                  args=(Arg("slots", "req_pool_indices"), Arg("prefix", "prefix_lens"), Arg("accepted", "commit_lens"),
                        Arg("width", "stride"), Arg("slot_rows", "ring")),
                  outputs=("pos", "loc")),
        # moved away in this tree: reported "not found at this commit"
        OpAdapter(op="unified_inject_loc", module="toyengine.ops.kv.inject", function="inject_locations",
                  args=(Arg("positions"), Arg("state_slot"), Arg("ring"), Arg("window"))),
    ),
)

BUGS = {  # op -> the planted bug the buggy adapter runs (the tests cover every entry of BUG_FUNCTIONS)
    "scatter_into_unified": "copy_rows_to_cache_no_skip",
    "store_swa_into_unified": "store_window_rows_wrong_stride",
    "build_commit_inject_layout": "verify_commit_layout_gate_off_by_one",
}
BUG_FUNCTIONS = {
    "copy_rows_to_cache_no_skip": "scatter_into_unified",
    "store_window_rows_trim_off_by_one": "store_swa_into_unified",
    "store_window_rows_wrong_stride": "store_swa_into_unified",
    "verify_commit_layout_gate_off_by_one": "build_commit_inject_layout",
}


def _buggy() -> EngineAdapter:
    adapter = ADAPTER
    for op, function in BUGS.items():
        adapter = adapter.with_function(op, function)
    return adapter.__class__(**{**adapter.__dict__, "name": "fixture-buggy"})


BUGGY = _buggy()
