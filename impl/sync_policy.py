"""The sync-elision policy: one data table, consulted only by the metadata builder (docs/design.md §4).

Background. Building per-token metadata expands per-request lengths with
``repeat_interleave``. Without ``output_size`` the op must read the total back
to the host (a device-to-host sync). Passing ``output_size`` drops the sync but
then the value MUST equal ``sum(repeats)`` (invariant 12): a wrong value is an
out-of-bounds write on HIP and a device assert on CUDA. In the field, dropping
this sync made MTP/EAGLE target verify fault on AMD; the fix gated the shortcut
to DSpark there. This module is that gate, written as data and tested per cell.

What "exact" means. ``exact_num_tokens`` is True when the builder's token count
equals the sum of the *real* (unpadded) per-request lengths and that count is
known on the host without trusting a device value it did not compute:

* ``uniform``: every request verifies the same number of rows, so the total is
  ``rows * bs`` in host ints. Exact, and computing it costs no sync.
* ``ragged-eager``: the total is ``int(verify_lens.sum())``. Exact, but reading
  it back is itself one sync (counted; it is not the sync this policy elides).
* ``ragged-graph``: the total is a captured token tier ``T >= sum``. Not exact.
  The builder never passes ``T`` against the real lengths (that would break
  invariant 12). It expands *padded* repeats: the real lengths plus one padding
  repeat ``T - sum`` (``expand_prefill_causally(num_tokens=T)``), which sum to
  ``T`` by construction, with ``output_size=T``; rows past the real total are
  padding (position 0, ``final_pos = window`` so the ring store skips them).
  The graph layout's per-row lengths (``pad_verify_lens_to_bucket``, over the
  captured batch size) also sum to ``T`` (invariant 8). No sync is possible
  inside a CUDA graph and none is needed: ``T`` is a host constant equal to the
  padded sum by construction; check mode verifies ``sum <= T`` before use.
  This holds on every platform and algorithm, HIP + MTP included: the field
  fault was the eager exact path, and what makes ``output_size`` dangerous -- a
  total that differs from the repeats' sum -- cannot happen here.

Decision = ``exact_num_tokens AND policy(platform, algorithm)`` on eager paths;
the padded-tier rule on the graph path. ``python -m impl.sync_policy`` prints
the table.
"""
from __future__ import annotations

from dataclasses import dataclass

from impl.cli_args import CliParser
from impl.gates import print_to_stdout
from impl.table import format_table

PLATFORMS = ("cuda", "hip", "cpu")
ALGORITHMS = ("none", "mtp", "dspark")
PATHS = ("uniform", "ragged-eager", "ragged-graph")

# Decisions (what the builder does with repeat_interleave).
OUTPUT_SIZE = "pass output_size"  # exact total: pass it, no sync
KEEP_SYNC = "keep sync"  # let repeat_interleave read the total back (one sync)
PADDED_TIER = "pass output_size (padded to tier)"  # graph: output_size = tier = sum(padded lens)
DECISIONS = (OUTPUT_SIZE, KEEP_SYNC, PADDED_TIER)

# Sync kinds (as named by impl.sync_detector) that each path performs.
SYNC_TOTAL = "item"  # ragged eager: int(verify_lens.sum())
SYNC_EXPAND = "repeat_interleave without output_size"

_CUDA = "CUDA: the total is exact, so the shortcut is safe"
_CPU = "CPU: no device to sync with; follows the CUDA rule so CPU CI runs that path"
_HIP_DSPARK = "HIP: allowed for DSpark verify (validated on MI35x)"
_HIP_MTP = "HIP: MTP/EAGLE verify faulted (GPU memory access) without this sync; keep it"
_HIP_NONE = "HIP: the shortcut is allowed only for DSpark verify; other paths keep the sync"
_GRAPH = "graph: lens padded to the tier, output_size = tier = sum(padded lens); no sync in capture"


@dataclass(frozen=True)
class PolicyRow:
    platform: str
    algorithm: str
    path: str
    decision: str
    reason: str


