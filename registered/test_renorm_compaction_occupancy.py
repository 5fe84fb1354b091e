"""How the compaction holds its registers (renorm v25): register cap, per-step mass sums, split width.

Three RenormTuning knobs steer how many programs of the compaction an SM holds at once, so how many
waves its (chunk, row) grid takes, and none may change what a call keeps:

- ``large_batch_compact_registers``: on CUDA the one-warp compaction of large batches (below
  huge_batch_rows) compiles with Triton's ``maxnreg``; never on HIP, the CPU or the interpreter, and
  never for another compaction shape;
- ``compact_step_sums``: how top-p's first compaction sums its exact fp64 masses (one accumulator an
  entry, or each step's sums reduced in that step), chosen by whether its programs are one warp;
- ``unfit_split_entries``: entries a thread a step when that compaction splits rows that did not fit.
"""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.kernels as rk
import impl.kernels.renorm.plan as rplan
import reference as R
from ci.registration import register
from impl.kernels import _backend
from impl.kernels.renorm.workspace import _launch_all
from impl.testing.op_table import RENORM, mismatch
from registered.skips import requires_gpu

VOCAB = 129280
SMALL = dict(chunk_align=256, first_pass=(256, 2), narrow_pass=(256, 2), write=(256, 2), target_programs=(16, 16),
             finish=((256, 2), (256, 2)), finish_min_rows=(1, 1))  # interpreter-sized launches, the finish path


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_register_cap_goes_to_the_large_batch_one_warp_compaction_on_cuda_only(top_p):
    t = dataclasses.replace(renorm.DEFAULT_TUNING, large_batch_compact_registers=(64, 96))
    cap = 96 if top_p else 64
    seen = 0
    for bs in (1, 8, 32, 64, 128, 256, 512):
        large = t.large_batch_rows[top_p] <= bs < t.huge_batch_rows[top_p]
        for device_ok in (False, True):
            plan = rplan._plan(bs, VOCAB, top_p, True, t, False, device_ok)
            for step in (*plan.launches, plan.write):
                want = cap if (step.args == "compact" and large and device_ok) else None
                assert step.meta.get("maxnreg") == want, (bs, device_ok, step.args)
                seen += want is not None
    assert seen, "no batch took the capped compaction"
    off = dataclasses.replace(t, large_batch_compact_registers=0)
    for bs in (64, 128):
        plan = rplan._plan(bs, VOCAB, top_p, True, off, False, True)
        assert all("maxnreg" not in step.meta for step in plan.launches), bs


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=2)
def test_top_p_first_compaction_sums_by_its_program_width_and_splits_by_rows():
    t = dataclasses.replace(renorm.DEFAULT_TUNING, compact_step_sums=(1, 2), unfit_split_entries=(8, 2))
    widths = set()
    for top_p in (False, True):
        for bs in (1, 8, 32, 64, 128, 256):
            plan = rplan._plan(bs, VOCAB, top_p, True, t, False, True)
            compactions = [step for step in plan.launches if step.args == "compact"]
            for attempt, step in enumerate(compactions, start=1):
                masses = top_p and attempt == 1
                warps = step.meta["num_warps"]
                assert step.meta["STEP_SUMS"] == (t.compact_step_sums[warps > 1] if masses else 0), (bs, attempt)
                assert step.meta["SPLIT_ENTRIES"] == t.unfit_split_entries[bs >= t.target_programs_rows], bs
                if masses:
                    widths.add(warps > 1)
    assert widths == {False, True}, "the defaults no longer reach both program widths"


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("changes, message", [
    ({"large_batch_compact_registers": 16}, "large_batch_compact_registers must be 0 or an int in"),
    ({"large_batch_compact_registers": (64, 300)}, "large_batch_compact_registers must be 0 or an int in"),
    ({"large_batch_compact_registers": True}, "large_batch_compact_registers must be 0 or an int in"),
    ({"compact_step_sums": (1, 3)}, "compact_step_sums must be a"),
    ({"compact_step_sums": 1}, "compact_step_sums must be a"),
    ({"unfit_split_entries": (4, 3)}, "unfit_split_entries must be a"),
    ({"unfit_split_entries": (4, 32)}, "unfit_split_entries must be a"),
], ids=["cap-too-small", "cap-too-large", "cap-bool", "mode-3", "mode-not-a-pair", "split-not-pow2",
        "split-too-wide"])
