"""Out-of-contract values get the decided answer on every kernel backend (issue 17 §5, 16 §6).

With check mode off, each op below must give the documented result -- the same
on the torch backend and on Triton (the interpreter on CPU), and equal to the
oracle in ``reference/`` (or, for colliding writes, one of the rows aimed at a
slot, never a blend or garbage). With check mode on, each case raises a
ValueError naming the argument. Inputs are hand-picked so each rule is hit.
"""
from __future__ import annotations

import pytest
import torch

import impl.kernels as K
import reference.ops_layout as R
import reference.ops_ring as RR
from ci.registration import register
from impl.platform import default_device, default_kernel_backend, use_kernel_backend
from impl.validation import check_mode
from reference.bits import bits_view

BACKENDS = ["torch", default_kernel_backend()]  # triton-interpret on CPU, triton on a GPU


def _i64(values, device):
    return torch.tensor(values, dtype=torch.int64, device=device)


def _poisoned(rows, width, dtype, device):
    gen = torch.Generator().manual_seed(7)
    return (torch.randn(rows, width, generator=gen) * 1e3).to(dtype).to(device)


def _assert_one_row_each(out, before, kv, dests, label):
    """Each destination holds exactly one of the rows aimed at it; every other row is unchanged."""
    candidates: dict[int, list[int]] = {}
    for i, d in enumerate(dests):
        if d >= 0:
            candidates.setdefault(d, []).append(i)
    for row in range(out.shape[0]):
        got = bits_view(out[row])
        if row not in candidates:
            assert torch.equal(got, bits_view(before[row])), f"{label}: row {row} was not aimed at but changed"
            continue
        if not any(torch.equal(got, bits_view(kv[i])) for i in candidates[row]):
            raise AssertionError(f"{label}: row {row} holds none of the rows {candidates[row]} aimed at it "
                                 f"(a blend or garbage: {out[row][:4].tolist()} ...)")


# ---------------------------------------------------------------- colliding writes
@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_scatter_duplicate_destinations_leave_one_row(backend, dtype):
    dev = default_device()
    kv = _poisoned(7, 24, dtype, dev) + 1  # rows distinct from the destination's contents
    loc = _i64([2, 5, 2, -1, 5, 2, 0], dev)
    unified = _poisoned(8, 24, dtype, dev).flip(0).contiguous()
    before = unified.clone()
    with check_mode(False), use_kernel_backend(backend):
        out = K.scatter_into_unified(kv, loc, unified.clone())
    _assert_one_row_each(out, before, kv, loc.tolist(), f"scatter_into_unified[{backend}]")
    want = RR.scatter_into_unified(kv.cpu(), loc.cpu(), before.cpu().clone())  # the oracle: last writer
    _assert_one_row_each(want, before.cpu(), kv.cpu(), loc.tolist(), "reference")
    with check_mode(True), use_kernel_backend(backend), pytest.raises(ValueError, match=r"loc has duplicate"):
        K.scatter_into_unified(kv, loc, unified.clone())


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=4)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("with_final_pos", [False, True])
def test_store_swa_colliding_ring_addresses_leave_one_row(backend, with_final_pos):
    dev = default_device()
    ring, window = 5, 4
    slots = _i64([0, 0, 1, 0, 1, 2], dev)
    if with_final_pos:  # keeps pos > final - window: row 3 is trimmed, rows 0/1 and 2/4 repeat a position
        positions, final = _i64([11, 11, 9, 6, 9, 0], dev), _i64([12, 12, 9, 12, 9, 0], dev)
    else:  # slot 0 at pos 1, 1 + ring, 1 + 2 ring (one address) and slot 1 at pos 3, 3 + ring
        positions, final = _i64([1, 1 + ring, 3, 1 + 2 * ring, 3 + ring, 0], dev), None
    kv = _poisoned(6, 16, torch.bfloat16, dev) + 1
    unified = _poisoned(3 * ring, 16, torch.bfloat16, dev).flip(0).contiguous()
    before = unified.clone()
    with check_mode(False), use_kernel_backend(backend):
        out = K.store_swa_into_unified(kv, slots, positions, unified.clone(), window=window, ring=ring,
                                       final_pos=final)
    dests = []
    for s, p, f in zip(slots.tolist(), positions.tolist(), (final.tolist() if final is not None else [None] * 6)):
        dests.append(-1 if (f is not None and p <= f - window) else s * ring + p % ring)
    assert len(set(d for d in dests if d >= 0)) < len([d for d in dests if d >= 0]), "the case must collide"
    _assert_one_row_each(out, before, kv, dests, f"store_swa_into_unified[{backend}]")
    want = RR.store_swa_into_unified(kv.cpu(), slots.cpu(), positions.cpu(), before.cpu().clone(), window=window,
                                     ring=ring, final_pos=None if final is None else final.cpu())
    _assert_one_row_each(want, before.cpu(), kv.cpu(), dests, "reference")
    with check_mode(True), use_kernel_backend(backend), pytest.raises(ValueError, match=r"ring address has duplicate"):
        K.store_swa_into_unified(kv, slots, positions, unified.clone(), window=window, ring=ring, final_pos=final)


# ---------------------------------------------------------------- index builders
PAD_CASES = [  # (verify_lens, tier, padded_bs, decided answer, check-mode message)
    ([4, 4, 2], 6, 5, [4, 4, 2, 0, 0], r"tier \(6\) is too small for sum\(verify_lens\) = 10"),
    ([4, 4, 2], 6, 3, [4, 4, 2], r"tier \(6\) is too small"),
    ([3, -2, 1], 8, 4, [3, 0, 1, 4], r"verify_lens must be non-negative"),
    ([-5, 2], 1, 2, [0, 2], r"verify_lens must be non-negative"),
]


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lens, tier, padded_bs, want, message", PAD_CASES,
                         ids=["tier-below-sum", "tier-below-sum-no-pad-rows", "negative-len", "negative-len-no-pad"])
