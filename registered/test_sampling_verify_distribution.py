"""Sampling verify preserves the target distribution; greedy verify matches the oracle (docs/design.md §6).

Statistics: 20k requests with identical p/q in one vectorised call, fixed seeds
(so each run is deterministic), chi-square against the EXACT output
distribution that ``reference.spec.sampling_output_distribution`` computes by
enumerating all draft sequences. The oracle itself is checked against the
theorem (the first emitted token is distributed as p_0), and the test's power
is checked by rejecting a deliberately wrong sampler's distribution.
"""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.spec.greedy_verify import greedy_verify
from impl.spec.sampling_verify import sampling_probs, sampling_verify, sampling_verify_probs
from impl.sync_detector import count_syncs
from reference import spec as ref_spec

VOCAB, GAMMA, N = 7, 2, 20000
P_VALUE_FLOOR = 1e-4  # deterministic seeds; a correct sampler sits far above this

SETTINGS = {
    "plain": dict(temperature=1.0),
    "temperature": dict(temperature=0.6),
    "top_k": dict(temperature=1.0, top_k=4),
    "top_p": dict(temperature=1.3, top_p=0.75),
    "all": dict(temperature=0.8, top_k=5, top_p=0.85),
}

pytestmark = pytest.mark.usefixtures("value_checks_off")


def chi_square_p_value(observed: dict, expected: dict, n: int) -> float:
    """Pearson chi-square p-value, pooling categories with expected count < 5 into one bin."""
    big = [k for k, p in expected.items() if p * n >= 5]
    small_p = sum(p for k, p in expected.items() if k not in big)
    small_o = sum(c for k, c in observed.items() if k not in big)
    stat = sum((observed.get(k, 0) - expected[k] * n) ** 2 / (expected[k] * n) for k in big)
    bins = len(big)
    if small_p * n >= 1:
        stat += (small_o - small_p * n) ** 2 / (small_p * n)
        bins += 1
    elif small_o > 3:  # mass where the oracle says almost none
        return 0.0
    df = bins - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


