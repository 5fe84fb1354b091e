"""impl.bench.renorm_top_p_floors: it times top-p's own first pass, compaction and write on their grids and
shapes, and its floors do only what their names say (read; weigh the masses exactly; count the range),
checked entry by entry through the interpreter on CPU."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.bench import renorm_top_p_floors as floors
from impl.platform import default_device
from registered.renorm_tunings import SMALL_SHAPES

DEV = default_device()
# The large-batch plan (one-warp compaction summing its masses in each step's reduction) from 2 rows, at small shapes.
TUNING = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, large_batch_rows=2, huge_batch_rows=2,
                             large_batch_compact=(128, 1), huge_batch_compact=(128, 1),
                             large_batch_first_pass=(128, 2), large_batch_programs=8)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=40)
def test_each_row_is_the_plans_launch_on_its_grid_and_shape():
    rows = floors.measure(rows=3, vocab=1500, p=0.9, seed=1, device=DEV, tuning=TUNING)
    plan = rplan._plan(3, 1500, True, True, TUNING)
    first, compact, write = plan.launches[0], plan.launches[1], plan.write
    assert compact.meta["STEP_SUMS"] == 1 and compact.meta["num_warps"] == 1, "the plan the floors model"
    assert [r["launch"] for r in rows] == ["write", "copy floor", "first pass", "read floor", "first pass + compaction",
                                           *floors.WORKS, "compaction (difference)"]
    by_name = {r["launch"]: r for r in rows}
    assert by_name["compaction (difference)"]["us"] == pytest.approx(
        by_name["first pass + compaction"]["us"] - by_name["first pass"]["us"], abs=0.02)
    for r in rows:
        step = {"write": write, "copy floor": write, "first pass": first, "read floor": first}.get(r["launch"], compact)
        assert r["grid"] == list(step.grid) and r["us"] > 0, r
        assert (r["block"], r["warps"]) == (step.meta["BLOCK"], step.meta["num_warps"]), r
        assert r["mb"] == round(3 * 1500 * 4 / 1e6, 1) and r["p"] == 0.9, r
    assert first.grid[0] > 1, "several chunks a row: the floors' chunk arithmetic is exercised"
    assert "+ exact masses" in floors.table(rows)


@pytest.mark.parametrize("reversed_grid", [False, True])
@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=8)
def test_the_weigh_floor_sums_masses_and_counts_each_programs_entries(reversed_grid):
    g = torch.Generator().manual_seed(8)
    rows, vocab, chunk_len, block = 3, 1000, 384, 128  # a partial last chunk, a partial last block
    probs = torch.softmax(3 * torch.randn(rows, vocab, generator=g), -1)
    probs[0, 5], probs[0, 6], probs[1, 7], probs[1, 8] = float("nan"), -0.25, float("inf"), -0.0  # weigh 0
    keys = probs.view(torch.int32).clamp(min=0)
    keys = torch.where(probs.isfinite(), keys, 0)
    sorted_keys = keys.sort(dim=1, descending=True).values
    lo = sorted_keys[:, [300, 120, 999]].diagonal()  # row 2: lo is the smallest key, 0 (the NaN-free row's)
    hi = sorted_keys[:, [40, 0, 2]].diagonal()
    lo[2] = 0
    bounds = torch.stack([lo, hi], 1).to(torch.int32).contiguous()
    chunks = -(-vocab // chunk_len)
    out = torch.full((rows * chunks * 3,), float("nan"), dtype=torch.float64)
    clean = torch.where(keys > 0, probs, 0.0).double()
    for work, name in enumerate(floors.WORKS):
        floors._weigh_floor_kernel[(chunks, rows)](probs.to(DEV), bounds.to(DEV), out_dev := out.to(DEV), vocab,
                                                     chunk_len, WORK=work, BLOCK=block, REVERSED=reversed_grid,
                                                     num_warps=1)
        got = out_dev.cpu().view(rows, chunks, 3)
        for r in range(rows):
            for c in range(chunks):
                span = slice(c * chunk_len, min((c + 1) * chunk_len, vocab))
                if work == 0:
                    want = probs[r, span].sum()  # raw entries: NaN in row 0's first chunk
                    torch.testing.assert_close(got[r, c, 0].float(), want, rtol=1e-5, atol=0, equal_nan=True)
                    continue
                k, x = keys[r, span], clean[r, span]
                below, rest = x[k < lo[r]].sum(), x[k >= lo[r]].sum()
                tol = 1e-6 if work == 3 else 1e-12
                torch.testing.assert_close(got[r, c, :2], torch.stack([below, rest]), rtol=tol, atol=1e-30,
                                           msg=lambda m: f"{name}, row {r}, chunk {c}: {m}")
                if work >= 2:
                    assert got[r, c, 2] == ((k >= lo[r]) & (k < hi[r])).sum(), (name, r, c)
    assert got[2, :, 0].sum() == 0 and got[2, :, 2].sum() > 0, "row 2: nothing below lo = 0, its range counted"


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_a_plan_without_the_weighing_compaction_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        floors.main(["--rows", "2", "--vocab", "700"])
    assert exit_.value.code == 2
    assert "--rows 2: the compaction does not sum its masses in each step's reduction" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        floors.main(["--p", "1.5"])
    assert exit_.value.code == 2
    assert "--p: expected a probability in (0, 1), got 1.5" in capsys.readouterr().err