# THE table. One row per (platform, algorithm, path); every cell written out.
POLICY: tuple[PolicyRow, ...] = (
    PolicyRow("cuda", "none", "uniform", OUTPUT_SIZE, _CUDA),
    PolicyRow("cuda", "none", "ragged-eager", OUTPUT_SIZE, _CUDA),
    PolicyRow("cuda", "none", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("cuda", "mtp", "uniform", OUTPUT_SIZE, _CUDA),
    PolicyRow("cuda", "mtp", "ragged-eager", OUTPUT_SIZE, _CUDA),
    PolicyRow("cuda", "mtp", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("cuda", "dspark", "uniform", OUTPUT_SIZE, _CUDA),
    PolicyRow("cuda", "dspark", "ragged-eager", OUTPUT_SIZE, _CUDA),
    PolicyRow("cuda", "dspark", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("hip", "none", "uniform", KEEP_SYNC, _HIP_NONE),
    PolicyRow("hip", "none", "ragged-eager", KEEP_SYNC, _HIP_NONE),
    PolicyRow("hip", "none", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("hip", "mtp", "uniform", KEEP_SYNC, _HIP_MTP),
    PolicyRow("hip", "mtp", "ragged-eager", KEEP_SYNC, _HIP_MTP),
    PolicyRow("hip", "mtp", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("hip", "dspark", "uniform", OUTPUT_SIZE, _HIP_DSPARK),
    PolicyRow("hip", "dspark", "ragged-eager", OUTPUT_SIZE, _HIP_DSPARK),
    PolicyRow("hip", "dspark", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("cpu", "none", "uniform", OUTPUT_SIZE, _CPU),
    PolicyRow("cpu", "none", "ragged-eager", OUTPUT_SIZE, _CPU),
    PolicyRow("cpu", "none", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("cpu", "mtp", "uniform", OUTPUT_SIZE, _CPU),
    PolicyRow("cpu", "mtp", "ragged-eager", OUTPUT_SIZE, _CPU),
    PolicyRow("cpu", "mtp", "ragged-graph", PADDED_TIER, _GRAPH),
    PolicyRow("cpu", "dspark", "uniform", OUTPUT_SIZE, _CPU),
    PolicyRow("cpu", "dspark", "ragged-eager", OUTPUT_SIZE, _CPU),
    PolicyRow("cpu", "dspark", "ragged-graph", PADDED_TIER, _GRAPH),
)


def _index() -> dict[tuple[str, str, str], PolicyRow]:
    index: dict[tuple[str, str, str], PolicyRow] = {}
    for row in POLICY:
        key = (row.platform, row.algorithm, row.path)
        if key in index:
            raise ValueError(f"sync policy table has two rows for {key}")
        if row.decision not in DECISIONS:
            raise ValueError(f"sync policy row {key} has unknown decision {row.decision!r}")
        index[key] = row
    return index


_INDEX = _index()


def _check_key(platform: str, algorithm: str, path: str) -> None:
    for name, value, allowed in (
        ("platform", platform, PLATFORMS),
        ("algorithm", algorithm, ALGORITHMS),
        ("path", path, PATHS),
    ):
        if value not in allowed:
            raise ValueError(f"sync policy: {name} must be one of {list(allowed)}, got {value!r}")


def lookup(platform: str, algorithm: str, path: str) -> PolicyRow:
    """The table row for one cell (ValueError for unknown values or a missing cell)."""
    _check_key(platform, algorithm, path)
    try:
        return _INDEX[(platform, algorithm, path)]
    except KeyError:
        raise ValueError(f"sync policy table has no row for {(platform, algorithm, path)}") from None


def decide(platform: str, algorithm: str, path: str, *, exact_num_tokens: bool) -> str:
    """What the builder does: ``exact_num_tokens AND policy`` on eager paths, padded tier on graph.

    An eager path whose total is not exact always keeps the sync: an inexact
    ``output_size`` is never passed. The graph path must not claim exactness.
    """
    row = lookup(platform, algorithm, path)
    if path == "ragged-graph":
        if exact_num_tokens:
            raise ValueError(
                "sync policy: the ragged-graph path counts the padded tier, so exact_num_tokens must be False"
            )
        return row.decision
    if not exact_num_tokens:
        return KEEP_SYNC
    return row.decision


def expected_syncs(path: str, decision: str) -> tuple[str, ...]:
    """The sync kinds the builder performs for ``path`` under ``decision`` (tests pin these)."""
    _check_key("cpu", "none", path)
    total = (SYNC_TOTAL,) if path == "ragged-eager" else ()
    expand = (SYNC_EXPAND,) if decision == KEEP_SYNC else ()
    return total + expand


def format_policy_table() -> str:
    header = ("platform", "algorithm", "path", "decision", "syncs", "reason")
    rows = [(r.platform, r.algorithm, r.path, r.decision, ", ".join(expected_syncs(r.path, r.decision)) or "none",
             r.reason) for r in POLICY]
    lines = [format_table(header, rows)]
    notes = [
        "",
        "decision on eager paths = exact_num_tokens AND the cell above; an inexact total always keeps the sync.",
        "ragged-graph: lens padded to the captured tier, output_size = tier = sum(padded lens) (invariants 8, 12).",
        "prefill inject metadata (docs/design.md §3.8, impl.kernels.prefill_inject_meta) takes no total and may sync;",
        "the builders here derive state_slot/final_pos from the expansion above instead.",
    ]
    return "\n".join(lines + notes)


def main(argv: list[str] | None = None) -> int:
    """``python -m impl.sync_policy``: print the policy table; takes no arguments (a mistake: one line, exit 2)."""
    parser = CliParser(prog="python -m impl.sync_policy",
                       description="Print the sync-elision policy table (docs/design.md §4.3); takes no arguments.")
    parser.parse_args(argv)
    print_to_stdout(format_policy_table())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
