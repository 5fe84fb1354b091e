"""docs/design.md §9 invariants 1-12, each pinned by a test that fails when it breaks.

(Invariant 13, lossless speculative greedy decoding, belongs to the e2e suites.)
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import impl.kernels as K
from ci.registration import register
from impl.config import SpecConfig
from impl.platform import default_device

DEV = default_device()


def _t(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype, device=DEV)


def _random_verify_batch(seed: int, bs: int, stride: int, ring: int):
    g = torch.Generator().manual_seed(seed)
    rpi = torch.randperm(bs * 2, generator=g)[:bs].to(DEV)
    prefix = torch.randint(0, 4 * ring, (bs,), generator=g).to(DEV)
    prefix[0] = ring - 1  # the next row wraps
    commit = torch.randint(0, stride + 3, (bs,), generator=g).to(DEV)
    return rpi, prefix, commit


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("ring", [128, 133])
def test_inv1_every_loc_is_minus_one_or_inside_its_slot(ring):
    """Invariant 1: every loc is -1 or in [slot*ring, (slot+1)*ring) -- commit layout and inject loc."""
    rpi, prefix, commit = _random_verify_batch(ring, 12, 6, ring)
    _, swa_loc = K.build_commit_inject_layout(rpi, prefix, commit, stride=6, ring=ring)
    slot = rpi.repeat_interleave(6).cpu()
    loc = swa_loc.cpu().long()
    assert bool(((loc == -1) | ((loc >= slot * ring) & (loc < (slot + 1) * ring))).all())
    assert bool((loc >= 0).any())
    positions = torch.arange(0, 700, 7, device=DEV)
    state_slot = (positions % 5).to(DEV)
    inject = K.unified_inject_loc(positions, state_slot, ring=ring, window=ring - 5,
                                  final_pos=torch.full_like(positions, 650)).cpu().long()
    s = state_slot.cpu()
    assert bool(((inject == -1) | ((inject >= s * ring) & (inject < (s + 1) * ring))).all())


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("ring,window", [(128, 123), (133, 128)])
def test_inv2_nonnegative_locs_are_unique(ring, window):
    """Invariant 2: non-negative locs are unique -- a long prefill whose positions span
    several ring laps is trimmed to the last `window`, so its addresses never collide."""
    meta = K.prefill_inject_meta(_t([0, 3, 1]), _t([0, 100, 255]), _t([3 * ring + 7, 40, 129]))
    positions, state_slot, final_pos = meta
    loc = K.unified_inject_loc(positions, state_slot, ring=ring, window=window, final_pos=final_pos).cpu()
    kept = loc[loc >= 0]
    assert kept.numel() == window + 40 + min(129, window)
    assert kept.unique().numel() == kept.numel()
    _, swa_loc = K.build_commit_inject_layout(*_random_verify_batch(5, 10, 6, ring), stride=6, ring=ring)
    kept = swa_loc[swa_loc >= 0].cpu()
    assert kept.unique().numel() == kept.numel()


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_inv3_rows_written_per_verify_request_is_min_commit_stride():
    """Invariant 3: committing writes min(commit_len, stride) rows per request (counted in the ring)."""
    ring, stride, d = 133, 6, 16
    rpi, prefix, commit = _random_verify_batch(3, 8, stride, ring)
    positions, swa_loc = K.build_commit_inject_layout(rpi, prefix, commit, stride=stride, ring=ring)
    unified = torch.zeros(16 * ring, d, dtype=torch.bfloat16, device=DEV)
    kv = torch.ones(positions.shape[0], d, dtype=torch.bfloat16, device=DEV)
    K.scatter_into_unified(kv, swa_loc, unified)
    written_per_slot = (unified[:, 0] != 0).reshape(16, ring).sum(1).cpu()
    for r in range(rpi.shape[0]):
        assert int(written_per_slot[int(rpi[r])]) == min(int(commit[r]), stride)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("window", [4, 9])
def test_inv4_prefill_trim_keeps_min_extend_window_tokens(window):
    """Invariant 4: a prefill store keeps exactly min(extend, window) tokens per request."""
    ring, d = window + 3, 8
    ext = _t([0, 1, window - 1, window, window + 1, 3 * window + 2])
    slots = torch.arange(ext.shape[0], device=DEV)
    positions, state_slot, final_pos = K.prefill_inject_meta(slots, _t([5, 0, 2, 7, 1, 300]), ext)
    unified = torch.zeros(ext.shape[0] * ring, d, dtype=torch.float32, device=DEV)
    kv = (torch.arange(positions.shape[0], device=DEV, dtype=torch.float32) + 1)[:, None].expand(-1, d).contiguous()
    K.store_swa_into_unified(kv, state_slot, positions, unified, window=window, ring=ring, final_pos=final_pos)
    kept = (unified[:, 0] != 0).reshape(-1, ring).sum(1).cpu()
    assert kept.tolist() == [min(int(e), window) for e in ext.cpu()]
    # the survivors are each request's *last* tokens: token t lives at its ring address
    for t in range(positions.shape[0]):
        if int(positions[t]) > int(final_pos[t]) - window:
            assert float(unified[int(state_slot[t]) * ring + int(positions[t]) % ring, 0]) == t + 1


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_inv5_positions_do_not_depend_on_commit_gate():
    """Invariant 5: positions are the same whatever commit_lens are; committed locs equal ungated ones."""
    rpi, prefix, commit = _random_verify_batch(9, 7, 5, 133)
    pos_a, loc_a = K.build_commit_inject_layout(rpi, prefix, commit, stride=5, ring=133)
    pos_b, loc_b = K.build_commit_inject_layout(rpi, prefix, torch.zeros_like(commit), stride=5, ring=133)
    pos_c, loc_c = K.build_commit_inject_layout(rpi, prefix, torch.full_like(commit, 5), stride=5, ring=133)
    assert torch.equal(pos_a, pos_b) and torch.equal(pos_a, pos_c)
    assert bool((loc_b == -1).all()) and bool((loc_c >= 0).all())
    assert torch.equal(torch.where(loc_a >= 0, loc_c, loc_a), loc_a)
    gated = K.unified_inject_loc(pos_a, rpi.repeat_interleave(5), ring=133, window=128, commit_lens=commit,
                                 verify_len=5)
    assert torch.equal(gated, loc_a)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.usefixtures("kernel_backend")
def test_inv6_skipped_and_untouched_rows_bitwise_unchanged():
    """Invariant 6: rows with loc < 0 are not written; rows nobody targets keep their bits (NaN payloads too)."""
    g = torch.Generator().manual_seed(6)
    pages, d = 40, 24
    unified = torch.randint(-(2**15), 2**15 - 1, (pages, d), generator=g, dtype=torch.int16).view(torch.bfloat16)
    unified[3] = torch.tensor(0x7FC1, dtype=torch.int16).view(torch.bfloat16)  # a NaN with a payload
    unified = unified.to(DEV)
    before = unified.clone()
    loc = _t([5, -1, 17, -1, -1, 39, 0])
    kv = torch.randn(loc.shape[0], d, generator=g).bfloat16().to(DEV)
    K.scatter_into_unified(kv, loc, unified)
    written = {5, 17, 39, 0}
    for r in range(pages):
        want = kv[loc.tolist().index(r)] if r in written else before[r]
        assert torch.equal(unified[r].view(torch.int16), want.view(torch.int16)), f"row {r}"


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_inv7_padding_rows_are_skipped():
    """Invariant 7: graph padding rows (position 0, final_pos = window) never reach the ring."""
    window, ring, d = 8, 10, 4
    positions = _t([20, 21, 0, 0, 0])
    final_pos = _t([21, 21, window, window, window])
    state_slot = _t([1, 1, 0, 0, 0])
    loc = K.unified_inject_loc(positions, state_slot, ring=ring, window=window, final_pos=final_pos)
    assert loc.cpu().tolist() == [1 * ring + 0, 1 * ring + 1, -1, -1, -1]
    unified = torch.full((2 * ring, d), -7.0, device=DEV)
    K.store_swa_into_unified(torch.ones(5, d, device=DEV), state_slot, positions, unified,
                             window=window, ring=ring, final_pos=final_pos)
    assert bool((unified[:ring] == -7.0).all())  # slot 0: padding rows wrote nothing
    assert int((unified[ring:, 0] == 1.0).sum()) == 2


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_inv8_padded_to_bucket_sums_to_tier():
    """Invariant 8: the padded verify lens sum to the tier, real rows keep their lens (pad rows absorb)."""
    g = torch.Generator().manual_seed(8)
    for _ in range(40):
        bs = int(torch.randint(0, 6, (1,), generator=g))
        lens = torch.randint(1, 7, (bs,), generator=g).to(DEV)
        padded_bs = bs + int(torch.randint(0 if bs else 1, 4, (1,), generator=g))
        tier = int(lens.sum()) + int(torch.randint(0, 15, (1,), generator=g))
        out = K.pad_verify_lens_to_bucket(lens, tier, padded_bs)
        assert out.dtype == torch.int32 and out.shape == (padded_bs,)
        assert int(out.sum()) == tier
        if padded_bs > bs:
            assert torch.equal(out[:bs].cpu(), lens.cpu().int())
            pads = out[bs:].cpu()
            assert int(pads.max() - pads.min()) <= 1 and bool((pads[:-1] >= pads[1:]).all())


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("num_tokens_extra", [None, 0, 5])
def test_inv9_seq_len_causal_is_position_plus_one(num_tokens_extra):
    """Invariant 9: seq_len_causal == position + 1 for each real prefill token (positions from prefill meta)."""
    ext, prefix = _t([3, 0, 5, 1]), _t([10, 4, 0, 127])
    rpi = _t([2, 0, 3, 1])
    total = int(ext.sum())
    num_tokens = None if num_tokens_extra is None else total + num_tokens_extra
    causal, req = K.expand_prefill_causally(prefix + ext, ext, rpi, num_tokens=num_tokens)
    positions, state_slot, _ = K.prefill_inject_meta(rpi, prefix, ext)
    assert torch.equal(causal[:total], positions + 1)
    assert torch.equal(req[:total], state_slot)
    if num_tokens_extra:
        assert bool((causal[total:] == 1).all()) and bool((req[total:] == rpi[-1]).all())


def _step_clobbers_visible_kv(window: int, gamma: int, ring: int, prefix: int) -> bool:
    """Write one verify step (positions prefix..prefix+gamma) into a ring of `ring` rows and
    report whether any KV a query of this step reads, (q - window, q] below prefix, was overwritten."""
    rows = 1 * ring
    unified = torch.full((rows, 1), -1.0, device=DEV)
    old = torch.arange(max(0, prefix - ring), prefix, device=DEV)  # ring holds the last `ring` old positions
    K.store_swa_into_unified(old.float()[:, None], torch.zeros_like(old), old, unified, window=window, ring=ring)
    new = torch.arange(prefix, prefix + gamma + 1, device=DEV)
    K.store_swa_into_unified(new.float()[:, None] + 0.5, torch.zeros_like(new), new, unified, window=window, ring=ring)
    for q in range(prefix, prefix + gamma + 1):
        for pos in range(max(0, q - window + 1), prefix):
            if float(unified[pos % ring, 0]) != pos:
                return True
    return False


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_inv10_ring_of_window_plus_draft_tokens_minus_one_is_safe_and_tight(gamma):
    """Invariant 10: ring >= window + num_draft_tokens - 1 keeps every visible row intact; one row less
    clobbers one; the config rejects the smaller ring and kernels reject ring < window + 1."""
    window = 16
    cfg = SpecConfig(gamma=gamma, window=window, head_dim=64, rope_dim=16)
    assert cfg.ring == window + cfg.num_draft_tokens - 1
    for prefix in (window + 3, 3 * cfg.ring + 1):
        assert not _step_clobbers_visible_kv(window, gamma, cfg.ring, prefix)
        if cfg.ring - 1 >= window + 1:
            assert _step_clobbers_visible_kv(window, gamma, cfg.ring - 1, prefix)
        else:  # gamma = 1: one row less is a ring of `window` rows, which the kernels refuse outright
            with pytest.raises(ValueError, match="ring"):
                _step_clobbers_visible_kv(window, gamma, cfg.ring - 1, prefix)
    with pytest.raises(ValueError, match="ring_override"):
        SpecConfig(gamma=gamma, window=window, ring_override=cfg.ring - 1)
    with pytest.raises(ValueError, match="ring"):
        K.unified_inject_loc(_t([1]), _t([0]), ring=window, window=window)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_inv11_empty_inputs_are_noops():
    """Invariant 11: every op accepts empty inputs, changes nothing and returns empty, typed outputs."""
    e = _t([])
    unified = torch.randn(6, 8, device=DEV)
    before = unified.clone()
    K.scatter_into_unified(torch.empty(0, 8, device=DEV), e, unified)
    K.store_swa_into_unified(torch.empty(0, 8, device=DEV), e, e, unified, window=2, ring=3, final_pos=e)
    assert torch.equal(unified, before)
    kv = torch.empty(0, 8, dtype=torch.bfloat16, device=DEV)
    table = torch.zeros(4, 2, device=DEV)
    assert K.fused_norm_rope_(kv, torch.ones(8, dtype=torch.bfloat16, device=DEV), 1e-6, table, table, e,
                              rope_dim=4) is kv
    pos, loc = K.build_commit_inject_layout(e, e, e, stride=4, ring=8)
    assert pos.shape == (0,) and pos.dtype == torch.int64 and loc.shape == (0,) and loc.dtype == torch.int32
    assert K.unified_inject_loc(e, e, ring=3, window=2, final_pos=e).shape == (0,)
    assert all(t.shape == (0,) for t in K.expand_prefill_causally(e, e, e, num_tokens=0))
    assert all(t.shape == (0,) for t in K.expand_prefill_causally(e, e, e))
    assert all(t.shape == (0,) for t in K.prefill_inject_meta(e, e, e))
    assert K.pad_verify_lens_to_bucket(e, 0, 0).shape == (0,)
    probs = torch.empty(0, 16, device=DEV)
    assert K.top_k_renorm(probs, 3).shape == (0, 16) and K.top_p_renorm(probs, 0.5).shape == (0, 16)


class _RepeatInterleaveAudit(TorchDispatchMode):
    """Records (output_size, sum(repeats)) for every repeat_interleave given an output_size."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.repeat_interleave.Tensor and kwargs.get("output_size") is not None:
            self.calls.append((int(kwargs["output_size"]), int(args[0].sum())))
        if func is torch.ops.aten.repeat_interleave.self_Tensor and kwargs.get("output_size") is not None:
            self.calls.append((int(kwargs["output_size"]), int(args[1].sum())))
        return func(*args, **kwargs)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=4)
