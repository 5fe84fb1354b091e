"""MTP/EAGLE chain drafts on the shared verify contract, and acceptance accounting (docs/design.md §6)."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.platform import emulate
from impl.spec.acceptance import AcceptanceStats, expected_accept_length
from impl.spec.greedy_verify import greedy_verify
from impl.spec.mtp import MTPVerifier, chain_draft
from impl.sync_detector import count_syncs
from reference import spec as ref_spec
from registered.spec_fixtures import small_config

VOCAB = 11

pytestmark = pytest.mark.usefixtures("value_checks_off")


def _step(hidden, token):
    """A toy chain step: next token = (token * 3 + hidden) mod V, hidden advances by one."""
    nxt = (token * 3 + hidden[:, 0].long()) % VOCAB
    logits = torch.nn.functional.one_hot(nxt, VOCAB).float() * 5.0
    return logits, hidden + 1


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
def test_chain_draft_runs_k_sequential_steps():
    hidden = torch.tensor([[0.0], [2.0], [5.0]])
    token = torch.tensor([1, 4, 7])
    drafts, logits = chain_draft(_step, hidden, token, 4)
    want = []
    for h, t in zip([0, 2, 5], [1, 4, 7]):
        row = []
        for i in range(4):
            t = (t * 3 + h + i) % VOCAB
            row.append(t)
        want.append(row)
    assert drafts.tolist() == want
    assert logits.shape == (3, 4, VOCAB)
    a, _ = chain_draft(_step, hidden, token, 3, temperature=1.0, generator=torch.Generator().manual_seed(0))
    b, _ = chain_draft(_step, hidden, token, 3, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
def test_mtp_verify_metadata_is_synced_on_hip_only():
    cfg = small_config(gamma=3)
    seq, slots = torch.tensor([4, 9]), torch.tensor([1, 0])
    with emulate("hip"), count_syncs() as log:
        meta = MTPVerifier(cfg).metadata(seq, slots)
    assert log.kinds() == ["repeat_interleave without output_size"] and not meta.used_output_size
    with emulate("cuda"), count_syncs() as log:
        meta_cuda = MTPVerifier(cfg).metadata(seq, slots)
    assert log.count == 0 and meta_cuda.used_output_size
    assert torch.equal(meta.positions, meta_cuda.positions)  # same layout either way
    assert meta.positions.tolist() == [4, 5, 6, 7, 9, 10, 11, 12]


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
def test_mtp_greedy_verify_follows_the_shared_contract():
    cfg = small_config(gamma=4)
    gen = torch.Generator().manual_seed(2)
    target = torch.randint(0, 3, (32, 5), generator=gen)
    drafts = torch.randint(0, 3, (32, 4), generator=gen)
    prefix = torch.randint(0, 20, (32,), generator=gen)
    got = MTPVerifier(cfg).verify_greedy(target, drafts, prefix_lens=prefix)
    same = greedy_verify(target, drafts, prefix_lens=prefix)
    want = ref_spec.greedy_verify(target.tolist(), drafts.tolist(), prefix.tolist())
    assert got.correct_len.tolist() == same.correct_len.tolist() == want["correct_len"]
    assert got.output_tokens.tolist() == want["output_tokens"]


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("gamma", [2, 5])
def test_controlled_acceptance_matches_the_analytic_expectation(gamma):
    gen = torch.Generator().manual_seed(gamma)
    rows = 20000
    target = torch.randint(0, 50, (rows, gamma + 1), generator=gen)
    prefix = torch.zeros(rows, dtype=torch.int64)
    # oracle draft: always right -> gamma + 1 tokens per step
    stats = AcceptanceStats()
    stats.update(greedy_verify(target, target[:, :gamma], prefix_lens=prefix).correct_len)
    assert stats.avg_accept_length == gamma + 1 and stats.avg_accepted_drafts == gamma
    for wrong in (0.2, 0.5):
        noisy = torch.where(torch.rand(rows, gamma, generator=gen) < wrong, (target[:, :gamma] + 1) % 50,
                            target[:, :gamma])
        stats = AcceptanceStats()
        for chunk in range(4):  # four verify steps of 5000 requests
            sl = slice(chunk * 5000, (chunk + 1) * 5000)
            stats.update(greedy_verify(target[sl], noisy[sl], prefix_lens=prefix[sl]).correct_len)
        assert stats.steps == rows and len(stats.per_step_tokens) == 4
        assert abs(stats.avg_accept_length - expected_accept_length(gamma, wrong)) < 0.03
        assert stats.accepted_tokens == stats.accepted_drafts + rows


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_acceptance_stats_accounting():
    stats = AcceptanceStats()
    stats.update(torch.tensor([0, 3, 1, 2]), active=torch.tensor([True, True, False, True]))
    assert (stats.steps, stats.accepted_drafts, stats.accepted_tokens) == (3, 5, 8)
    stats.update(torch.tensor([4]))
    assert (stats.steps, stats.accepted_drafts, stats.accepted_tokens) == (4, 9, 13)
    assert stats.avg_accept_length == 13 / 4 and stats.per_step_tokens == [8 / 3, 5.0]
    stats.update(torch.zeros(0, dtype=torch.int64))  # empty step: nothing counted
    assert stats.steps == 4
    assert "avg accept length: 3.250" in stats.summary()
    assert expected_accept_length(3, 0.0) == 4.0 and expected_accept_length(3, 1.0) == 1.0
    for gamma, q in ((3, 0.3), (1, 0.5), (6, 0.05)):  # the closed form of the geometric sum agrees
        assert expected_accept_length(gamma, q) == pytest.approx((1 - (1 - q) ** (gamma + 1)) / q)
    with pytest.raises(ValueError, match="wrong_prob must be in"):
        expected_accept_length(3, 1.5)
    with pytest.raises(ValueError, match="correct_len must be >= 0"):
        stats.update(torch.tensor([-1]))
