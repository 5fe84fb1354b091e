"""Unified ring and paged pool behind one contract, and the target-hidden injector (docs/design.md §5, §6).

Both pools and a dict-based oracle receive the same prefill and verify
injections; what attention gathers must agree (unified vs paged bitwise, both vs
the float64 oracle within bf16 rounding). Invariants 1-7 and 11 are pinned here.
"""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.gates import gate_value
from impl.platform import emulate
from impl.pools import PagedKVPool, UnifiedKVPool, make_pool
from impl.prefill_metadata import build_prefill_metadata
from impl.spec.injector import TargetHiddenInjector
from impl.sync_detector import count_syncs
from impl.validation import check_mode
from reference import spec as ref_spec
from reference.bits import bits_view
from reference.ops_ring import fused_norm_rope_ as ref_norm_rope
from reference.pools import DictPool
from registered.spec_fixtures import NORM_ROPE_TOL, norm_weights, poison_, rope_tables, small_config

HIDDEN = 12
LAYERS = 2

pytestmark = pytest.mark.usefixtures("value_checks_off")


# These tests build their inputs on the CPU and run there (CPU CI: the Triton interpreter).
# Pools on a GPU are covered by e2e-gpu (lossless decode through both pools) and
# components-gpu (the verify step captured in a CUDA graph).


class Harness:
    """One config, projection weights and rope tables; builds pools and matching injectors."""

    def __init__(self, seed: int = 0, **cfg_kw):
        self.cfg = small_config(**cfg_kw)
        self.gen = torch.Generator().manual_seed(seed)
        self.weights = [torch.randn(HIDDEN, self.cfg.head_dim, generator=self.gen) for _ in range(LAYERS)]
        self.norms = norm_weights(LAYERS, self.cfg.head_dim, self.gen)
        self.cos, self.sin = rope_tables(256, self.cfg.rope_dim)
        self.eps = 1e-6

    def project(self, layer, hidden):
        return (hidden.float() @ self.weights[layer]).to(torch.bfloat16)

    def pool(self, kind, poison=True):
        pool = make_pool(self.cfg, num_layers=LAYERS, kind=kind)
        if poison:
            for layer in range(LAYERS):
                poison_(pool.buffer(layer), self.gen)
        return pool

    def injector(self, pool):
        return TargetHiddenInjector(pool, norm_weights=self.norms, eps=self.eps, cos=self.cos, sin=self.sin,
                                    project=self.project)

    def ref_pool(self):
        return DictPool(window=self.cfg.window, head_dim=self.cfg.head_dim, rope_dim=self.cfg.rope_dim)

    def ref_kw(self):
        return dict(norm_weights=self.norms, eps=self.eps, cos=self.cos, sin=self.sin)

    def hidden(self, n):
        return torch.randn(n, HIDDEN, generator=self.gen)

    def prefill_meta(self, prefix, ext, slots):
        with emulate("cuda"):
            return build_prefill_metadata(torch.tensor(prefix), torch.tensor(ext, dtype=torch.int32),
                                          torch.tensor(slots), window=self.cfg.window, path="ragged-eager",
                                          algorithm="dspark")


def _live_positions(seq_len, window):
    return list(range(max(0, seq_len - window), seq_len))


def _compare_pools(h, pools, ref, seq_lens, slots):
    for layer in range(LAYERS):
        for slot, seq in zip(slots, seq_lens):
            live = _live_positions(seq, h.cfg.window)
            if not live:
                continue
            pos = torch.tensor(live)
            got = [p.gather(layer, slot, pos) for p in pools]
            for other in got[1:]:
                assert torch.equal(bits_view(got[0]), bits_view(other)), (layer, slot, live)
            want = ref.gather(layer, [slot] * len(live), live)
            torch.testing.assert_close(got[0].float(), want.float(), **NORM_ROPE_TOL)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=25)