@pytest.mark.parametrize("ext,extra", [([3, 0, 2], 0), ([3, 0, 2], 4), ([0, 0], 3), ([7], 1), ([], 0)])
def test_inv12_output_size_equals_sum_of_repeats(ext, extra):
    """Invariant 12: whenever expand_prefill_causally passes output_size, it equals sum(repeats)
    (a padded token count passed straight through would be an out-of-bounds write on HIP)."""
    e = _t(ext)
    num_tokens = sum(ext) + extra
    audit = _RepeatInterleaveAudit()
    with audit:
        K.expand_prefill_causally(e + 2, e, torch.arange(len(ext), device=DEV), num_tokens=num_tokens)
    assert audit.calls, "the graph path must pass output_size"
    for output_size, total in audit.calls:
        assert output_size == total == num_tokens


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_negative_positions_never_written_outside_check_mode():
    """Outside check mode a negative position is skipped (loc -1), never wrapped into another slot."""
    assert K.unified_inject_loc(_t([5, -2]), _t([1, 1]), ring=8, window=4).tolist() == [13, -1]
    unified = torch.zeros(16, 8, device=DEV).bfloat16()
    kv = torch.randn(4, 8, device=DEV).bfloat16()
    K.store_swa_into_unified(kv, _t([0, 0, 1, 1]), _t([0, -1, 2, 3]), unified, window=4, ring=6)
    changed = (unified != 0).any(1).nonzero().flatten().tolist()
    assert changed == [0, 6 + 2, 6 + 3]


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_out_of_range_loc_never_written_outside_check_mode():
    kv = torch.randn(4, 8, device=DEV).bfloat16()
    big = torch.zeros(32, 8, device=DEV).bfloat16()  # the first 16 rows alias `unified`'s size
    view = big[:16]
    K.scatter_into_unified(kv, _t([1, 16, 40, -1]), view)
    assert bool((big[16:] == 0).all()), "a loc past the end wrote outside the tensor"
    assert torch.equal(view[1], kv[0])