def test_pad_verify_lens_padding_never_negative(backend, lens, tier, padded_bs, want, message):
    dev = default_device()
    verify_lens = torch.tensor(lens, dtype=torch.int32, device=dev)
    with check_mode(False), use_kernel_backend(backend):
        got = K.pad_verify_lens_to_bucket(verify_lens, tier, padded_bs)
    assert got.tolist() == want
    assert R.pad_verify_lens_to_bucket(verify_lens.cpu(), tier, padded_bs).tolist() == want
    with check_mode(True), pytest.raises(ValueError, match=message):
        K.pad_verify_lens_to_bucket(verify_lens, tier, padded_bs)


EXPAND_CASES = [  # (seq_lens, extend_lens, num_tokens, causal lengths, check-mode message)
    # 16 §6: num_tokens below the real total: the first 4 rows, row 3 = request 2's first token
    ([5, 3, 9], [2, 1, 3], 4, [4, 5, 3, 7], r"num_tokens=4 is smaller than sum\(extend_lens\)=6"),
    ([5, 3, 9], [2, 1, 3], 1, [4], r"num_tokens=1 is smaller"),
    ([1, 3], [3, 2], None, [1, 2, 3, 2, 3], r"seq_lens must be >= extend_lens"),  # prefix max(1 - 3, 0) = 0
    ([1, 3], [3, 2], 7, [1, 2, 3, 2, 3, 1, 1], r"seq_lens must be >= extend_lens"),
    ([4, 6, 3], [2, -1, 1], None, [3, 4, 3], r"extend_lens must be non-negative"),  # a negative extend owns no row
    ([4, 6, 3], [2, -1, 1], 5, [3, 4, 3, 1, 1], r"extend_lens must be non-negative"),
]


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seq, ext, num_tokens, want, message", EXPAND_CASES,
                         ids=["num-tokens-4-below-6", "num-tokens-1", "seq-below-ext", "seq-below-ext-padded",
                              "negative-ext", "negative-ext-padded"])
def test_expand_prefill_causally_decided_answers(backend, seq, ext, num_tokens, want, message):
    dev = default_device()
    seq_lens, extend_lens = _i64(seq, dev), torch.tensor(ext, dtype=torch.int32, device=dev)
    slots = _i64([10 + r for r in range(len(seq))], dev)
    with check_mode(False), use_kernel_backend(backend):
        causal, req = K.expand_prefill_causally(seq_lens, extend_lens, slots, num_tokens=num_tokens)
    ref_causal, ref_req = R.expand_prefill_causally(seq_lens.cpu(), extend_lens.cpu(), slots.cpu(),
                                                    num_tokens=num_tokens)
    assert causal.tolist() == want == ref_causal.tolist()
    assert req.tolist() == ref_req.tolist()
    with check_mode(True), pytest.raises(ValueError, match=message):
        K.expand_prefill_causally(seq_lens, extend_lens, slots, num_tokens=num_tokens)


INJECT_CASES = [  # (prefix_lens, extend_lens, positions, final_pos, check-mode message)
    ([-3, 2], [2, 1], [0, 1, 2], [1, 1, 2], r"prefix_lens must be non-negative"),
    ([1, 4, 0], [2, -1, 3], [1, 2, 0, 1, 2], [2, 2, 2, 2, 2], r"extend_lens must be non-negative"),
]


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("prefix, ext, positions, final, message", INJECT_CASES,
                         ids=["negative-prefix", "negative-extend"])
def test_prefill_inject_meta_clamps_negative_lengths(backend, prefix, ext, positions, final, message):
    dev = default_device()
    slots = _i64([3, 5, 7][:len(prefix)], dev)
    prefix_lens, extend_lens = _i64(prefix, dev), _i64(ext, dev)
    with check_mode(False), use_kernel_backend(backend):
        got = K.prefill_inject_meta(slots, prefix_lens, extend_lens)
    want = R.prefill_inject_meta(slots.cpu(), prefix_lens.cpu(), extend_lens.cpu())
    assert got[0].tolist() == positions == want[0].tolist()
    assert got[2].tolist() == final == want[2].tolist()
    assert got[1].tolist() == want[1].tolist()
    with check_mode(True), pytest.raises(ValueError, match=message):
        K.prefill_inject_meta(slots, prefix_lens, extend_lens)


@register(suite="kernels", hardware="cpu", schedule="per-commit", est_time=1)
def test_prefill_metadata_negative_extend_owns_no_rows():
    """The metadata builder on top of expand_prefill_causally: same clamp, no torch error."""
    from impl.prefill_metadata import build_prefill_metadata
    from reference.verify_metadata import token_metadata

    dev = default_device()
    prefix, ext, rpi = (_i64([2, 5, 0], dev), torch.tensor([3, -2, 2], dtype=torch.int32, device=dev),
                        _i64([1, 2, 3], dev))
    with check_mode(False):
        md = build_prefill_metadata(prefix, ext, rpi, window=8, path="ragged-eager", platform="cpu", algorithm="dspark")
    want = token_metadata(prefix.tolist(), ext.tolist(), rpi.tolist(), window=8)
    assert md.positions.tolist() == want["positions"] == [2, 3, 4, 0, 1]
    assert md.req_indices.tolist() == want["req_indices"]
    with check_mode(True), pytest.raises(ValueError, match="extend_lens must be non-negative"):
        build_prefill_metadata(prefix, ext, rpi, window=8, path="ragged-eager", platform="cpu", algorithm="dspark")
