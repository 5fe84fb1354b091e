"""Invariant 12: ``output_size``, whenever passed to repeat_interleave, equals sum(repeats).

Every repeat_interleave call made while building metadata (any platform,
algorithm, path, batch shape) is intercepted and its output_size compared with
the true sum. Where the policy elides the sync the layout is one kernel launch
sized by the same host total (``impl.kernels.build_token_metadata``, no
repeat_interleave), so the total the builder reports using is compared with the
lens it lays out too. Check mode turns a deliberately wrong total into a clear error.
"""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.gates import gate_value
from impl.platform import emulate
from impl.prefill_metadata import build_prefill_metadata
from impl.sync_detector import count_syncs
from impl.validation import check_mode, check_mode_enabled
from impl.verify_metadata import RaggedVerifyLayout, build_verify_metadata
from registered.spec_fixtures import OutputSizeAudit, small_config

pytestmark = pytest.mark.usefixtures("value_checks_off")


def _random_batch(gen, cfg, bs):
    rows = cfg.verify_rows("target")
    prefix = torch.randint(0, 50, (bs,), generator=gen)
    slots = torch.randperm(cfg.num_slots, generator=gen)[:bs]
    lens = torch.randint(0, rows + 1, (bs,), generator=gen).to(torch.int32)
    return prefix, slots, lens


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=10)
@pytest.mark.parametrize("algorithm", ["none", "mtp", "dspark"])
@pytest.mark.parametrize("platform", ["cuda", "hip", "cpu"])
def test_output_size_equals_sum_of_repeats_everywhere(platform, algorithm):
    gen = torch.Generator().manual_seed(12)
    cfg = small_config(gamma=3, num_slots=8, capture_batch_sizes=(1, 2, 4, 8))
    passed = 0
    for trial in range(12):
        bs = 1 + trial % 6
        prefix, slots, lens = _random_batch(gen, cfg, bs)
        layouts = [None, RaggedVerifyLayout(lens), RaggedVerifyLayout.for_graph(lens, cfg),
                   RaggedVerifyLayout.for_graph(lens, cfg, need=int(lens.sum()))]
        for layout in layouts:
            audit = OutputSizeAudit()
            with emulate(platform), audit:
                meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout,
                                             algorithm=algorithm)
            for size, total in audit.calls:
                assert size == total, (platform, algorithm, layout, size, total)
            assert len(audit.calls) <= int(meta.used_output_size)  # never a size the flag does not report
            if meta.used_output_size:  # the host total used (repeat_interleave's or the one launch's)
                assert meta.output_size == meta.num_tokens
                real = int(meta.extend_lens.to(torch.int64).clamp_min(0).sum())
                laid_out = real if meta.exact else int(meta.padded_lens.sum())  # the graph: padded repeats
                assert meta.output_size == laid_out, (platform, algorithm, layout, meta.output_size, laid_out)
                passed += 1
    assert passed > 0  # the audit saw real calls


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("platform", ["cuda", "hip"])
def test_check_mode_rejects_a_wrong_total(platform):
    # The field hazard: the target verifies gamma + 1 rows per request but the total
    # was computed with the draft's gamma (or any other wrong count).
    cfg = small_config(gamma=4)
    bs = 3
    ext = torch.full((bs,), cfg.verify_rows("target"), dtype=torch.int32)
    prefix, slots = torch.tensor([3, 8, 1]), torch.tensor([0, 2, 1])
    for wrong in (cfg.verify_rows("draft") * bs, cfg.verify_rows("target") * bs + 2):
        with emulate(platform), check_mode():
            with pytest.raises(ValueError, match=rf"output_size={wrong} does not equal sum\(repeats\)=15"):
                build_prefill_metadata(prefix, ext, slots, window=cfg.window, path="uniform", num_tokens=wrong,
                                       algorithm="dspark")
    # the right total passes, in check mode too
    with emulate(platform), check_mode():
        meta = build_prefill_metadata(prefix, ext, slots, window=cfg.window, path="uniform", num_tokens=15,
                                      algorithm="dspark")
    assert meta.num_tokens == 15 and meta.used_output_size


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_check_mode_rejects_a_wrong_eager_total_that_keeps_the_sync():
    # HIP + MTP keeps the sync, so a wrong host total cannot write out of bounds; check
    # mode still reports it instead of silently taking the device's count.
    cfg = small_config(gamma=2)
    ext = torch.tensor([3, 3], dtype=torch.int32)
    with emulate("hip"), check_mode():
        with pytest.raises(ValueError, match="num_tokens=5 does not match sum"):
            build_prefill_metadata(torch.tensor([0, 4]), ext, torch.tensor([1, 0]), window=cfg.window,
                                   path="uniform", num_tokens=5, algorithm="mtp")


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_check_mode_rejects_verify_lens_above_the_tier():
    cfg = small_config(gamma=3)
    lens = torch.tensor([4, 4, 3], dtype=torch.int32)  # sums to 11
    layout = RaggedVerifyLayout(lens, tier=8, padded_bs=4)
    with emulate("cuda"), check_mode():
        with pytest.raises(ValueError, match="sum to 11, above the graph token tier 8"):
            build_verify_metadata(cfg, seq_lens=torch.tensor([1, 2, 3]), req_pool_indices=torch.tensor([0, 1, 2]),
                                  ragged=layout, algorithm="dspark")


# The check_mode gate (DSPARK_CHECK) decides whether a wrong total is caught before use;
# both values run per commit.
@register(suite="components", hardware="cpu", schedule="per-commit", est_time=3,
          env={"check-on": {"DSPARK_CHECK": "on"}, "check-off": {"DSPARK_CHECK": "off"}})
def test_check_mode_gate_decides_whether_a_wrong_total_is_caught():
    ext = torch.tensor([3, 3], dtype=torch.int32)
    args = (torch.tensor([0, 4]), ext, torch.tensor([1, 0]))
    kw = dict(window=8, path="uniform", platform="cuda", algorithm="dspark")
    with check_mode(gate_value("check_mode") == "on"):  # the gate's value, over the file's default
        if check_mode_enabled():
            with pytest.raises(ValueError, match=r"output_size=5 does not equal sum\(repeats\)=6"):
                build_prefill_metadata(*args, num_tokens=5, **kw)
        # Unchecked, a wrong total is NOT run here: even torch on CPU then writes past the
        # output (heap corruption seen while writing this test). That is the hazard the
        # policy and check mode exist for. Off means no value check reads the device:
        with count_syncs() as log:
            meta = build_prefill_metadata(*args, num_tokens=6, **kw)
        assert meta.num_tokens == 6 and meta.used_output_size
        assert (log.count > 0) == check_mode_enabled()  # checks read values back; off reads nothing