@pytest.mark.parametrize("seed", [0, 1])
def test_unified_and_paged_agree_over_prefill_and_verify_steps(seed):
    h = Harness(seed)
    pools = [h.pool("unified"), h.pool("paged")]
    injectors = [h.injector(p) for p in pools]
    ref = h.ref_pool()
    slots = [2, 0, 3]
    ext = [13, 5, 1]  # 13 > window: only the last 8 survive (wraparound of the ring)
    meta = h.prefill_meta([0, 0, 0], ext, slots)
    hidden = h.hidden(meta.num_tokens)
    for inj in injectors:
        inj.inject_prefill(hidden, positions=meta.positions, state_slot=meta.state_slot, final_pos=meta.final_pos)
    kv_rows = [h.project(layer, hidden) for layer in range(LAYERS)]
    ref_spec.inject_prefill(ref, range(LAYERS), kv_rows, meta.positions, meta.state_slot, meta.final_pos, **h.ref_kw())
    seq = list(ext)
    _compare_pools(h, pools, ref, seq, slots)

    stride = h.cfg.verify_rows("target")
    for step in range(6):
        commit = torch.randint(0, stride + 1, (3,), generator=h.gen)
        prefix = torch.tensor(seq)
        hidden = h.hidden(3 * stride)
        for inj in injectors:
            inj.inject_verify(hidden, req_pool_indices=torch.tensor(slots), prefix_lens=prefix, commit_lens=commit)
        kv_rows = [h.project(layer, hidden) for layer in range(LAYERS)]
        ref_spec.inject_verify(ref, range(LAYERS), kv_rows, slots, prefix.tolist(), commit.tolist(), stride,
                               **h.ref_kw())
        seq = [s + int(c) for s, c in zip(seq, commit)]
        _compare_pools(h, pools, ref, seq, slots)
    paged = pools[1]
    for slot in slots:
        assert len(paged.live_positions(slot)) <= h.cfg.ring  # eviction keeps a slot within one ring


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=8)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_untouched_and_skipped_rows_are_bitwise_unchanged(kind):
    h = Harness(5)
    pool = h.pool(kind)
    before = [pool.buffer(layer).clone() for layer in range(LAYERS)]
    inj = h.injector(pool)
    # prefill: request in slot 1 with 20 tokens (12 trimmed), request in slot 3 with 4
    meta = h.prefill_meta([0, 6], [20, 4], [1, 3])
    hidden = h.hidden(meta.num_tokens)
    loc = inj.inject_prefill(hidden, positions=meta.positions, state_slot=meta.state_slot, final_pos=meta.final_pos)
    written = loc[loc >= 0].to(torch.int64)
    assert int((loc < 0).sum()) == 12
    for layer in range(LAYERS):
        buf = pool.buffer(layer)
        untouched = torch.ones(buf.shape[0], dtype=torch.bool)
        untouched[written] = False
        assert torch.equal(bits_view(buf[untouched]), bits_view(before[layer][untouched]))  # invariant 6
        # written rows hold the normalised, rotated projection of their token
        kv = h.project(layer, hidden)[loc >= 0]
        want = kv.clone()
        pos = meta.positions[loc >= 0]
        ref_norm_rope(want, h.norms[layer], h.eps, h.cos, h.sin, pos, rope_dim=h.cfg.rope_dim)
        torch.testing.assert_close(buf[written].float(), want.float(), **NORM_ROPE_TOL)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=8)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_prefill_trim_keeps_min_extend_window_per_request(kind):
    h = Harness(7)
    pool = h.pool(kind, poison=False)
    inj = h.injector(pool)
    ext = [0, 3, 8, 21]  # empty, short, exactly the window, beyond it
    slots = [0, 1, 2, 3]
    prefix = [5, 0, 2, 17]
    meta = h.prefill_meta(prefix, ext, slots)
    loc = inj.inject_prefill(h.hidden(meta.num_tokens), positions=meta.positions, state_slot=meta.state_slot,
                             final_pos=meta.final_pos)
    r = meta.token_batch_index
    for i, e in enumerate(ext):
        kept = loc[(r == i) & (loc >= 0)]
        assert kept.numel() == min(e, h.cfg.window)  # invariant 4
        kept_pos = meta.positions[(r == i) & (loc >= 0)].tolist()
        assert kept_pos == list(range(prefix[i] + e - min(e, h.cfg.window), prefix[i] + e))
        if kind == "unified":  # invariant 1
            assert ((kept >= slots[i] * h.cfg.ring) & (kept < (slots[i] + 1) * h.cfg.ring)).all()
    nonneg = loc[loc >= 0].tolist()
    assert len(nonneg) == len(set(nonneg))  # invariant 2


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=8)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_verify_writes_min_commit_stride_rows(kind):
    h = Harness(9, gamma=4)
    pool = h.pool(kind, poison=False)
    inj = h.injector(pool)
    stride = h.cfg.verify_rows("target")
    slots = torch.tensor([3, 1, 0, 2])
    prefix = torch.tensor([0, 7, 30, 12])
    commit = torch.tensor([0, 2, stride, stride + 3])  # commit >= stride writes the whole row
    with check_mode(False):  # commit > stride is clamped (docs/design.md §3.4); check mode would call it a bug
        positions, loc = inj.inject_verify(h.hidden(4 * stride), req_pool_indices=slots, prefix_lens=prefix,
                                           commit_lens=commit)
    for r in range(4):
        row = loc[r * stride:(r + 1) * stride]
        assert int((row >= 0).sum()) == min(int(commit[r]), stride)  # invariant 3
        assert (row[: min(int(commit[r]), stride)] >= 0).all()
    # invariant 5: positions do not depend on the commit gate
    positions2, _ = pool.locate_commit(slots, prefix, torch.zeros(4, dtype=torch.int64), stride=stride)
    assert torch.equal(positions, positions2)
    assert positions.tolist() == [int(p) + c for p in prefix for c in range(stride)]


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=8)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_ragged_verify_injection_matches_the_uniform_layout(kind):
    h = Harness(11, gamma=3)
    stride = h.cfg.verify_rows("target")
    slots = torch.tensor([2, 0, 1])
    prefix = torch.tensor([4, 9, 0])
    verify_lens = torch.tensor([4, 1, 3], dtype=torch.int32)
    commit = torch.tensor([3, 1, 2])
    start = torch.tensor([0, 4, 5], dtype=torch.int32)
    ragged_hidden = h.hidden(int(verify_lens.sum()))
    # the same rows laid out [bs, stride], columns past verify_len filled with noise
    uniform_hidden = h.hidden(3 * stride)
    for r in range(3):
        n = int(verify_lens[r])
        uniform_hidden[r * stride: r * stride + n] = ragged_hidden[int(start[r]): int(start[r]) + n]
    a, b = h.pool(kind, poison=False), h.pool(kind, poison=False)
    h.injector(a).inject_verify_ragged(ragged_hidden, req_pool_indices=slots, prefix_lens=prefix, commit_lens=commit,
                                       verify_lens=verify_lens, extend_start_loc=start)
    h.injector(b).inject_verify(uniform_hidden, req_pool_indices=slots, prefix_lens=prefix, commit_lens=commit)
    for layer in range(LAYERS):
        for r in range(3):
            pos = torch.arange(int(prefix[r]), int(prefix[r]) + int(commit[r]))
            got, want = a.gather(layer, int(slots[r]), pos), b.gather(layer, int(slots[r]), pos)
            assert torch.equal(bits_view(got), bits_view(want))


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_empty_injection_is_a_noop(kind):
    h = Harness(13)
    pool = h.pool(kind)
    before = [pool.buffer(layer).clone() for layer in range(LAYERS)]
    inj = h.injector(pool)
    e64 = torch.zeros(0, dtype=torch.int64)
    loc = inj.inject_prefill(h.hidden(0), positions=e64, state_slot=e64, final_pos=e64)
    assert loc.numel() == 0
    _, loc = inj.inject_verify(h.hidden(0), req_pool_indices=e64, prefix_lens=e64, commit_lens=e64)
    assert loc.numel() == 0
    inj.inject_verify_ragged(h.hidden(0), req_pool_indices=e64, prefix_lens=e64, commit_lens=e64,
                             verify_lens=e64, extend_start_loc=e64)
    for layer in range(LAYERS):  # invariant 11
        assert torch.equal(bits_view(pool.buffer(layer)), bits_view(before[layer]))


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=4)
def test_unified_injection_is_sync_free_and_paged_is_not():
    h = Harness(15)
    slots, prefix, commit = torch.tensor([1, 2]), torch.tensor([3, 40]), torch.tensor([2, 4])
    stride = h.cfg.verify_rows("target")
    meta = h.prefill_meta([0, 0], [5, 11], [1, 2])
    unified = h.injector(h.pool("unified"))
    with count_syncs() as log:
        unified.inject_verify(h.hidden(2 * stride), req_pool_indices=slots, prefix_lens=prefix, commit_lens=commit)
        unified.inject_prefill(h.hidden(meta.num_tokens), positions=meta.positions, state_slot=meta.state_slot,
                               final_pos=meta.final_pos)
    assert log.count == 0, log
    paged = h.injector(h.pool("paged"))
    with count_syncs() as log:
        paged.inject_verify(h.hidden(2 * stride), req_pool_indices=slots, prefix_lens=prefix, commit_lens=commit)
    assert log.count > 0  # paged allocation is host bookkeeping (documented as not graph safe)


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=4)
def test_paged_release_returns_rows_and_clears_the_table():
    h = Harness(17)
    pool = h.pool("paged", poison=False)
    inj = h.injector(pool)
    total = pool.free_rows
    assert total == h.cfg.num_slots * h.cfg.ring
    meta = h.prefill_meta([0, 0], [30, 6], [0, 3])  # 30 tokens, far beyond the window
    inj.inject_prefill(h.hidden(meta.num_tokens), positions=meta.positions, state_slot=meta.state_slot,
                       final_pos=meta.final_pos)
    assert pool.free_rows == total - h.cfg.window - 6
    assert pool.live_positions(0) == list(range(30 - h.cfg.window, 30))
    # many verify steps on slot 3: eviction keeps it within one ring
    seq = 6
    for _ in range(10):
        inj.inject_verify(h.hidden(h.cfg.verify_rows("target")), req_pool_indices=torch.tensor([3]),
                          prefix_lens=torch.tensor([seq]), commit_lens=torch.tensor([3]))
        seq += 3
        assert len(pool.live_positions(3)) <= h.cfg.ring
    pool.release(0)
    pool.release(3)
    assert pool.free_rows == total
    assert (pool.table == -1).all()
    assert (pool.gather(0, 0, torch.arange(30)).float() == 0).all()
    pool.release(1)  # releasing an empty slot is fine


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=3)
def test_paged_pool_reports_exhaustion_clearly():
    cfg = small_config()
    pool = PagedKVPool(cfg, num_layers=1, num_rows=4)
    with pytest.raises(RuntimeError, match="paged pool out of rows"):
        pool.locate(0, torch.arange(5))
    with pytest.raises(ValueError, match="out of range"):
        PagedKVPool(cfg, num_layers=1, max_positions=8).locate(0, torch.tensor([9]))


