"""Bad input -> a ValueError/TypeError whose message names the offending argument (SPEC §3)."""
from __future__ import annotations

import pytest
import torch

import impl.kernels as K
from ci.registration import register
from impl.gates import GateError
from impl.platform import default_device
from impl.validation import check_mode

DEV = default_device()


def _i(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype, device=DEV)


def _scatter_args(t=4, d=8, pages=16, dtype=torch.bfloat16):
    return torch.randn(t, d, device=DEV).to(dtype), torch.arange(t, device=DEV), torch.zeros(pages, d, device=DEV).to(dtype)


def _norm_rope_args(t=3, d=16, rope_dim=8, max_pos=10):
    table = torch.rand(max_pos, rope_dim // 2, device=DEV)
    return dict(kv=torch.randn(t, d, device=DEV).bfloat16(), weight=torch.ones(d, device=DEV).bfloat16(), eps=1e-6,
                cos=table, sin=table.clone(), positions=torch.arange(t, device=DEV), rope_dim=rope_dim)


def _swa_args(window=4, ring=6):
    kv, _, unified = _scatter_args()
    return dict(kv=kv, state_slot=_i([0, 0, 1, 1]), positions=_i([0, 1, 2, 3]), unified=unified,
                window=window, ring=ring)


# ---------------------------------------------------------------- wrong dtype
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_unified_dtype_differs_from_kv():
    kv, loc, unified = _scatter_args()
    with pytest.raises(TypeError, match="unified must have dtype bfloat16"):
        K.scatter_into_unified(kv, loc, unified.float())


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_loc_float_dtype():
    kv, loc, unified = _scatter_args()
    with pytest.raises(TypeError, match="loc must have dtype int32 or int64"):
        K.scatter_into_unified(kv, loc.float(), unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_bool_rows_rejected():
    kv, loc, unified = _scatter_args()
    with pytest.raises(TypeError, match="unsupported dtype"):
        K.scatter_into_unified(kv.bool(), loc, unified.bool())


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_kv_not_a_tensor():
    _, loc, unified = _scatter_args()
    with pytest.raises(TypeError, match="kv must be a torch.Tensor"):
        K.scatter_into_unified([[1.0] * 8] * 4, loc, unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_norm_rope_cos_float64():
    args = _norm_rope_args()
    args["cos"] = args["cos"].double()
    with pytest.raises(TypeError, match="cos must have dtype float32"):
        K.fused_norm_rope_(**args)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_norm_rope_kv_int_dtype():
    args = _norm_rope_args()
    args["kv"] = args["kv"].to(torch.int16)
    with pytest.raises(TypeError, match="kv must have dtype"):
        K.fused_norm_rope_(**args)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_renorm_probs_bf16():
    with pytest.raises(TypeError, match="probs must have dtype float32"):
        K.top_k_renorm(torch.rand(2, 8, device=DEV).bfloat16(), 2)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_renorm_k_float_tensor_and_p_string():
    probs = torch.rand(2, 8, device=DEV)
    with pytest.raises(TypeError, match="k must have dtype int32 or int64"):
        K.top_k_renorm(probs, torch.tensor([1.0, 2.0], device=DEV))
    with pytest.raises(TypeError, match="p must be a float"):
        K.top_p_renorm(probs, "0.9")
    with pytest.raises(ValueError, match="p must not be NaN"):
        K.top_p_renorm(probs, float("nan"))


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_commit_layout_float_prefix():
    with pytest.raises(TypeError, match="prefix_lens must have dtype"):
        K.build_commit_inject_layout(_i([0]), torch.tensor([1.0], device=DEV), _i([1]), stride=4, ring=8)


# ---------------------------------------------------------------- non-contiguous
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_kv_non_contiguous():
    kv, loc, unified = _scatter_args(t=8, d=8)
    with pytest.raises(ValueError, match="kv must be contiguous"):
        K.scatter_into_unified(kv.t(), torch.arange(8, device=DEV), unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_unified_non_contiguous():
    kv, loc, _ = _scatter_args()
    unified = torch.zeros(16, 16, device=DEV).bfloat16()[:, ::2]
    with pytest.raises(ValueError, match="unified must be contiguous"):
        K.scatter_into_unified(kv, loc, unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_norm_rope_kv_non_contiguous():
    args = _norm_rope_args(t=16, d=16)
    args["kv"] = args["kv"].t()
    with pytest.raises(ValueError, match="kv must be contiguous"):
        K.fused_norm_rope_(**args)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_renorm_probs_non_contiguous():
    with pytest.raises(ValueError, match="probs must be contiguous"):
        K.top_p_renorm(torch.rand(8, 8, device=DEV).t(), 0.5)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_positions_non_contiguous():
    with pytest.raises(ValueError, match="positions must be contiguous"):
        K.unified_inject_loc(torch.arange(8, device=DEV)[::2], _i([0, 0, 0, 0]), ring=8, window=4)


# ---------------------------------------------------------------- mismatched shapes
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_loc_length_mismatch():
    kv, loc, unified = _scatter_args()
    with pytest.raises(ValueError, match=r"loc must have shape \[4\]"):
        K.scatter_into_unified(kv, loc[:3], unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_row_width_mismatch():
    kv, loc, _ = _scatter_args()
    with pytest.raises(ValueError, match="unified rows are 4 wide but kv rows are 8 wide"):
        K.scatter_into_unified(kv, loc, torch.zeros(16, 4, device=DEV).bfloat16())


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_kv_wrong_rank():
    _, loc, unified = _scatter_args()
    with pytest.raises(ValueError, match="kv must be 2-D"):
        K.scatter_into_unified(torch.zeros(4, 2, 4, device=DEV).bfloat16(), loc, unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_swa_final_pos_length_mismatch():
    args = _swa_args()
    with pytest.raises(ValueError, match=r"final_pos must have shape \[4\]"):
        K.store_swa_into_unified(**args, final_pos=_i([1, 2]))


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_norm_rope_weight_and_table_shapes():
    args = _norm_rope_args()
    with pytest.raises(ValueError, match=r"weight must have shape \[16\]"):
        K.fused_norm_rope_(**{**args, "weight": torch.ones(8, device=DEV).bfloat16()})
    with pytest.raises(ValueError, match="sin must have shape"):
        K.fused_norm_rope_(**{**args, "sin": args["sin"][:5]})
    with pytest.raises(ValueError, match="cos must have shape"):
        K.fused_norm_rope_(**{**args, "rope_dim": 4})
    with pytest.raises(ValueError, match="rope_dim must be even"):
        K.fused_norm_rope_(**{**args, "rope_dim": 7})
    with pytest.raises(ValueError, match="eps must be"):
        K.fused_norm_rope_(**{**args, "eps": -1.0})
    with pytest.raises(ValueError, match="kv must be 2-D or 3-D"):
        K.fused_norm_rope_(**{**args, "kv": args["kv"].reshape(3, 1, 1, 16)})


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_commit_lens_rows_do_not_match_positions():
    with pytest.raises(ValueError, match="commit_lens has 2 requests and verify_len is 3"):
        K.unified_inject_loc(torch.arange(5, device=DEV), torch.zeros(5, dtype=torch.long, device=DEV), ring=8,
                             window=4, commit_lens=_i([1, 2]), verify_len=3)
    with pytest.raises(ValueError, match="verify_len must be an int"):
        K.unified_inject_loc(torch.arange(6, device=DEV), torch.zeros(6, dtype=torch.long, device=DEV), ring=8,
                             window=4, commit_lens=_i([1, 2]))
    with pytest.raises(ValueError, match="verify_len is only used together with commit_lens"):
        K.unified_inject_loc(torch.arange(6, device=DEV), torch.zeros(6, dtype=torch.long, device=DEV), ring=8,
                             window=4, verify_len=3)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_batch_vectors_of_different_lengths():
    with pytest.raises(ValueError, match=r"extend_lens must have shape \[3\]"):
        K.prefill_inject_meta(_i([0, 1, 2]), _i([0, 0, 0]), _i([1, 1]))
    with pytest.raises(ValueError, match=r"seq_lens must have shape \[2\]"):
        K.expand_prefill_causally(_i([3]), _i([1, 1]), _i([0, 1]), num_tokens=4)
    with pytest.raises(ValueError, match=r"k must have shape \[2\]"):
        K.top_k_renorm(torch.rand(2, 8, device=DEV), _i([1, 2, 3]))


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_missing_state_slot():
    with pytest.raises(ValueError, match="state_slot is required"):
        K.unified_inject_loc(_i([1, 2]), None, ring=8, window=4)


# ---------------------------------------------------------------- mismatched devices
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_scatter_loc_on_another_device():
    kv, loc, unified = _scatter_args()
    with pytest.raises(ValueError, match="loc on meta"):
        K.scatter_into_unified(kv, loc.to("meta"), unified)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_norm_rope_table_on_another_device():
    args = _norm_rope_args()
    with pytest.raises(ValueError, match="sin on meta"):
        K.fused_norm_rope_(**{**args, "sin": args["sin"].to("meta")})


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_index_builders_on_mixed_devices():
    with pytest.raises(ValueError, match="commit_lens on meta"):
        K.build_commit_inject_layout(_i([0]), _i([3]), _i([1]).to("meta"), stride=4, ring=8)
    with pytest.raises(ValueError, match="final_pos on meta"):
        K.unified_inject_loc(_i([1]), _i([0]), ring=8, window=4, final_pos=_i([1]).to("meta"))
    with pytest.raises(ValueError, match="k must be on device"):
        K.top_k_renorm(torch.rand(2, 8, device=DEV), _i([1, 2]).to("meta"))


# ---------------------------------------------------------------- negative positions (check mode)
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_negative_positions_reported_in_check_mode():
    args = _swa_args()
    args["positions"] = _i([0, -1, 2, 3])
    with check_mode(True), pytest.raises(ValueError, match="positions must be non-negative"):
        K.store_swa_into_unified(**args)
    with check_mode(True), pytest.raises(ValueError, match="positions must be non-negative"):
        K.unified_inject_loc(_i([5, -2]), _i([0, 1]), ring=8, window=4)
    with check_mode(True), pytest.raises(ValueError, match="prefix_lens must be non-negative"):
        K.build_commit_inject_layout(_i([0]), _i([-3]), _i([1]), stride=4, ring=8)
    with check_mode(True), pytest.raises(ValueError, match="positions must lie in"):
        K.fused_norm_rope_(**{**_norm_rope_args(), "positions": _i([0, -1, 2])})


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_negative_positions_never_written_outside_check_mode():
    """Outside check mode a negative position is skipped (loc -1), never wrapped into another slot."""
    assert K.unified_inject_loc(_i([5, -2]), _i([1, 1]), ring=8, window=4).tolist() == [13, -1]
    args = _swa_args()
    args["positions"] = _i([0, -1, 2, 3])
    before = args["unified"].clone()
    K.store_swa_into_unified(**args)
    changed = (args["unified"] != before).any(1).nonzero().flatten().tolist()
    assert changed == [0, 6 + 2, 6 + 3]


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_bad_locs_reported_in_check_mode():
    kv, loc, unified = _scatter_args()
    with pytest.raises(ValueError, match="duplicate"):
        K.scatter_into_unified(kv, _i([3, 5, 3, -1]), unified, check=True)
    with pytest.raises(ValueError, match=r"loc\[1\] = 16 is out of range"):
        K.scatter_into_unified(kv, _i([3, 16, 4, -1]), unified, check=True)
    with check_mode(True), pytest.raises(ValueError, match="out of range"):
        K.scatter_into_unified(kv, _i([3, 2, -5, 0]), unified)
    with check_mode(True), pytest.raises(ValueError, match="ring address has duplicate"):
        K.store_swa_into_unified(**{**_swa_args(), "positions": _i([0, 6, 2, 3])})
    with check_mode(True), pytest.raises(ValueError, match="probs must be non-negative"):
        K.top_p_renorm(torch.tensor([[0.5, -0.1]], device=DEV), 0.5)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_out_of_range_loc_never_written_outside_check_mode():
    kv, _, unified = _scatter_args(pages=16)
    big = torch.zeros(32, 8, device=DEV).bfloat16()  # the first 16 rows alias `unified`'s size
    view = big[:16]
    K.scatter_into_unified(kv, _i([1, 16, 40, -1]), view)
    assert bool((big[16:] == 0).all()), "a loc past the end wrote outside the tensor"
    assert torch.equal(view[1], kv[0])


# ---------------------------------------------------------------- ring / tier / sizes
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_ring_too_small_for_window():
    with pytest.raises(ValueError, match=r"ring \(4\) is too small for window \(4\)"):
        K.store_swa_into_unified(**_swa_args(window=4, ring=4))
    with pytest.raises(ValueError, match=r"ring \(3\) is too small for window \(8\)"):
        K.unified_inject_loc(_i([1]), _i([0]), ring=3, window=8)
    with pytest.raises(ValueError, match=r"stride \(9\) must not exceed ring \(8\)"):
        K.build_commit_inject_layout(_i([0]), _i([3]), _i([1]), stride=9, ring=8)
    with pytest.raises(ValueError, match="window must be an int >= 1"):
        K.unified_inject_loc(_i([1]), _i([0]), ring=3, window=0)


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_tier_too_small():
    with check_mode(True), pytest.raises(ValueError, match=r"tier \(5\) is too small for sum\(verify_lens\) = 6"):
        K.pad_verify_lens_to_bucket(_i([3, 3]), 5, 4)
    with pytest.raises(ValueError, match="need=13 tokens exceeds the largest captured tier 12"):
        K.select_token_tier(13, [6, 12])
    with pytest.raises(ValueError, match=r"padded_bs \(1\) must be >= the batch size \(2\)"):
        K.pad_verify_lens_to_bucket(_i([3, 3]), 6, 1)
    with pytest.raises(ValueError, match="tiers must be a non-empty list"):
        K.select_token_tier(1, [])
    with check_mode(True), pytest.raises(ValueError, match="num_tokens=2 is smaller than sum"):
        K.expand_prefill_causally(_i([3, 3]), _i([2, 1]), _i([0, 1]), num_tokens=2)
    with pytest.raises(ValueError, match="num_tokens=3 needs at least one request"):
        K.expand_prefill_causally(_i([]), _i([]), _i([]), num_tokens=3)


# ---------------------------------------------------------------- unknown gate value
@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("op", ["scatter", "swa", "norm_rope", "top_k", "top_p"])
def test_unknown_kernel_backend_gate(op, monkeypatch):
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "bogus")
    kv, loc, unified = _scatter_args()
    calls = {
        "scatter": lambda: K.scatter_into_unified(kv, loc, unified),
        "swa": lambda: K.store_swa_into_unified(**_swa_args()),
        "norm_rope": lambda: K.fused_norm_rope_(**_norm_rope_args()),
        "top_k": lambda: K.top_k_renorm(torch.rand(2, 8, device=DEV), 3),
        "top_p": lambda: K.top_p_renorm(torch.rand(2, 8, device=DEV), 0.5),
    }
    with pytest.raises(GateError, match="DSPARK_KERNEL_BACKEND"):
        calls[op]()


@register(suite="kernels", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
def test_unknown_check_mode_gate(monkeypatch):
    monkeypatch.setenv("DSPARK_CHECK", "maybe")
    kv, loc, unified = _scatter_args()
    with pytest.raises(GateError, match="DSPARK_CHECK"):
        K.scatter_into_unified(kv, loc, unified)
