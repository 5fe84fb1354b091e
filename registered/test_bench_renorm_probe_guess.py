"""impl.bench.renorm_probe_guess: the real probe and first pass over row families, what the first compaction
would find, and a model of the finish's reads. The model must land where the kernels do (the pivot inside its
final range), and the table's shares must be consistent with each other."""
from __future__ import annotations

import torch

from ci.registration import register
from impl.bench.renorm_probe_guess import finish_reads, measure


def _pivot_key(x: torch.Tensor, p: float) -> int:
    """Top-p's pivot by the sort-based rule (docs/design.md §3.9), as an int key."""
    ascending = x.sort().values
    at = int((ascending.cumsum(0) < (1 - p) * x.sum()).sum().clamp(max=len(x) - 1))
    return int(ascending[at].float().view(torch.int32))


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=2)
def test_the_finish_model_ends_on_a_range_holding_the_pivot():
    g = torch.Generator().manual_seed(4)
    x = torch.softmax(3 * torch.randn(5000, generator=g), 0).double()
    keys = x.float().view(torch.int32).to(torch.int64)
    for p in (0.5, 0.9, 0.95):
        pivot, target = _pivot_key(x, p), (1 - p) * float(x.sum())
        top = int(keys.max()) + 1
        for first_end in (top, pivot + 1, int(keys.min()) + 4):
            reads, lo, hi = finish_reads(keys, x, 0, top, first_end, 0.0, target, 16)
            assert lo <= pivot < hi, (p, first_end, lo, pivot, hi)
            assert reads >= len(x), "the first pass reads every candidate"
            assert int(((keys >= lo) & (keys < hi)).sum()) <= 16 or hi - lo == 1
    assert finish_reads(keys, x, 0, int(keys.max()) + 1, 1 << 30, 0.0, 0.5, len(x)) == (0, 0, int(keys.max()) + 1)
    # a first split ending far below the pivot, its last sub-range proper empty: the keys past its end count there
    light = 2.0 ** -20 * (1 + 0.2 * torch.rand(48, generator=g, dtype=torch.float64))
    heavy = 0.05 * (1 + torch.rand(16, generator=g, dtype=torch.float64))
    x = torch.cat([light, heavy]).float().double()
    keys = x.float().view(torch.int32).to(torch.int64)
    lo = int(keys[:48].min())
    first_end = lo + 4 * (int(keys[:48].max()) + 1 - lo)
    pivot = _pivot_key(x, 0.5)
    assert pivot >= first_end
    reads, got_lo, got_hi = finish_reads(keys, x, lo, int(keys.max()) + 1, first_end, 0.0, 0.5 * float(x.sum()), 2)
    assert got_lo <= pivot < got_hi, (got_lo, pivot, got_hi)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=40)
def test_the_table_is_consistent_on_small_rows():
    results = measure(rows=2, batch=256, ps=(0.9,), families=["softmax3", "uniform"], vocab=4096, probe_budget=16)
    whole = measure(rows=2, batch=256, ps=(0.9,), families=["softmax3", "uniform"], vocab=4096, probe_budget=16,
                    probe_trim=False)
    by, by_whole = {r["family"]: r for r in results}, {r["family"]: r for r in whole}
    for r in results + whole:
        assert r["taken"] <= min(r["held"], r["ends"], r["fit"]), r
        assert r["regions"] >= 2 and r["room"] > 0, r
    for r in whole:  # ranges to the row's end: every kept key is a candidate
        assert r["trimmed"] == 0 and r["ends"] == 1 and r["cands_median"] >= r["kept_median"], r
    # softmax3 rows keep about 180 keys here, past a budget of 16: trimmed, and fewer candidates for it
    assert by["softmax3"]["taken"] == by_whole["softmax3"]["taken"] == 1.0, (by["softmax3"], by_whole["softmax3"])
    assert by["softmax3"]["trimmed"] == 1 and by["softmax3"]["cands_median"] < by_whole["softmax3"]["cands_median"]
    # a uniform row (every key one value): every key is kept, so every key is a candidate
    assert by["uniform"]["kept_median"] == by["uniform"]["cands_median"] == 4096, by["uniform"]
