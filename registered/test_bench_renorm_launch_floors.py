"""impl.bench.renorm_launch_floors: it times the plan's own first pass and write on their own grid and
shapes, and its floors do only what their names say (read, store zeros, copy), checked entry by entry
through the interpreter on CPU."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.plan as rplan
from ci.registration import register
from impl.bench import renorm_launch_floors as floors
from impl.platform import default_device
from registered.renorm_tunings import SMALL_SHAPES

DEV = default_device()
TUNING = dataclasses.replace(renorm.DEFAULT_TUNING, **SMALL_SHAPES, segment_maxima_rows=1)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=20)
def test_each_row_is_the_plans_launch_on_its_grid_and_shape():
    rows = floors.measure(rows=2, vocab=1500, k=40, seed=1, device=DEV, tuning=TUNING)
    plan = rplan._plan(2, 1500, False, True, TUNING)
    first, write = plan.launches[0], plan.write
    assert [r["launch"] for r in rows] == ["write", "zero-fill floor", "copy floor", "first pass", "read floor",
                                           "read, keys, maxima"]
    for r in rows:
        assert r["grid"] == list(first.grid) and r["us"] > 0 and r["mb"] == round(2 * 1500 * 4 / 1e6, 1)
        step = write if r["launch"] in ("write", "zero-fill floor", "copy floor") else first
        assert (r["block"], r["warps"]) == (step.meta["BLOCK"], step.meta["num_warps"]), r
    assert first.grid[0] > 1, "several chunks a row: the floors' chunk arithmetic is exercised"
    assert "read, keys, maxima" in floors.table(rows)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=6)
def test_the_floors_read_store_and_copy_every_entry():
    g = torch.Generator().manual_seed(5)
    vocab, chunk_len, block = 1000, 384, 128  # a partial last chunk, a partial last block
    probs = torch.softmax(3 * torch.randn(2, vocab, generator=g), -1).to(DEV)
    grid = (-(-vocab // chunk_len), 2)
    sums = torch.full((2 * grid[0],), float("nan"), device=DEV)
    seg = torch.full((2, -(-vocab // 32)), -7, dtype=torch.int32, device=DEV)
    floors._read_floor_kernel[grid](probs, seg, sums, vocab, chunk_len, KEYS=False, BLOCK=block, num_warps=1)
    chunks = [probs[r, c * chunk_len:(c + 1) * chunk_len].sum() for r in range(2) for c in range(grid[0])]
    torch.testing.assert_close(sums.cpu(), torch.stack(chunks).cpu(), rtol=1e-5, atol=0)
    floors._read_floor_kernel[grid](probs, seg, sums, vocab, chunk_len, KEYS=True, BLOCK=block, num_warps=1)
    padded = torch.nn.functional.pad(probs.view(torch.int32), (0, seg.shape[1] * 32 - vocab))
    assert torch.equal(seg, padded.view(2, -1, 32).amax(-1))
    tops = [probs[r, c * chunk_len:(c + 1) * chunk_len].max() for r in range(2) for c in range(grid[0])]
    assert torch.equal(sums.cpu(), torch.stack(tops).cpu()), "each program's largest entry"
    out = torch.full_like(probs, float("nan"))
    floors._store_floor_kernel[grid](probs, out, vocab, chunk_len, COPY=True, BLOCK=block, num_warps=1)
    assert torch.equal(out, probs)
    floors._store_floor_kernel[grid](probs, out, vocab, chunk_len, COPY=False, BLOCK=block, num_warps=1)
    assert torch.equal(out, torch.zeros_like(probs))


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_too_few_rows_for_the_map_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        floors.main(["--rows", "2", "--vocab", "700"])
    assert exit_.value.code == 2
    assert "--rows 2 do not take the segment maxima" in capsys.readouterr().err