def _distributions(setting, seed):
    gen = torch.Generator().manual_seed(seed)
    target_logits = 1.5 * torch.randn(1, GAMMA + 1, VOCAB, generator=gen)
    draft_logits = target_logits[:, :GAMMA] + torch.randn(1, GAMMA, VOCAB, generator=gen)
    p = sampling_probs(target_logits, **setting)
    q = sampling_probs(draft_logits, **setting)
    ref_kw = {k: v for k, v in setting.items()}
    torch.testing.assert_close(p[0], ref_spec.sampling_probs(target_logits[0], **ref_kw), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(q[0], ref_spec.sampling_probs(draft_logits[0], **ref_kw), rtol=1e-5, atol=1e-7)
    return p, q


def _run(p, q, seed, verify_lens=None):
    gen = torch.Generator().manual_seed(1000 + seed)
    drafts = torch.multinomial(q[0].double(), N, replacement=True, generator=gen).T.contiguous()  # [N, gamma]
    res = sampling_verify_probs(p.expand(N, -1, -1), q.expand(N, -1, -1), drafts,
                                prefix_lens=torch.zeros(N, dtype=torch.int64), generator=gen,
                                verify_lens=verify_lens)
    counts: dict = {}
    for row, n in zip(res.output_tokens.tolist(), res.commit_len.tolist()):
        key = tuple(row[:n])
        counts[key] = counts.get(key, 0) + 1
    return counts, res


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=30)
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_sampling_verify_matches_the_exact_output_distribution(setting):
    seed = list(SETTINGS).index(setting)
    p, q = _distributions(SETTINGS[setting], seed)
    exact = ref_spec.sampling_output_distribution(p[0], q[0])
    assert abs(sum(exact.values()) - 1) < 1e-6  # fp32 rows sum to 1 within rounding
    # the oracle obeys the theorem: the first emitted token is distributed as p_0
    first = [sum(m for k, m in exact.items() if k[0] == v) for v in range(VOCAB)]
    assert max(abs(a - b) for a, b in zip(first, p[0, 0].tolist())) < 1e-6
    counts, res = _run(p, q, seed)
    assert chi_square_p_value(counts, exact, N) > P_VALUE_FLOOR
    # the empirical first-token marginal is p_0 (distribution preserved)
    first_counts = {(v,): 0 for v in range(VOCAB)}
    for key, c in counts.items():
        first_counts[(key[0],)] += c
    assert chi_square_p_value(first_counts, {(v,): float(p[0, 0, v]) for v in range(VOCAB)}, N) > P_VALUE_FLOOR
    # every token emitted has positive target probability at its row
    for key in counts:
        for i, tok in enumerate(key):
            assert p[0, i, tok] > 0, (key, i)
    assert int(res.new_seq_lens.sum()) == int(res.commit_len.sum())


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=8)
def test_the_statistic_rejects_a_wrong_sampler(monkeypatch):
    # Power check: "replace from p instead of the residual" is a classic bug; its output
    # distribution must be rejected by the same statistic on the same sample size.
    p, q = _distributions(SETTINGS["plain"], 0)
    counts, _ = _run(p, q, 0)
    exact = ref_spec.sampling_output_distribution(p[0], q[0])
    assert chi_square_p_value(counts, exact, N) > P_VALUE_FLOOR
    monkeypatch.setattr(ref_spec, "_residual", lambda p_row, q_row: list(p_row))
    wrong = ref_spec.sampling_output_distribution(p[0], q[0])
    assert chi_square_p_value(counts, wrong, N) < 1e-6


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=8)
def test_ragged_cap_draws_the_bonus_from_the_last_verified_row():
    p, q = _distributions(SETTINGS["top_k"], 7)
    lens = torch.ones(N, dtype=torch.int32) * 2  # verify 2 rows: at most one draft accepted
    counts, res = _run(p, q, 7, verify_lens=lens)
    assert int(res.correct_len.max()) <= 1
    exact = ref_spec.sampling_output_distribution(p[0], q[0], cap=1)
    assert chi_square_p_value(counts, exact, N) > P_VALUE_FLOOR


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=5)
def test_sampling_verify_from_logits_is_deterministic_and_sync_free():
    gen = torch.Generator().manual_seed(5)
    bs = 2  # the interpreted renorm kernels are slow on CPU; two requests cover per-request params
    t_logits = torch.randn(bs, GAMMA + 1, VOCAB, generator=gen)
    d_logits = torch.randn(bs, GAMMA, VOCAB, generator=gen)
    drafts = torch.randint(0, VOCAB, (bs, GAMMA), generator=gen)
    kw = dict(temperature=torch.tensor([0.5, 1.5]), top_k=torch.tensor([4, 1]), top_p=torch.tensor([0.8, 1.0]))
    prefix = torch.tensor([3, 9])
    with count_syncs() as log:
        a = sampling_verify(t_logits, d_logits, drafts, prefix_lens=prefix,
                            generator=torch.Generator().manual_seed(1), **kw)
    assert log.count == 0, log
    p, q = sampling_probs(t_logits, **kw), sampling_probs(d_logits, **kw)
    b = sampling_verify_probs(p, q, drafts, prefix_lens=prefix, generator=torch.Generator().manual_seed(1))
    for field in ("correct_len", "commit_len", "bonus", "output_tokens", "new_seq_lens"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    assert torch.equal(a.new_seq_lens, prefix + a.commit_len)
    # top_k = 1 on request 1 makes p and q one-hot: the emitted tokens are the argmaxes
    c1 = int(a.correct_len[1])
    assert a.output_tokens[1, c1] == int(p[1, c1].argmax())
    assert ((p[1] > 0).sum(-1) == 1).all()


# ---------------------------------------------------------------- greedy verify
def _check_greedy(target, drafts, prefix, verify_lens=None):
    with count_syncs() as log:
        got = greedy_verify(target, drafts, prefix_lens=prefix, verify_lens=verify_lens)
    assert log.count == 0, log  # graph safe
    ids = target.argmax(-1) if target.dim() == 3 else target
    want = ref_spec.greedy_verify(ids.tolist(), drafts.tolist(), prefix.tolist(),
                                  None if verify_lens is None else verify_lens.tolist())
    for field in ("correct_len", "commit_len", "bonus", "output_tokens", "new_seq_lens"):
        assert getattr(got, field).tolist() == want[field], field
    return got


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=5)
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_verify_matches_the_oracle(gamma):
    gen = torch.Generator().manual_seed(gamma)
    bs, vocab = 64, 4  # a small vocab makes partial matches common
    target = torch.randint(0, vocab, (bs, gamma + 1), generator=gen)
    drafts = torch.where(torch.rand(bs, gamma, generator=gen) < 0.7, target[:, :gamma],
                         torch.randint(0, vocab, (bs, gamma), generator=gen))
    prefix = torch.randint(0, 100, (bs,), generator=gen)
    got = _check_greedy(target, drafts, prefix)
    assert set(got.correct_len.tolist()) >= {0, gamma}  # both extremes occurred
    logits = torch.randn(bs, gamma + 1, 9, generator=gen)
    _check_greedy(logits, logits[:, :gamma].argmax(-1), prefix)  # logits input: all accepted
    lens = torch.randint(1, gamma + 2, (bs,), generator=gen).to(torch.int32)
    capped = _check_greedy(target, target[:, :gamma].clone(), prefix, verify_lens=lens)
    assert torch.equal(capped.correct_len, lens.to(torch.int64) - 1)  # perfect drafts hit the cap


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
def test_greedy_verify_edge_cases():
    target = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8], [5, 6, 7, 8], [1, 2, 3, 4]])
    drafts = torch.tensor([[5, 6, 7], [0, 6, 7], [5, 6, 0], [1, 2, 3]])
    prefix = torch.tensor([10, 0, 3, 7])
    got = _check_greedy(target, drafts, prefix, verify_lens=torch.tensor([4, 4, 4, 2]))
    assert got.correct_len.tolist() == [3, 0, 2, 1]  # all, none, partial, capped at verify_len - 1
    assert got.bonus.tolist() == [8, 5, 7, 2]
    assert got.output_tokens.tolist() == [[5, 6, 7, 8], [5, -1, -1, -1], [5, 6, 7, -1], [1, 2, -1, -1]]
    assert got.new_seq_lens.tolist() == [14, 1, 6, 9]
    one = _check_greedy(target[:, :1], drafts[:, :0], prefix, verify_lens=torch.ones(4, dtype=torch.int32))
    assert one.commit_len.tolist() == [1, 1, 1, 1]
