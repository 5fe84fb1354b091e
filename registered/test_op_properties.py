"""Hypothesis: impl == oracle on random shapes, loc patterns, ring sizes and ties.

Bounded for CI: ``max_examples`` by schedule (``registered/schedule.py``: a few per commit on
cpu, 25 on a GPU, 120 in the nightly cpu job), no deadline, derandomized (same examples every
run), small shapes (the CPU path runs the Triton interpreter).
"""
from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import impl.kernels as K
import reference as R
from ci.registration import register
from impl.platform import default_device
from impl.testing.op_table import NORM_ROPE, RENORM, mismatch
from impl.testing.tunings import renorm_tunings
from reference.bits import bits_view
from registered.schedule import HYPOTHESIS_PROFILES, hypothesis_profile

DEV = default_device()
# examples per schedule (registered/schedule.py): few per commit on cpu (the Triton interpreter), many nightly
BOUNDED = settings(max_examples=HYPOTHESIS_PROFILES[hypothesis_profile()], deadline=None, derandomize=True,
                   suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scatter_inputs(draw):
    t = draw(st.integers(0, 24))
    d = draw(st.sampled_from([1, 3, 8, 17, 32]))
    pages = draw(st.integers(max(t, 1), 40))
    dtype = draw(st.sampled_from([torch.bfloat16, torch.float32, torch.uint8]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    loc = torch.randperm(pages, generator=g)[:t]
    skip = torch.tensor(draw(st.lists(st.booleans(), min_size=t, max_size=t)), dtype=torch.bool)
    loc[skip] = -1
    kv = torch.randint(0, 256, (t, d * torch.empty((), dtype=dtype).element_size()), generator=g, dtype=torch.uint8)
    unified = torch.randint(0, 256, (pages, kv.shape[1]), generator=g, dtype=torch.uint8)
    loc_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    return kv.view(dtype), loc.to(loc_dtype), unified.view(dtype)


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=50)
@BOUNDED
@given(scatter_inputs())
def test_scatter_matches_oracle(args):
    kv, loc, unified = args
    want = R.scatter_into_unified(kv, loc, unified.clone())
    got = K.scatter_into_unified(kv.to(DEV), loc.to(DEV), unified.to(DEV))
    assert torch.equal(bits_view(got.cpu()), bits_view(want))


@st.composite
def swa_inputs(draw):
    window = draw(st.integers(1, 12))
    ring = window + draw(st.integers(1, 6))
    trim = draw(st.booleans())
    reqs = draw(st.lists(st.tuples(st.integers(0, 3 * ring), st.integers(0, 3 * ring if trim else ring)),
                         min_size=0, max_size=4))
    slots, positions, final = [], [], []
    for slot, (first, count) in enumerate(reqs):
        slots += [slot] * count
        positions += range(first, first + count)
        final += [first + count - 1] * count
    d = draw(st.sampled_from([4, 16]))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    kv = torch.randn(len(slots), d, generator=g).bfloat16()
    unified = torch.randn(max(len(reqs), 1) * ring, d, generator=g).bfloat16()
    as_t = lambda xs: torch.tensor(xs, dtype=torch.int64)  # noqa: E731
    return dict(kv=kv, state_slot=as_t(slots), positions=as_t(positions), unified=unified, window=window,
                ring=ring, final_pos=as_t(final) if trim else None)


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=25)
@BOUNDED
@given(swa_inputs())
def test_store_swa_matches_oracle(kw):
    want = R.store_swa_into_unified(**{**kw, "unified": kw["unified"].clone()})
    got = K.store_swa_into_unified(**{k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
    assert torch.equal(bits_view(got.cpu()), bits_view(want))


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=25)
@BOUNDED
@given(st.integers(0, 6), st.integers(1, 8), st.integers(0, 4), st.data())
def test_commit_layout_and_inject_loc_match_oracle(bs, stride, ring_extra, data):
    ring = stride + ring_extra
    prefix = data.draw(st.lists(st.integers(0, 4 * ring), min_size=bs, max_size=bs))
    commit = data.draw(st.lists(st.integers(0, stride + 2), min_size=bs, max_size=bs))
    rpi = torch.randperm(bs + 3, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 999))))[:bs]
    args = (rpi, torch.tensor(prefix, dtype=torch.int64), torch.tensor(commit, dtype=torch.int64))
    want = R.build_commit_inject_layout(*args, stride=stride, ring=ring)
    got = K.build_commit_inject_layout(*(a.to(DEV) for a in args), stride=stride, ring=ring)
    assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))
    window = data.draw(st.integers(1, ring + 3))
    ring2 = max(ring, window + 1)
    slot = rpi.repeat_interleave(stride)
    final = want[0] + data.draw(st.integers(0, 5))
    kw = dict(ring=ring2, window=window, final_pos=final, commit_lens=args[2], verify_len=stride)
    want_loc = R.unified_inject_loc(want[0], slot, **kw)
    got_loc = K.unified_inject_loc(want[0].to(DEV), slot.to(DEV), **{k: v.to(DEV) if isinstance(v, torch.Tensor)
                                                                      else v for k, v in kw.items()})
    assert torch.equal(got_loc.cpu(), want_loc)


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=25)
@BOUNDED
@given(st.lists(st.integers(0, 9), max_size=7), st.integers(0, 6), st.booleans(), st.integers(0, 30),
       st.integers(0, 999))
