"""Controlled acceptance (docs/design.md §7): oracle -> gamma+1 per step, noisy oracle -> the analytic
mean, random draft -> still lossless, sampling verify -> valid tokens.

Noisy oracle model: each of the gamma draft tokens is independently replaced, with
probability q, by a different token. With C the number of leading correct drafts,
P(C >= j) = (1-q)^j (j <= gamma), so tokens per verify step (C + 1 bonus) has mean
E = sum_{j=0..gamma} (1-q)^j = (1 - (1-q)^(gamma+1)) / q.
"""
from __future__ import annotations

import pytest

from ci.registration import register
from impl.engine.run import make_prompts, run_case
from impl.run_options import RunOptions, SamplingParams
from impl.model.tiny_config import cpu_small
from impl.spec.acceptance import expected_accept_length


@pytest.fixture
def torch_kernels(monkeypatch):
    """Many steps: run the data-moving ops in torch (the kernels have their own tests)."""
    monkeypatch.setenv("DSPARK_KERNEL_BACKEND", "torch")


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=20)
@pytest.mark.parametrize("algorithm", ["dspark", "mtp"])
def test_oracle_draft_accepts_every_token(algorithm, torch_kernels):
    gamma = 4
    res = run_case(cpu_small(), RunOptions.resolve(algorithm=algorithm, gamma=gamma, batch=4, num_slots=2,
                                                   draft="oracle", max_new_tokens=11, checked=True))
    assert res.lossless
    steps = res.engine.accept_lengths_per_step()
    assert steps and all(c == gamma + 1 for step in steps for c in step), steps
    assert res.accept_length == gamma + 1


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=40)
def test_noisy_oracle_matches_analytic_accept_length(torch_kernels):
    gamma, q = 3, 0.3
    analytic = expected_accept_length(gamma, q)
    cfg = cpu_small()
    options = RunOptions.resolve(algorithm="dspark", gamma=gamma, batch=48, num_slots=48, draft=f"noisy:{q}",
                                 max_new_tokens=110, seed=7)
    res = run_case(cfg, options, prompts=make_prompts(cfg, 48, gamma, seed=7), reference="plain-engine")
    stats = res.engine.stats
    assert res.lossless
    assert stats.steps >= 2000, stats.summary()
    measured = stats.avg_accept_length
    print(f"noisy oracle q={q} gamma={gamma}: measured {measured:.4f} over {stats.steps} steps, "
          f"analytic {analytic:.4f}")
    assert measured == pytest.approx(analytic, rel=0.05)


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=20)
@pytest.mark.parametrize("algorithm", ["dspark", "mtp"])
def test_random_draft_is_still_lossless(algorithm):
    res = run_case(cpu_small(), RunOptions.resolve(algorithm=algorithm, gamma=3, batch=4, num_slots=2,
                                                   draft="random", max_new_tokens=5, seed=3, checked=True))
    assert res.lossless, res.mismatches


@register(suite="e2e", hardware="cpu", schedule="per-commit", est_time=20)
@pytest.mark.parametrize("algorithm", ["dspark", "mtp"])
def test_sampling_verify_produces_valid_tokens(algorithm, torch_kernels):
    cfg = cpu_small()
    params = SamplingParams(temperature=0.8, top_k=8, top_p=0.9, seed=1)
    options = RunOptions.resolve(algorithm=algorithm, gamma=3, batch=4, num_slots=2, sampling=params,
                                 max_new_tokens=8, seed=11, checked=True)
    runs = [run_case(cfg, options, with_reference=False) for _ in range(2)]
    outs = runs[0].outputs
    assert sorted(outs) == [0, 1, 2, 3]
    assert all(len(t) == 8 and all(0 <= x < cfg.vocab for x in t) for t in outs.values())
    assert runs[1].outputs == outs, "same seed must give the same samples"
    lens = [c for step in runs[0].engine.accept_lengths_per_step() for c in step]
    assert all(1 <= c <= 4 for c in lens)
    # sampling must really sample: a different seed changes the text somewhere
    other = run_case(cfg, options.replace(seed=12, checked=False), with_reference=False)
    assert other.outputs != outs
