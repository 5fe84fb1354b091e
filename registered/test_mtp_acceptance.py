"""MTP/EAGLE chain drafts on the shared verify contract, and acceptance accounting (docs/design.md §6)."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.engine.engine import SpecEngine
from impl.model.mtp_draft import MtpDraft
from impl.model.target import TargetModel
from impl.model.tiny_config import cpu_small
from impl.platform import default_device
from impl.pools import UnifiedKVPool
from impl.run_options import RunOptions
from impl.spec.acceptance import AcceptanceStats, expected_accept_length
from impl.spec.greedy_verify import greedy_verify
from impl.spec.mtp import chain_draft
from impl.sync_detector import count_syncs
from reference import spec as ref_spec

VOCAB = 11

pytestmark = pytest.mark.usefixtures("value_checks_off")


def _engine(algorithm: str, *, gamma: int, platform: str = "cuda") -> SpecEngine:
    """A CPU engine: the verify path the e2e runs take, without running a step."""
    options = RunOptions(algorithm=algorithm, platform=platform, gamma=gamma, device="cpu")
    return SpecEngine(cpu_small(), options, num_slots=2)


def _step(j, hidden, token):
    """A toy chain step: next token = (token * 3 + hidden + j) mod V."""
    nxt = (token * 3 + hidden[:, 0].long() + j) % VOCAB
    logits = torch.nn.functional.one_hot(nxt, VOCAB).float() * 5.0
    return logits, hidden


def _by_hand(pick_offset: int) -> list[list[int]]:
    want = []
    for h, t in zip([0, 2, 5], [1, 4, 7]):
        row = []
        for j in range(4):
            t = ((t * 3 + h + j) % VOCAB + pick_offset) % VOCAB
            row.append(t)
        want.append(row)
    return want


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
def test_chain_draft_runs_k_sequential_steps():
    hidden = torch.tensor([[0.0], [2.0], [5.0]])
    token = torch.tensor([1, 4, 7])
    drafts, logits = chain_draft(_step, hidden, token, 4)  # argmax by default
    assert drafts.tolist() == _by_hand(0)
    assert logits.shape == (3, 4, VOCAB) and torch.equal(logits.argmax(-1), drafts)
    # the picked token, not the argmax, is what the next step sees
    shifted, _ = chain_draft(_step, hidden, token, 4, pick=lambda lg: (lg.argmax(-1) + 1) % VOCAB)
    assert shifted.tolist() == _by_hand(1)
    for k in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="k must be a positive int"):
            chain_draft(_step, hidden, token, k)
    with pytest.raises(TypeError, match="step and pick must be callable"):
        chain_draft(_step, hidden, token, 2, pick=None)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=7)
def test_the_engines_mtp_draft_is_a_chain_of_picks():
    cfg, dev = cpu_small(), default_device()
    target = TargetModel(cfg, dev)
    draft = MtpDraft(cfg, target.w, target.cos, target.sin)
    pool = UnifiedKVPool(cfg.spec_config(3, 2), num_layers=1, device=dev)  # empty: anchors at position 0
    hidden = torch.randn(2, cfg.hidden, generator=torch.Generator().manual_seed(0)).to(dev)
    anchor, pos, slots = (torch.tensor(v, device=dev) for v in ([5, 9], [0, 0], [0, 1]))
    picked = []

    def pick(logits):
        picked.append(torch.argmax(logits, dim=-1))
        return picked[-1]

    tokens, logits = draft.chain(hidden, anchor, pos, slots, pool, 4, pick=pick)
    assert len(picked) == 4 and torch.equal(tokens, torch.stack(picked, dim=1))
    assert logits.shape == (2, 4, cfg.vocab)
    short, short_logits = draft.chain(hidden, anchor, pos, slots, pool, 2)
    assert torch.equal(short, tokens[:, :2])  # a later step never changes an earlier one
    torch.testing.assert_close(short_logits, logits[:, :2])


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=4)
def test_mtp_verify_metadata_is_synced_on_hip_only():
    seq, slots = torch.tensor([4, 9]), torch.tensor([1, 0])
    with count_syncs() as log:
        meta = _engine("mtp", gamma=3, platform="hip").verify_metadata(seq, slots)
    assert log.kinds() == ["repeat_interleave without output_size"] and not meta.used_output_size
    with count_syncs() as log:
        meta_cuda = _engine("mtp", gamma=3, platform="cuda").verify_metadata(seq, slots)
    assert log.count == 0 and meta_cuda.used_output_size
    assert torch.equal(meta.positions, meta_cuda.positions)  # same layout either way
    assert meta.positions.tolist() == [4, 5, 6, 7, 9, 10, 11, 12]
    with count_syncs() as log:
        _engine("dspark", gamma=3, platform="hip").verify_metadata(seq, slots)
    assert log.count == 0  # DSpark verify on HIP takes the shortcut (docs/design.md §4.3)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=4)
def test_mtp_greedy_verify_follows_the_shared_contract():
    gen = torch.Generator().manual_seed(2)
    target = torch.randint(0, 3, (32, 5), generator=gen)
    drafts = torch.randint(0, 3, (32, 4), generator=gen)
    prefix = torch.randint(0, 20, (32,), generator=gen)
    got = _engine("mtp", gamma=4).verify_drafts(target, drafts, prefix)
    dspark = _engine("dspark", gamma=4).verify_drafts(target, drafts, prefix)
    want = ref_spec.greedy_verify(target.tolist(), drafts.tolist(), prefix.tolist())
    assert got.correct_len.tolist() == dspark.correct_len.tolist() == want["correct_len"]
    assert got.output_tokens.tolist() == dspark.output_tokens.tolist() == want["output_tokens"]
    assert got.commit_len.tolist() == [c + 1 for c in want["correct_len"]]


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
