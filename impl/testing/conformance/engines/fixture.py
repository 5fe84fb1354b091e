"""The fixture engine's adapters (``registered/fixtures/engine_tree``, self-written): ``fixture``
maps our ops to its correct functions, ``fixture-buggy`` to its planted bugs (one per op family;
the kit's tests swap in the others with ``EngineAdapter.with_function``)."""
from __future__ import annotations

from impl.testing.conformance.adapter import Arg, EngineAdapter, OpAdapter

RING = "toyengine.ops.kv.ring_write"
LAYOUT = "toyengine.ops.spec.commit_layout"

ADAPTER = EngineAdapter(
    name="fixture",
    package="toyengine",
    root_hint="registered/fixtures/engine_tree",
    stubs=("toyengine.serving",),  # needs the native runtime; unrelated to the kernels
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
