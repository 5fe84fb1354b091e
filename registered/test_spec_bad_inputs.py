"""Bad input to pools, injector, metadata, verify and the sync policy: clear errors naming the problem."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl import sync_policy
from impl.config import SpecConfig
from impl.engine.engine import SpecEngine
from impl.model.tiny_config import cpu_small
from impl.platform import emulate
from impl.pools import PagedKVPool, UnifiedKVPool, check_gamma_consistent, check_pools_compatible, make_pool
from impl.prefill_metadata import build_prefill_metadata
from impl.run_options import RunOptions
from impl.spec.greedy_verify import greedy_verify
from impl.spec.injector import TargetHiddenInjector
from impl.spec.sampling_verify import sampling_probs
from impl.validation import check_mode
from impl.verify_metadata import RaggedVerifyLayout, build_verify_metadata
from impl.verify_step import VerifyStep
from registered.spec_fixtures import rope_tables, small_config

pytestmark = pytest.mark.usefixtures("value_checks_off")


def _injector(pool):
    cos, sin = rope_tables(128, pool.config.rope_dim)
    weights = [torch.ones(pool.head_dim, dtype=torch.bfloat16)] * pool.num_layers
    return TargetHiddenInjector(pool, norm_weights=weights, eps=1e-6, cos=cos, sin=sin)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_pool_mismatch_is_a_clear_error():
    base = small_config(gamma=3)
    target = UnifiedKVPool(base, num_layers=1)
    check_pools_compatible(target, PagedKVPool(base, num_layers=2))  # same geometry: fine across kinds
    for kw, attr in (({"window": 16}, "window"), ({"num_slots": 2}, "num_slots"), ({"ring_override": 20}, "ring")):
        draft = UnifiedKVPool(small_config(gamma=3, **kw), num_layers=1)
        with pytest.raises(ValueError, match=rf"disagree on {attr}: target {attr}=\d+, draft {attr}=\d+"):
            check_pools_compatible(target, draft)
    with pytest.raises(TypeError, match="draft pool must be a KVPool"):
        check_pools_compatible(target, object())


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_gamma_inconsistent_between_target_and_draft_is_a_clear_error():
    with pytest.raises(ValueError, match=r"gamma differs between target config \(gamma=3.*draft config \(gamma=4"):
        check_gamma_consistent(small_config(gamma=3), small_config(gamma=4))
    with pytest.raises(ValueError, match="gamma differs"):
        check_pools_compatible(UnifiedKVPool(small_config(gamma=3), num_layers=1),
                               UnifiedKVPool(small_config(gamma=4), num_layers=1))


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_commit_lens_longer_than_verify_rows_is_a_clear_error(kind):
    cfg = small_config(gamma=3)
    inj = _injector(make_pool(cfg, num_layers=1, kind=kind))
    stride = cfg.verify_rows("target")
    slots, prefix = torch.tensor([0, 1]), torch.tensor([2, 5])
    hidden = torch.randn(2 * stride, cfg.head_dim, dtype=torch.bfloat16)
    with check_mode(), pytest.raises(ValueError, match=rf"commit_lens\[1\] = {stride + 1} is longer than"):
        inj.inject_verify(hidden, req_pool_indices=slots, prefix_lens=prefix, commit_lens=torch.tensor([1, stride + 1]))
    lens = torch.tensor([2, 4], dtype=torch.int32)
    with check_mode(), pytest.raises(ValueError, match=r"commit_lens\[0\] = 3 is longer than .*verify_lens\[0\] = 2"):
        inj.inject_verify_ragged(hidden[:6], req_pool_indices=slots, prefix_lens=prefix,
                                 commit_lens=torch.tensor([3, 1]), verify_lens=lens,
                                 extend_start_loc=torch.tensor([0, 2], dtype=torch.int32))
    with check_mode(), pytest.raises(ValueError, match="commit_lens must be >= 0"):
        inj.inject_verify(hidden, req_pool_indices=slots, prefix_lens=prefix, commit_lens=torch.tensor([-1, 1]))


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_verify_lens_above_the_tier_is_a_clear_error():
    cfg = small_config(gamma=3, capture_batch_sizes=(1, 2))  # tiers 4, 8
    lens = torch.tensor([4, 4, 4], dtype=torch.int32)
    with pytest.raises(ValueError, match="exceeds the largest captured tier 8"):
        RaggedVerifyLayout.for_graph(lens, cfg)
    with emulate("cuda"), check_mode(), pytest.raises(ValueError, match="sum to 12, above the graph token tier 8"):
        build_verify_metadata(cfg, seq_lens=torch.tensor([0, 1, 2]), req_pool_indices=torch.tensor([0, 1, 2]),
                              ragged=RaggedVerifyLayout(lens, tier=8), algorithm="dspark")
    with check_mode(), pytest.raises(ValueError, match=r"verify_lens must be in \[0, 4\]"):
        build_verify_metadata(cfg, seq_lens=torch.tensor([0]), req_pool_indices=torch.tensor([0]),
                              ragged=RaggedVerifyLayout(torch.tensor([5], dtype=torch.int32)), algorithm="dspark")
    with pytest.raises(ValueError, match="padded_bs must be an int >= bs"):
        RaggedVerifyLayout(lens, tier=16, padded_bs=2)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("kind", ["unified", "paged"])
def test_missing_state_slot_or_final_pos_is_a_clear_error(kind):
    cfg = small_config()
    pool = make_pool(cfg, num_layers=1, kind=kind)
    inj = _injector(pool)
    hidden = torch.randn(3, cfg.head_dim, dtype=torch.bfloat16)
    pos = torch.arange(3)
    with pytest.raises(ValueError, match=f"state_slot is required for {kind} injection"):
        inj.inject_prefill(hidden, positions=pos, state_slot=None, final_pos=pos)
    with pytest.raises(ValueError, match="final_pos is required for prefill injection"):
        inj.inject_prefill(hidden, positions=pos, state_slot=pos, final_pos=None)
    with pytest.raises(ValueError, match="state_slot is required"):
        pool.locate(None, pos)
    with pytest.raises(ValueError, match=r"state_slot must have shape \[3\]"):
        pool.locate(torch.tensor([0, 1]), pos)
    with pytest.raises(TypeError, match="positions must have dtype int32 or int64"):
        pool.locate(0, pos.float())


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_injector_construction_errors():
    cfg = small_config()
    pool = UnifiedKVPool(cfg, num_layers=2)
    cos, sin = rope_tables(64, cfg.rope_dim)
    with pytest.raises(ValueError, match=r"norm_weights must have one weight per injected layer \(2\)"):
        TargetHiddenInjector(pool, norm_weights=[torch.ones(cfg.head_dim)], eps=1e-6, cos=cos, sin=sin)
    with pytest.raises(ValueError, match=r"layer must be an int in \[0, 2\)"):
        TargetHiddenInjector(pool, norm_weights=[torch.ones(cfg.head_dim)], eps=1e-6, cos=cos, sin=sin, layers=[5])
    inj = TargetHiddenInjector(pool, norm_weights=[torch.ones(cfg.head_dim)] * 2, eps=1e-6, cos=cos, sin=sin,
                               project=lambda layer, h: h.float())
    with pytest.raises(TypeError, match=r"project\(layer=0\) output must have dtype bfloat16"):
        inj.inject_prefill(torch.randn(2, cfg.head_dim), positions=torch.arange(2),
                           state_slot=torch.zeros(2, dtype=torch.int64), final_pos=torch.ones(2, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"hidden must have shape \[8, \*\]"):
        inj.inject_verify(torch.randn(5, cfg.head_dim), req_pool_indices=torch.tensor([0, 1]),
                          prefix_lens=torch.tensor([0, 0]), commit_lens=torch.tensor([1, 1]))


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_verify_and_policy_errors():
    with pytest.raises(ValueError, match=r"target scores must have 4 rows per request \(gamma \+ 1"):
        greedy_verify(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3, dtype=torch.int64),
                      prefix_lens=torch.zeros(2, dtype=torch.int64))
    mtp = SpecEngine(cpu_small(), RunOptions(algorithm="mtp", gamma=3, device="cpu"), num_slots=2)
    with pytest.raises(ValueError, match=r"draft_tokens must be \[bs, 3\] \(gamma = 3 drafts per request, 'mtp'\), "
                                         r"got \[2, 2\]"):
        mtp.verify_drafts(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 2, dtype=torch.int64),
                          torch.zeros(2, dtype=torch.int64))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        sampling_probs(torch.zeros(1, 2, 3), temperature=0.0)
    with pytest.raises(ValueError, match="platform must be one of"):
        sync_policy.decide("rocm", "mtp", "uniform", exact_num_tokens=True)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        sync_policy.decide("hip", "eagle", "uniform", exact_num_tokens=True)
    with pytest.raises(ValueError, match="exact_num_tokens must be False"):
        sync_policy.decide("cuda", "dspark", "ragged-graph", exact_num_tokens=True)
    with pytest.raises(ValueError, match="the uniform path needs num_tokens"):
        build_prefill_metadata(torch.tensor([0]), torch.tensor([1]), torch.tensor([0]), window=8, path="uniform",
                               platform="cuda", algorithm="dspark")
    with pytest.raises(ValueError, match="path must be one of"):
        build_prefill_metadata(torch.tensor([0]), torch.tensor([1]), torch.tensor([0]), window=8, path="graph",
                               platform="cuda", algorithm="dspark")
    with pytest.raises(ValueError, match="role must be one of"):
        build_verify_metadata(small_config(), seq_lens=torch.tensor([0]), req_pool_indices=torch.tensor([0]),
                              role="verifier", platform="cuda", algorithm="dspark")


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_verify_step_refuses_what_it_cannot_capture():
    cfg = small_config()
    kw = dict(batch_size=2, norm_weight=torch.ones(cfg.head_dim, dtype=torch.bfloat16), eps=1e-6,
              cos=torch.ones(8, 4), sin=torch.zeros(8, 4))
    with pytest.raises(TypeError, match="VerifyStep needs a UnifiedKVPool"):
        VerifyStep(PagedKVPool(cfg, num_layers=1), **kw)
    with pytest.raises(ValueError, match="keeps a device-to-host sync .*MTP/EAGLE verify faulted"):
        VerifyStep(UnifiedKVPool(cfg, num_layers=1), platform="hip", algorithm="mtp", **kw)
    with pytest.raises(ValueError, match="ring_override=10 is too small"):
        SpecConfig(gamma=3, window=8, ring_override=10)
