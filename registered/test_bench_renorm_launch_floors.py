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
    compact = plan.launches[1]
    gathers = [r for r in rows if r["launch"] == "gather floor"]
    assert [r["launch"] for r in rows if r["launch"] != "gather floor"] == [
        "write", "zero-fill floor", "copy floor", "first pass", "read floor", "read, keys, maxima",
        "first pass + compaction", "compaction (difference)"]
    by_name = {r["launch"]: r for r in rows}
    assert by_name["compaction (difference)"]["us"] == pytest.approx(
        by_name["first pass + compaction"]["us"] - by_name["first pass"]["us"], abs=0.02)
    for r in rows:
        assert r["mb"] == round(2 * 1500 * 4 / 1e6, 1), r
        if r in gathers:
            continue
        assert r["grid"] == list(first.grid) and r["us"] > 0
        step = {"write": write, "zero-fill floor": write, "copy floor": write, "first pass + compaction": compact,
                "compaction (difference)": compact}.get(r["launch"], first)
        assert (r["block"], r["warps"]) == (step.meta["BLOCK"], step.meta["num_warps"]), r
    assert [(r["block"], r["warps"]) for r in gathers][0] == (compact.meta["BLOCK"], compact.meta["num_warps"])
    assert gathers[-1]["block"] == 1024 and gathers[-1]["warps"] == 4
    assert all(0 < r["segment_share"] <= 1 and r["us"] > 0 for r in gathers)
    assert first.grid[0] > 1, "several chunks a row: the floors' chunk arithmetic is exercised"
    assert "read, keys, maxima" in floors.table(rows) and "% of them" in floors.table(rows)


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


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=4)
def test_the_gather_floor_reads_exactly_the_listed_segments():
    """The listed segments are those whose largest key reaches the row's start (a short last segment
    included), and the gather floor sums exactly their entries: each program its BLOCK // SEG of them,
    the last program's list partial."""
    g = torch.Generator().manual_seed(6)
    vocab = 1000  # 31 full segments and a short one of 8 entries a row
    probs = torch.softmax(3 * torch.randn(3, vocab, generator=g), -1).to(DEV)
    padded = torch.nn.functional.pad(probs.view(torch.int32), (0, 32 * 32 - vocab))
    seg = padded.view(3, -1, 32).amax(-1)
    lo = seg.float().quantile(0.6, dim=1).to(torch.int64)  # about 40% of each row's segments
    lo[2] = 0  # every segment of row 2, its short one too
    starts = floors.listed_segment_starts(seg, lo, vocab)
    want = [(r, j) for r in range(3) for j in range(seg.shape[1]) if seg[r, j] >= lo[r]]
    assert starts.tolist() == [r * vocab + 32 * j for r, j in want]
    block = 128  # 4 segments a program
    programs = -(-starts.numel() // 4)
    assert starts.numel() % 4, "a partial last program"
    sums = torch.full((programs,), float("nan"), device=DEV)
    floors._gather_floor_kernel[(programs,)](probs, starts, sums, starts.numel(), vocab, BLOCK=block, num_warps=1)
    flat = probs.reshape(-1)
    per_segment = [flat[s:min(s + 32, (s // vocab + 1) * vocab)].sum() for s in starts.tolist()]
    expected = torch.stack([sum(per_segment[i:i + 4]) for i in range(0, len(per_segment), 4)])
    torch.testing.assert_close(sums.cpu(), expected.cpu(), rtol=1e-5, atol=0)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_too_few_rows_for_the_map_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        floors.main(["--rows", "2", "--vocab", "700"])
    assert exit_.value.code == 2
    assert "--rows 2 do not take the segment maxima" in capsys.readouterr().err