def test_a_tuning_refuses_bad_occupancy_knobs(changes, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(renorm.DEFAULT_TUNING, **changes)


def _fresh_rows(seed: int, bs: int, vocab: int, scale: float, device: str = "cpu") -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(bs, vocab, generator=g) * scale, -1).to(device)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=30)
@pytest.mark.parametrize("warps", [1, 2], ids=["one-warp", "two-warps"])
def test_every_mass_sum_mode_and_split_width_keeps_the_oracle_set(warps):
    """Top-p's first compaction in each mode, with candidate slots to spare and with too few (so it
    splits the rows that did not fit, at 2 and at 4 entries a thread), against the fp64 oracle."""
    rows = _fresh_rows(7, 4, 3000, 3.0)
    p = torch.tensor([0.9, 0.5, 0.99, 0.75])
    want = R.top_p_renorm(rows, p)
    for capacity in (64, 4096):
        for mode in (0, 1, 2):
            for entries in (2, 4):
                t = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL, candidate_capacity=capacity,
                                        compact=((256, warps), (256, warps)), compact_step_sums=(mode, mode),
                                        unfit_split_entries=(entries, entries))
                got = renorm.top_p_renorm(rows, p, tuning=t)
                problem = mismatch(RENORM, got, want)
                assert problem is None, (capacity, mode, entries, problem)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("warps", [1, 2], ids=["one-warp", "two-warps"])
def test_the_first_compaction_stores_each_rows_fp64_masses_in_every_mode(warps):
    """After top-p's first compaction alone, each row's BELOW_MASS and TOTAL words against exact sums of
    its cleaned entries (NaN, inf, negative and -0.0 weigh 0), below the row's range start and in all, in
    every mass-sum mode: the words every later launch takes the pivot's mass from."""
    rows = _fresh_rows(11, 4, 3000, 3.0)
    rows[0, 5], rows[1, 7], rows[2, 9], rows[3, 11] = float("nan"), float("inf"), -0.25, -0.0
    p = torch.tensor([0.9, 0.5, 0.99, 0.75])
    clean = torch.where(torch.isfinite(rows) & (rows > 0), rows, torch.zeros_like(rows)).double()
    for mode in (0, 1, 2):
        t = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL, compact=((256, warps), (256, warps)),
                                compact_step_sums=(mode, mode))
        plan = rplan._plan(rows.shape[0], rows.shape[1], True, True, t)
        first = next(i for i, launch in enumerate(plan.launches) if launch.args == "compact")
        assert plan.launches[first].meta["MASSES"], "top-p's first compaction weighs the rows"
        ws = _launch_all(rows, None, p, dataclasses.replace(plan, launches=plan.launches[:first + 1]), None)
        state = ws.state.cpu()
        words = state.view(torch.float64)
        for r in range(rows.shape[0]):
            lo = int(state[r, int(rk.LO)])
            keys = clean[r].float().view(torch.int32)
            below = math.fsum(clean[r][keys < lo].tolist())
            total = math.fsum(clean[r].tolist())
            assert 0 < below < total, (mode, r, "the range should start above some of the row's mass")
            assert math.isclose(float(words[r, int(rk.BELOW_MASS)]), below, rel_tol=1e-13), (mode, r)
            assert math.isclose(float(words[r, int(rk.TOTAL)]), total, rel_tol=1e-13), (mode, r)


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=40)
@requires_gpu()
def test_on_the_gpu_the_cap_holds_and_changes_no_bit_and_every_mode_keeps_the_oracle_set():
    """64 bench rows of top-k take the capped one-warp compaction: its compiled kernel holds at most the
    cap and the call equals the uncapped one bit for bit. Top-p's first compaction in every mass-sum
    mode, in one-warp and four-warp programs, on bench and flat rows: the oracle's kept set."""
    on = renorm.DEFAULT_TUNING
    cap = on.large_batch_compact_registers[0]
    assert cap, "the default tuning no longer caps the top-k compaction"
    rows = _fresh_rows(64, 64, VOCAB, 3.0, "cuda")
    off = dataclasses.replace(on, large_batch_compact_registers=0)
    for k in (50, 1000):
        assert torch.equal(renorm.top_k_renorm(rows, k, tuning=on), renorm.top_k_renorm(rows, k, tuning=off)), k
    plan = rplan._plan_for(64, VOCAB, False, False, on, _backend.dependent_launch_ok(rows), True)
    compactions = [ck for kernels in plan.compiled.values() for ck in kernels if ck.metadata.name == "_compact_kernel"]
    assert compactions, "the calls compiled no compaction of this plan"
    assert all(ck.n_regs <= cap for ck in compactions), [ck.n_regs for ck in compactions]
    for scale in (3.0, 1.0):
        rows = _fresh_rows(int(scale) + 8, 8, VOCAB, scale, "cuda")
        want = {p: R.top_p_renorm(rows.cpu(), p) for p in (0.9, 0.95)}
        # the finish path's four-warp and one-warp compaction, and the large-batch path's (one warp)
        for warps, large in ((4, 1 << 20), (1, 1 << 20), (4, 8)):
            for mode in (0, 1, 2):
                t = dataclasses.replace(on, finish_min_rows=(1, 1), large_batch_rows=(large, large),
                                        compact=((1024, warps), (1024, warps)), compact_step_sums=(mode, mode))
                for p, expected in want.items():
                    problem = mismatch(RENORM, renorm.top_p_renorm(rows, p, tuning=t).cpu(), expected)
                    assert problem is None, (scale, warps, large, mode, p, problem)