@register(suite="components", hardware="cpu", schedule="per-commit", est_time=3)
def test_unified_geometry_and_read_loc():
    cfg = small_config(num_slots=3)
    pool = UnifiedKVPool(cfg, num_layers=2, compress_rows=5)
    assert pool.get_unified_kv(1).shape == (3 * cfg.ring + 5, cfg.head_dim)
    assert pool.get_unified_kv(0).dtype == torch.bfloat16
    pos = torch.tensor([0, 5, cfg.ring, cfg.ring + 7, 3 * cfg.ring + 1])
    assert pool.read_loc(2, pos).tolist() == [2 * cfg.ring + int(p) % cfg.ring for p in pos]
    assert pool.ring >= cfg.window + cfg.num_draft_tokens - 1  # invariant 10


# The kv_backend gate picks the pool; both variants run per commit.
@register(suite="components", hardware="cpu", schedule="per-commit", est_time=5,
          env={"unified": {"DSPARK_KV_BACKEND": "unified"}, "paged": {"DSPARK_KV_BACKEND": "paged"}})
def test_make_pool_follows_the_kv_backend_gate():
    h = Harness(19)
    pool = make_pool(h.cfg, num_layers=LAYERS)
    assert pool.kind == gate_value("kv_backend")
    ref = h.ref_pool()
    meta = h.prefill_meta([0, 3], [10, 4], [1, 2])
    hidden = h.hidden(meta.num_tokens)
    h.injector(pool).inject_prefill(hidden, positions=meta.positions, state_slot=meta.state_slot,
                                    final_pos=meta.final_pos)
    ref_spec.inject_prefill(ref, range(LAYERS), [h.project(i, hidden) for i in range(LAYERS)], meta.positions,
                            meta.state_slot, meta.final_pos, **h.ref_kw())
    _compare_pools(h, [pool], ref, [10, 7], [1, 2])
