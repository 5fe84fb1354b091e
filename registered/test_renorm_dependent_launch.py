"""Renorm's programmatic dependent launches (RenormTuning.dependent_launch_rows and write_preload, renorm v22).

On a CUDA GPU of compute capability 9.0 or later, batches below dependent_launch_rows launch every
kernel of a call with ``launch_pdl``: a launch may start while the one before it runs, each program
waiting at its top (kernels.py, _after_the_launch_before) until that launch has finished. That may
only move time: the device gate must hold back every other backend, the plan must mark exactly the
batches below the threshold, and the outputs must not change by one bit, eager, through the fast
path, in the eager calls' graphs and in a captured graph replayed on fresh inputs. A write that
preloads its whole chunk before it waits (write_preload) must write every entry the looping write does,
to the same bit.
"""
from __future__ import annotations

import dataclasses
import types

import pytest
import torch

import impl.kernels.renorm as renorm
import impl.kernels.renorm.plan as rplan
import reference as R
from ci.registration import register
from impl.kernels import _backend
from impl.kernels.renorm.tuning import WRITE_PRELOAD_MAX
from impl.kernels.renorm.workspace import _launch_all
from impl.platform import default_device
from impl.testing.op_table import RENORM, mismatch
from registered.skips import requires_gpu

VOCAB = 129280
DEV = default_device()


