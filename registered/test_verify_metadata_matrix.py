"""Verify metadata over platform x algorithm x layout path x KV backend, and the sync policy table.

The expected syncs come from ``reference.verify_metadata.expected_sync_kinds``,
which restates the field rule independently of ``impl/sync_policy.py``. Removing
the HIP + MTP gate from the table (letting HIP MTP pass output_size) fails
``test_hip_mtp_target_verify_keeps_the_sync`` and the hip-mtp cells of
``test_metadata_matrix`` and ``test_policy_table_matches_field_rule``.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from ci.registration import register
from impl import sync_policy
from impl.gates import GATES, gate_value
from impl.platform import current_platform, emulate
from impl.pools import make_pool
from impl.sync_detector import count_syncs
from impl.verify_metadata import RaggedVerifyLayout, build_verify_metadata
from reference.verify_metadata import expected_sync_kinds, field_rule_allows_output_size, token_metadata
from registered.spec_fixtures import small_config

PLATFORMS = ("cuda", "hip")
ALGORITHMS = ("none", "mtp", "dspark")
PATHS = ("uniform", "ragged-eager", "ragged-graph")
BACKENDS = ("unified", "paged")

pytestmark = pytest.mark.usefixtures("value_checks_off")


def _batch(seed: int, cfg, bs: int = 3):
    gen = torch.Generator().manual_seed(seed)
    rows = cfg.verify_rows("target")
    prefix = torch.randint(0, 40, (bs,), generator=gen)
    slots = torch.randperm(cfg.num_slots, generator=gen)[:bs]
    verify_lens = torch.randint(0, rows + 1, (bs,), generator=gen).to(torch.int32)
    verify_lens[0] = rows  # at least one full request
    return prefix, slots, verify_lens


def _layout(path, verify_lens, cfg):
    if path == "uniform":
        return None
    if path == "ragged-eager":
        return RaggedVerifyLayout(verify_lens)
    return RaggedVerifyLayout.for_graph(verify_lens, cfg)


def _expected(path, prefix, slots, verify_lens, cfg, layout):
    rows = cfg.verify_rows("target")
    ext = [rows] * len(prefix) if path == "uniform" else verify_lens.tolist()
    tier = layout.tier if path == "ragged-graph" else None
    padded_bs = layout.padded_bs if path == "ragged-graph" else None
    return token_metadata(prefix.tolist(), ext, slots.tolist(), window=cfg.window, tier=tier, padded_bs=padded_bs)


def _assert_matches(meta, want):
    assert meta.positions.tolist() == want["positions"]
    assert meta.seq_lens_causal.tolist() == want["seq_lens_causal"]
    assert meta.req_indices.tolist() == want["req_indices"]
    assert meta.state_slot.tolist() == want["req_indices"]
    assert meta.final_pos.tolist() == want["final_pos"]
    assert meta.is_padding.tolist() == want["is_padding"]
    assert meta.token_batch_index.tolist() == want["token_batch_index"]
    assert meta.extend_start_loc.tolist() == want["extend_start_loc"]
    assert meta.seq_lens.tolist() == want["seq_lens"]
    assert meta.num_tokens == want["num_tokens"]
    assert (meta.seq_lens_causal.to(torch.int64) == meta.positions + 1).all()  # invariant 9
    if "padded_lens" in want:
        assert meta.padded_lens.tolist() == want["padded_lens"]
        assert int(meta.padded_lens.sum()) == meta.num_tokens  # invariant 8


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("platform", PLATFORMS)
def test_metadata_matrix(platform, algorithm, path, backend):
    cfg = small_config(gamma=3)
    for seed in range(3):
        prefix, slots, verify_lens = _batch(seed, cfg)
        layout = _layout(path, verify_lens, cfg)
        with emulate(platform):
            with count_syncs() as log:
                meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout,
                                             algorithm=algorithm)
        # metadata equals the oracle exactly
        _assert_matches(meta, _expected(path, prefix, slots, verify_lens, cfg, layout))
        # the syncs are exactly what the field rule says (independent of the impl table)
        assert log.kinds() == expected_sync_kinds(platform, algorithm, path), (platform, algorithm, path)
        assert meta.exact == (path != "ragged-graph")
        assert meta.used_output_size == (path == "ragged-graph" or field_rule_allows_output_size(platform, algorithm))
        # the metadata drives either KV backend: padding skipped, locs in their slot, unique
        pool = make_pool(cfg, num_layers=1, kind=backend)
        loc = pool.locate(meta.state_slot, meta.positions, final_pos=meta.final_pos)
        assert (loc[meta.is_padding] == -1).all()  # invariant 7
        kept = loc[loc >= 0].tolist()
        assert len(kept) == len(set(kept))  # invariant 2
        if backend == "unified":  # invariant 1
            slot = meta.state_slot.to(torch.int64)
            inside = (loc.to(torch.int64) >= slot * cfg.ring) & (loc.to(torch.int64) < (slot + 1) * cfg.ring)
            assert ((loc == -1) | inside).all()


# Catches removal of the HIP + MTP gate: if the policy table let HIP MTP pass output_size,
# used_output_size would be True and the repeat_interleave sync would vanish.
@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("path", ["uniform", "ragged-eager"])
def test_hip_mtp_target_verify_keeps_the_sync(path):
    cfg = small_config(gamma=4)
    prefix, slots, verify_lens = _batch(7, cfg)
    layout = _layout(path, verify_lens, cfg)
    with emulate("hip"):
        with count_syncs() as log:
            meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout, algorithm="mtp")
    assert not meta.used_output_size, "HIP + MTP target verify must keep the repeat_interleave sync"
    assert meta.output_size is None
    assert "repeat_interleave without output_size" in log.kinds()
    # ... while DSpark on HIP takes the shortcut on the very same batch
    with emulate("hip"):
        with count_syncs() as log:
            meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout,
                                         algorithm="dspark")
    assert meta.used_output_size and "repeat_interleave without output_size" not in log.kinds()


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_policy_table_covers_every_cell_once():
    keys = [(r.platform, r.algorithm, r.path) for r in sync_policy.POLICY]
    assert len(keys) == len(set(keys))
    assert set(keys) == {
        (p, a, path) for p in sync_policy.PLATFORMS for a in sync_policy.ALGORITHMS for path in sync_policy.PATHS
    }
    assert set(sync_policy.PLATFORMS) == set(GATES["platform"].values)
    assert set(sync_policy.ALGORITHMS) == set(GATES["spec_algorithm"].values)
    for r in sync_policy.POLICY:
        assert r.decision in sync_policy.DECISIONS and r.reason


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("platform", ("cuda", "hip", "cpu"))
def test_policy_table_matches_field_rule(platform, algorithm):
    allowed = field_rule_allows_output_size(platform, algorithm)
    for path in ("uniform", "ragged-eager"):
        decision = sync_policy.decide(platform, algorithm, path, exact_num_tokens=True)
        assert decision == (sync_policy.OUTPUT_SIZE if allowed else sync_policy.KEEP_SYNC), (platform, algorithm, path)
        # an inexact total never passes output_size, whatever the cell says
        assert sync_policy.decide(platform, algorithm, path, exact_num_tokens=False) == sync_policy.KEEP_SYNC
        assert list(sync_policy.expected_syncs(path, decision)) == expected_sync_kinds(platform, algorithm, path)
    graph = sync_policy.decide(platform, algorithm, "ragged-graph", exact_num_tokens=False)
    assert graph == sync_policy.PADDED_TIER
    assert list(sync_policy.expected_syncs("ragged-graph", graph)) == []


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=5)
def test_policy_table_is_printed_by_the_command():
    out = subprocess.run([sys.executable, "-m", "impl.sync_policy"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["platform", "algorithm", "path", "decision"]
    for r in sync_policy.POLICY:
        row = [ln for ln in lines if ln.split()[:3] == [r.platform, r.algorithm, r.path]]
        assert len(row) == 1, (r, row)
        assert r.decision in row[0] and r.reason in row[0]


# Gate-driven defaults: with no explicit platform/algorithm the builder follows the
# DSPARK_PLATFORM / DSPARK_SPEC_ALGO gates; the variants run every value per commit.
@register(suite="components", hardware="cpu", schedule="per-commit", est_time=3,
          env={"hip-mtp": {"DSPARK_PLATFORM": "hip", "DSPARK_SPEC_ALGO": "mtp"},
               "hip-dspark": {"DSPARK_PLATFORM": "hip", "DSPARK_SPEC_ALGO": "dspark"},
               "hip-none": {"DSPARK_PLATFORM": "hip", "DSPARK_SPEC_ALGO": "none"},
               "cuda-mtp": {"DSPARK_PLATFORM": "cuda", "DSPARK_SPEC_ALGO": "mtp"},
               "cpu-none": {"DSPARK_PLATFORM": "cpu", "DSPARK_SPEC_ALGO": "none"}})
def test_builder_follows_the_gates():
    platform, algorithm = current_platform().backend, gate_value("spec_algorithm")
    cfg = small_config(gamma=2)
    prefix, slots, verify_lens = _batch(3, cfg)
    for path in PATHS:
        layout = _layout(path, verify_lens, cfg)
        with count_syncs() as log:
            meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout)
        assert (meta.platform, meta.algorithm) == (platform, algorithm)
        assert log.kinds() == expected_sync_kinds(platform, algorithm, path)
        _assert_matches(meta, _expected(path, prefix, slots, verify_lens, cfg, layout))


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("role", ["target", "draft", "server"])
def test_uniform_rows_follow_the_role(role):
    for gamma in (1, 3, 5):
        cfg = small_config(gamma=gamma)
        prefix = torch.tensor([4, 0, 9])
        slots = torch.tensor([1, 3, 0])
        with emulate("cuda"):
            meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, role=role, algorithm="dspark")
        rows = gamma if role == "draft" else gamma + 1
        assert meta.extend_lens.tolist() == [rows] * 3
        assert meta.num_tokens == 3 * rows == meta.output_size
        want = token_metadata(prefix.tolist(), [rows] * 3, slots.tolist(), window=cfg.window)
        _assert_matches(meta, want)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
def test_graph_padding_over_pad_rows_and_without():
    cfg = small_config(gamma=3, capture_batch_sizes=(2, 4, 8))
    prefix = torch.tensor([5, 11, 2])
    slots = torch.tensor([2, 0, 3])
    lens = torch.tensor([4, 0, 3], dtype=torch.int32)  # a zero-length request in the middle
    for tier, padded_bs in ((8, 3), (16, 4), (16, 8), (7, 3)):
        layout = RaggedVerifyLayout(lens, tier=tier, padded_bs=padded_bs)
        with emulate("hip"), count_syncs() as log:
            meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout, algorithm="mtp")
        assert log.count == 0
        want = token_metadata(prefix.tolist(), lens.tolist(), slots.tolist(), window=cfg.window, tier=tier,
                              padded_bs=padded_bs)
        _assert_matches(meta, want)
        assert meta.output_size == tier == meta.num_tokens


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_empty_batch_is_a_noop():
    cfg = small_config()
    empty = torch.zeros(0, dtype=torch.int64)
    for path in ("uniform", "ragged-eager"):
        layout = None if path == "uniform" else RaggedVerifyLayout(empty.to(torch.int32))
        with emulate("cuda"):
            meta = build_verify_metadata(cfg, seq_lens=empty, req_pool_indices=empty, ragged=layout, algorithm="dspark")
        assert meta.num_tokens == 0 and meta.positions.numel() == 0
