"""Top-p's first-pass clamps as saturating multiplies (RenormTuning.sat_clamps, renorm v26).

Top-p's first pass sums, for each bucket start c, every entry clamped at c: min(x, c). On CUDA the
kernel computes that as c * sat(x / c) (inline PTX ``mul.rn.sat.f32``, then a multiply-add into the
sum), which runs on the FP32 pipe where a min runs on the integer pipe the pass keeps busiest. The
rewrite is exact only because every bucket start is a power of two: x / c and c * s then round
nothing. So: the starts must be powers of two, the identity must hold bit for bit over the whole fp32
range (subnormals, the starts themselves and their neighbours), the plan must set the flag on top-p's
first pass only, on CUDA only, and on a GPU the sums and the outputs must not change by one bit.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.kernels import _backend
from impl.kernels.renorm.workspace import _launch_all
from registered.skips import requires_gpu

VOCAB = 129280
NB = rk.FIRST_NB_TOP_P.value
# a first-pass program's partial words: its bucket counts, its clamped sums, its largest key
WRITTEN = [*range(NB), *range(rk.MASS_AT.value, rk.MASS_AT.value + NB), rk.TOP_KEY_SLOT.value]
STARTS = [getattr(rk, f"BUCKET_START_{b}").value for b in range(1, rk.FIRST_NB_TOP_P.value)]


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_every_bucket_start_is_a_power_of_two():
    for c in STARTS:
        mantissa, _ = torch.frexp(torch.tensor(c, dtype=torch.float64))
        assert float(mantissa) == 0.5, c


def _fp32_probe_values() -> torch.Tensor:
    """Non-negative fp32 values across the whole range: random bit patterns (subnormals included),
    each start and its two neighbours, zero, the smallest subnormal and the largest finite value."""
    g = torch.Generator().manual_seed(3)
    bits = torch.randint(0, 0x7F800000, (20000,), generator=g, dtype=torch.int64).to(torch.int32)
    random = bits.view(torch.float32)
    starts = torch.tensor(STARTS, dtype=torch.float32)
    edges = torch.cat([starts, torch.nextafter(starts, torch.zeros_like(starts)),
                       torch.nextafter(starts, torch.full_like(starts, 2.0))])
    fixed = torch.tensor([0.0, 1e-45, 3.4028235e38, 1.0], dtype=torch.float32)
    return torch.cat([random, edges, fixed])


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_a_start_times_the_saturated_quotient_is_the_min_bit_for_bit():
    x = _fp32_probe_values()
    for c in STARTS:
        start = torch.tensor(c, dtype=torch.float32)
        saturated = (x * (1.0 / start)).clamp(0.0, 1.0)  # what mul.rn.sat.f32 returns for x >= 0
        got = saturated * start
        want = torch.minimum(x, start)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), c


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_plan_sets_sat_clamps_on_top_p_first_passes_only_when_the_device_and_tuning_allow(top_p):
    off = dataclasses.replace(renorm.DEFAULT_TUNING, sat_clamps=False)
    firsts = 0
    for bs in (1, 8, 64, 256):
        for t in (renorm.DEFAULT_TUNING, off):
            for device_ok in (False, True):
                plan = rplan._plan(bs, VOCAB, top_p, True, t, False, device_ok)
                for step in (*plan.launches, plan.write):
                    if step.args == "first":
                        firsts += 1
                        assert step.meta["SAT_CLAMPS"] is (device_ok and t.sat_clamps and top_p), (bs, device_ok)
                    else:
                        assert "SAT_CLAMPS" not in step.meta, (bs, step.args)
    assert firsts == 16


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_a_tuning_refuses_a_sat_clamps_that_is_not_a_bool():
    with pytest.raises(ValueError, match="sat_clamps must be a bool"):
        renorm.RenormTuning(sat_clamps=1)


def _rows(seed: int, bs: int, scale: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    rows = torch.softmax(torch.randn(bs, VOCAB, generator=g) * scale, -1)
    rows[:, :8] = torch.tensor(STARTS + [1e-40], dtype=torch.float32)  # entries at each start and a subnormal
    return rows.cuda()


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=30)
@requires_gpu()
def test_sat_clamps_change_no_bit():
    """With and without the saturating clamps, at batches of the small-batch, finish and large-batch
    paths, on bench rows and flat rows holding each bucket start and a subnormal: the first pass's
    partial sums (its launch alone) and the outputs equal bit for bit; the compiled first pass holds the
    saturating multiply exactly when the tuning asks for it."""
    on = renorm.DEFAULT_TUNING
    off = dataclasses.replace(on, sat_clamps=False)
    assert on.sat_clamps, "the default tuning no longer takes the saturating clamps"
    for bs in (1, 8, 64, 256):
        for scale in (3.0, 0.1):
            rows = _rows(int(10 * scale) + bs, bs, scale)
            p = torch.full((bs,), 0.9, device="cuda")
            partials = []
            for t in (on, off):
                plan = rplan._plan(bs, VOCAB, True, True, t, False, _backend.ptx_ok(rows))
                first = dataclasses.replace(plan, launches=plan.launches[:1])
                part = _launch_all(rows, None, p, first, None).part
                partials.append(part[..., WRITTEN].clone())  # the words the first pass writes (the rest: empty)
            assert torch.equal(partials[0], partials[1]), (bs, scale)
            for param in (0.9, 0.95):
                assert torch.equal(renorm.top_p_renorm(rows, param, tuning=on),
                                   renorm.top_p_renorm(rows, param, tuning=off)), (bs, scale, param)
        for t, inline in ((on, True), (off, False)):
            plan = rplan._plan_for(bs, VOCAB, True, False, t, _backend.dependent_launch_ok(rows), True)
            firsts = [ck for kernels in plan.compiled.values() for ck in kernels
                      if ck.metadata.name == "_first_pass_kernel"]
            assert firsts, (bs, inline, "the calls compiled no first pass of this plan")
            assert all(("mul.rn.sat.f32" in ck.asm["ptx"]) is inline for ck in firsts), (bs, inline)