def _device_like(is_cuda: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(is_cuda=is_cuda, get_device=lambda: 0)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("interpreted, is_cuda, hip, major, want", [
    (False, True, None, 9, True),      # compiled CUDA on sm90
    (False, True, None, 10, True),     # and later
    (False, True, None, 8, False),     # sm80 has no programmatic dependent launch
    (False, True, "6.4", 9, False),    # a ROCm build (its capability says nothing)
    (False, False, None, 9, False),    # a CPU tensor
    (True, True, None, 9, False),      # the interpreter
], ids=["sm90", "sm100", "sm80", "hip", "cpu", "interpreter"])
def test_only_compiled_cuda_from_sm90_takes_dependent_launches(monkeypatch, interpreted, is_cuda, hip, major, want):
    monkeypatch.setattr(_backend, "INTERPRETED", interpreted)
    monkeypatch.setattr(_backend, "_DEPENDENT_LAUNCH", {})
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev: (major, 0))
    assert _backend.dependent_launch_ok(_device_like(is_cuda)) is want


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_plan_marks_every_launch_below_the_threshold_only(top_p):
    """Below dependent_launch_rows (by op) every launch of the call, the write included, is compiled
    with launch_pdl and waits at its top (PDL); at and above it, or on a device without them, none."""
    t = dataclasses.replace(renorm.DEFAULT_TUNING, dependent_launch_rows=(48, 96))
    threshold = t.dependent_launch_rows[top_p]
    for bs in (1, 8, 47, 48, 95, 96, 256):
        for device_ok in (False, True):
            plan = rplan._plan(bs, VOCAB, top_p, True, t, device_ok)
            want = device_ok and bs < threshold
            for step in (*plan.launches, plan.write):
                assert step.meta["PDL"] is want, (bs, device_ok, step.args)
                assert step.meta.get("launch_pdl", False) is want, (bs, device_ok, step.args)
    never = dataclasses.replace(renorm.DEFAULT_TUNING, dependent_launch_rows=0)
    plan = rplan._plan(1, VOCAB, top_p, True, never, True)
    assert not any(step.meta["PDL"] for step in (*plan.launches, plan.write))


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_write_preloads_only_without_the_map_below_the_threshold_when_its_chunk_fits():
    """PRELOAD is the chunk's blocks rounded up to a power of two, set only with write_preload (by op),
    below dependent_launch_rows, without the segment maxima and when the blocks hold at most
    WRITE_PRELOAD_MAX entries; the defaults preload top-p's write only."""
    t = dataclasses.replace(renorm.DEFAULT_TUNING, write_preload=True, dependent_launch_rows=(256, 128))
    for top_p in (False, True):
        for bs in (1, 8, 31, 32, 64, 127, 128, 256):
            plan = rplan._plan(bs, VOCAB, top_p, True, t)
            write = plan.write.meta
            chunk_len = plan.write.sizes[1]
            blocks = 1 << (-(-chunk_len // write["BLOCK"]) - 1).bit_length()
            fits = blocks * write["BLOCK"] <= WRITE_PRELOAD_MAX
            want = blocks if (not write["SEG_MAP"] and bs < t.dependent_launch_rows[top_p] and fits) else 0
            assert write["PRELOAD"] == want, (top_p, bs, chunk_len, write["PRELOAD"])
    assert rplan._plan(64, VOCAB, True, True, renorm.DEFAULT_TUNING).write.meta["PRELOAD"] == 8  # 8192-entry chunks
    assert rplan._plan(1, VOCAB, False, True, renorm.DEFAULT_TUNING).write.meta["PRELOAD"] == 0
    off = dataclasses.replace(t, write_preload=False)
    assert rplan._plan(1, VOCAB, True, True, off).write.meta["PRELOAD"] == 0


@register(suite="kernels", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=20)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_a_preloading_write_writes_every_entry_as_the_loop_does(top_p):
    """The write in one preloaded tile (1, 16 and 32 blocks: chunks of one block, two chunks a row,
    and a row in one program) against the looping write, each into an output poisoned with NaN: every entry
    written, the two equal bit for bit, and both the oracle's. Rows hold NaN, -1 and +inf entries and
    lengths that are no multiple of the block."""
    gen = torch.Generator().manual_seed(11 + top_p)
    cases = [(1, 5000, dict()), (3, 7001, dict(target_programs=2, write=(256, 2))),
             (2, 8000, dict(target_programs=1, write=(256, 2)))]
    for bs, vocab, shape in cases:
        probs = torch.softmax(torch.randn(bs, vocab, generator=gen) * 3, -1)
        probs[0, :5] = float("nan")
        probs[-1, 7] = -1.0
        probs[-1, -1] = float("inf")
        probs = probs.to(DEV)
        param = torch.full((bs,), 0.9) if top_p else torch.full((bs,), 40, dtype=torch.int64)
        param = param.to(DEV)
        outs = []
        for preload in (False, True):
            t = dataclasses.replace(renorm.DEFAULT_TUNING, write_preload=preload, segment_maxima=False, **shape)
            plan = rplan._plan(bs, vocab, top_p, True, t)
            assert (plan.write.meta["PRELOAD"] > 0) is preload, (bs, vocab, plan.write.meta["PRELOAD"])
            out = torch.full_like(probs, float("nan"))
            _launch_all(probs, None, param, plan, out)
            assert not out.isnan().any(), f"{bs}x{vocab}, preload {preload}: entries left unwritten"
            outs.append(out.cpu())
        blocks = rplan._plan(bs, vocab, top_p, True, dataclasses.replace(
            renorm.DEFAULT_TUNING, write_preload=True, segment_maxima=False, **shape)).write.meta["PRELOAD"]
        assert torch.equal(outs[0], outs[1]), f"{bs}x{vocab}: {blocks} preloaded blocks differ from the loop"
        want = (R.top_p_renorm if top_p else R.top_k_renorm)(probs.cpu(), param.cpu())
        problem = mismatch(RENORM, outs[1], want)
        assert problem is None, f"{bs}x{vocab}: {problem}"


def _rows(seed: int, bs: int, scale: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(bs, VOCAB, generator=g) * scale, -1).cuda()


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=40)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_dependent_launches_change_no_bit(top_p):
    """The same calls with dependent launches at every batch and never: equal outputs bit for bit,
    on rows the finish path and the small-batch path take and on flat rows (softmax of 0.1 x randn),
    through the full path, the fast path, the eager calls' graphs and a captured graph replayed 12
    times on alternating inputs copied into its buffer. The kernels the call compiled carry
    launch_pdl and wait on the launch before (griddepcontrol.wait in their PTX); on a GPU without
    dependent launches none does."""
    op = renorm.top_p_renorm if top_p else renorm.top_k_renorm
    always = dataclasses.replace(renorm.DEFAULT_TUNING, dependent_launch_rows=1 << 20)
    never = dataclasses.replace(renorm.DEFAULT_TUNING, dependent_launch_rows=0)
    device_ok = _backend.dependent_launch_ok(torch.empty(1, device="cuda"))
    params = (0.9, 0.95) if top_p else (50, 1000)
    for bs in (1, 8, 64, 256):
        rows = [_rows(10 + bs, bs, 3.0), _rows(20 + bs, bs, 0.1)]
        for param in params:
            want = [op(x, param, tuning=never) for x in rows]
            for call in range(6):  # the full path, then the fast path, then the eager calls' graph
                got = op(rows[call % 2], param, tuning=always)
                assert torch.equal(got, want[call % 2]), (bs, param, call)
            buf = rows[0].clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                op(buf, param, tuning=always)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = op(buf, param, tuning=always)
            for replay in range(12):
                buf.copy_(rows[replay % 2])
                graph.replay()
                assert torch.equal(out, want[replay % 2]), (bs, param, "replay", replay)
        plan = rplan._plan_for(bs, VOCAB, top_p, False, always, device_ok, _backend.ptx_ok(rows[0]))
        compiled = [ck for kernels in plan.compiled.values() for ck in kernels]
        assert compiled, "the calls compiled no kernel of this plan"
        for ck in compiled:
            assert bool(ck.metadata.launch_pdl) is device_ok, ck.metadata.name
            assert ("griddepcontrol.wait" in ck.asm["ptx"]) is device_ok, ck.metadata.name
