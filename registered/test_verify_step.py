"""The verify-step write pipeline, eager, against the dict-pool oracle (CPU-friendly twin of the
CUDA-graph test in test_verify_step_cuda_graph.py)."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.platform import emulate
from impl.pools import UnifiedKVPool
from impl.sync_detector import count_syncs
from impl.verify_step import VerifyStep
from reference import spec as ref_spec
from reference.bits import bits_view
from reference.pools import DictPool
from registered.spec_fixtures import NORM_ROPE_TOL, poison_, random_verify_batch, rope_tables, small_config

pytestmark = pytest.mark.usefixtures("value_checks_off")


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=8)
def test_verify_step_eager_matches_the_oracle_without_syncs():
    cfg = small_config(gamma=3, num_slots=4)
    gen = torch.Generator().manual_seed(0)
    pool = UnifiedKVPool(cfg, num_layers=1)  # on the default device: the GPU on GPU runners
    dev = pool.device
    cos, sin = rope_tables(128, cfg.rope_dim)
    weight = (1 + 0.2 * torch.randn(cfg.head_dim, generator=gen)).to(torch.bfloat16)
    with emulate("cuda"):
        step = VerifyStep(pool, batch_size=3, norm_weight=weight.to(dev), eps=1e-6, cos=cos.to(dev),
                          sin=sin.to(dev), algorithm="dspark")
    stride = cfg.verify_rows("target")
    for trial in range(3):
        poison_(pool.buffer(0), gen)
        before = pool.buffer(0).cpu()
        batch = random_verify_batch(gen, cfg, 3)
        step.load(**batch)
        with count_syncs() as log:
            step.run()
        assert log.count == 0, log
        ref = DictPool(window=cfg.window, head_dim=cfg.head_dim, rope_dim=cfg.rope_dim)
        ref_spec.inject_verify(ref, [0], [batch["kv"]], batch["req_pool_indices"].tolist(),
                               batch["prefix_lens"].tolist(), batch["commit_lens"].tolist(), stride,
                               norm_weights=[weight], eps=1e-6, cos=cos, sin=sin)
        written = torch.zeros(pool.num_rows, dtype=torch.bool)
        after = pool.buffer(0).cpu()
        for (layer, slot, pos), row in ref.rows.items():
            loc = slot * cfg.ring + pos % cfg.ring
            written[loc] = True
            torch.testing.assert_close(after[loc].float(), row.float(), **NORM_ROPE_TOL)
        assert torch.equal(bits_view(after[~written]), bits_view(before[~written]))
        assert int((step.loc >= 0).sum()) == int(batch["commit_lens"].clamp(max=stride).sum())
        assert step.positions.tolist() == [int(p) + c for p in batch["prefix_lens"] for c in range(stride)]
        assert torch.equal(step.seq_lens_causal.to(torch.int64), step.positions + 1)
        assert torch.equal(step.kv_in.cpu(), batch["kv"])  # the input survives for the next replay