def test_prefill_builders_match_oracle(ext, extra, give_total, prefix_max, seed):
    bs = len(ext)
    g = torch.Generator().manual_seed(seed)
    e = torch.tensor(ext, dtype=torch.int64)
    prefix = torch.randint(0, prefix_max + 1, (bs,), generator=g)
    rpi = torch.randperm(2 * bs + 1, generator=g)[:bs].to(torch.int32)
    num_tokens = sum(ext) + extra if (give_total and bs) else None
    want = R.expand_prefill_causally(prefix + e, e, rpi, num_tokens=num_tokens)
    got = K.expand_prefill_causally((prefix + e).to(DEV), e.to(DEV), rpi.to(DEV), num_tokens=num_tokens)
    assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))
    want = R.prefill_inject_meta(rpi, prefix, e)
    got = K.prefill_inject_meta(rpi.to(DEV), prefix.to(DEV), e.to(DEV))
    assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=3)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=75)
@BOUNDED
@given(st.lists(st.integers(0, 9), max_size=8), st.integers(0, 4), st.integers(0, 40))
def test_pad_to_bucket_matches_oracle(lens, n_pad, extra):
    padded_bs = len(lens) + (n_pad if lens else max(n_pad, 1))
    tier = sum(lens) + extra
    v = torch.tensor(lens, dtype=torch.int32)
    got = K.pad_verify_lens_to_bucket(v.to(DEV), tier, padded_bs)
    assert torch.equal(got.cpu(), R.pad_verify_lens_to_bucket(v, tier, padded_bs))
    assert int(got.sum()) == tier


@st.composite
def prob_rows(draw):
    bs = draw(st.integers(1, 4))
    vocab = draw(st.integers(1, 48))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    if draw(st.booleans()):  # dyadic ties
        probs = torch.randint(0, draw(st.integers(1, 5)), (bs, vocab), generator=g).float() / 64
    else:
        probs = torch.rand(bs, vocab, generator=g) ** 2
    if draw(st.booleans()):
        probs = probs / probs.sum(-1, keepdim=True).clamp_min(1e-30)
    return probs * draw(st.sampled_from([1.0, 1.0, 1e6, 1e-9]))  # also the first split's edge ranges


def renorm_tuning(data):
    """Draw the renorm path (impl.testing.tunings): small-batch passes then a sorted gather (or, with 4
    sort slots, range passes over the gathered keys), or compaction + finish with a roomy or a 4-slot
    scratch (rows that never fit finish from their full row)."""
    tunings = renorm_tunings()
    return tunings[data.draw(st.sampled_from(sorted(tunings)))]


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=12)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=300)
@BOUNDED
@given(prob_rows(), st.data())
def test_top_k_renorm_matches_oracle(probs, data):
    k = torch.tensor(data.draw(st.lists(st.integers(-1, probs.shape[1] + 2), min_size=probs.shape[0],
                                        max_size=probs.shape[0])))
    got = K.top_k_renorm(probs.to(DEV), k.to(DEV), tuning=renorm_tuning(data))
    problem = mismatch(RENORM, got, R.top_k_renorm(probs, k))
    assert problem is None, problem


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=10)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=250)
@BOUNDED
@given(prob_rows(), st.data())
def test_top_p_renorm_matches_oracle(probs, data):
    ps = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.9, 1.0, 1.5]) | st.floats(0, 1, width=32),
                            min_size=probs.shape[0], max_size=probs.shape[0]))
    p = torch.tensor(ps, dtype=torch.float32)
    got = K.top_p_renorm(probs.to(DEV), p.to(DEV), tuning=renorm_tuning(data))
    problem = mismatch(RENORM, got, R.top_p_renorm(probs, p))
    assert problem is None, problem


@register(suite="kernels-properties", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=1)
@register(suite="kernels-properties", hardware="cpu", schedule="nightly", est_time=25)
@BOUNDED
@given(st.integers(0, 8), st.sampled_from([(), (2,)]), st.sampled_from([8, 24, 64]), st.data())
def test_norm_rope_matches_oracle(t, heads, d, data):
    rope_dim = data.draw(st.sampled_from([r for r in (0, 2, 8, 16) if r <= d]))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**16)))
    max_pos = 20
    angles = torch.rand(max_pos, rope_dim // 2, generator=g, dtype=torch.float64) * 6.3
    kw = dict(weight=(torch.rand(d, generator=g) + 0.5).bfloat16(), eps=1e-5, cos=angles.cos().float(),
              sin=angles.sin().float(), positions=torch.randint(0, max_pos, (t,), generator=g))
    kv = (torch.randn(t, *heads, d, generator=g) * 4).bfloat16()
    want = R.fused_norm_rope_(kv.clone(), **kw, rope_dim=rope_dim)
    got = K.fused_norm_rope_(kv.to(DEV), **{k: v.to(DEV) if isinstance(v, torch.Tensor) else v for k, v in kw.items()},
                             rope_dim=rope_dim)
    problem = mismatch(NORM_ROPE, got, want)
    assert problem is None, problem
