"""The verify step captured once as a CUDA graph and replayed with new batch contents gives
bitwise the ring that eager execution gives; eager execution performs no device sync."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.config import SpecConfig
from impl.pools import UnifiedKVPool
from impl.sync_detector import count_syncs
from impl.verify_step import VerifyStep
from registered.skips import requires_gpu
from reference.bits import bits_view
from registered.spec_fixtures import random_verify_batch, rope_tables

pytestmark = pytest.mark.usefixtures("value_checks_off")


@register(suite="components-gpu", hardware="h200-1", schedule="per-commit", est_time=60)
@register(suite="dspark-verify", hardware="mi35x-8", schedule="nightly", est_time=120)
@requires_gpu()
def test_verify_step_graph_replay_equals_eager():
    cfg = SpecConfig(gamma=5, window=128, head_dim=512, rope_dim=64, num_slots=16)  # DSV4 geometry
    gen = torch.Generator().manual_seed(0)
    dev = torch.device("cuda")
    pool = UnifiedKVPool(cfg, num_layers=1, device=dev)
    cos, sin = (t.to(dev) for t in rope_tables(4096, cfg.rope_dim))
    weight = (1 + 0.2 * torch.randn(cfg.head_dim, generator=gen)).to(torch.bfloat16).to(dev)
    bs = 8
    step = VerifyStep(pool, batch_size=bs, norm_weight=weight, eps=1e-6, cos=cos, sin=sin, algorithm="dspark")
    poison = (torch.randn(pool.buffer(0).shape, generator=gen) * 10).to(torch.bfloat16).to(dev)
    batches = []
    for _ in range(4):
        b = random_verify_batch(gen, cfg, bs)
        b["prefix_lens"] = torch.randint(0, 3000, (bs,), generator=gen)
        batches.append({k: v.to(dev) for k, v in b.items()})

    # eager, with the sync debugger set to raise on any synchronising call
    step.load(**batches[0])
    step.run()  # compile the kernels before the sync-debug run
    eager = []
    for b in batches:
        pool.buffer(0).copy_(poison)
        step.load(**b)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            step.run()
        finally:
            torch.cuda.set_sync_debug_mode(0)
        with count_syncs() as log:
            step.run()  # writing the same rows again is idempotent
        assert log.count == 0, log
        torch.cuda.synchronize()
        eager.append((pool.buffer(0).clone(), step.loc.clone(), step.positions.clone()))

    # capture once, then replay each batch into a freshly poisoned ring
    step.load(**batches[0])
    step.capture()
    for b, (ring, loc, positions) in zip(batches, eager):
        pool.buffer(0).copy_(poison)
        step.load(**b)
        step.replay()
        torch.cuda.synchronize()
        assert torch.equal(bits_view(pool.buffer(0)), bits_view(ring))
        assert torch.equal(step.loc, loc) and torch.equal(step.positions, positions)
    # the batches differ, so the rings differ: replay really consumed new contents
    assert not torch.equal(bits_view(eager[0][0]), bits_view(eager[1][0]))
