"""Renorm's scattered stores as inline PTX (RenormTuning.ptx_stores, renorm v24).

The stores that place candidates at computed slots (the compaction, the finish's moving passes, the
small-batch gather) go through kernels.py's _scatter: on CUDA an inline-PTX predicated store in the
layout its operands already have, elsewhere tl.store. That may only move time: the device gate must
hold back HIP, the CPU and the interpreter (PTX compiles for CUDA alone), the plan must set the flag
on exactly the kernels that scatter, and on a GPU the outputs must not change by one bit.
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
from impl.testing.op_table import RENORM, mismatch
from registered.skips import requires_gpu

VOCAB = 129280
SCATTERING = {"compact", "finish", "gather"}  # the launches whose kernels take PTX_STORES
SCATTERING_KERNELS = {"_compact_kernel", "_finish_kernel", "_gather_finish_kernel"}


def _device_like(is_cuda: bool) -> types.SimpleNamespace:
    return types.SimpleNamespace(is_cuda=is_cuda, get_device=lambda: 0)


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("interpreted, is_cuda, hip, want", [
    (False, True, None, True),      # compiled CUDA
    (False, True, "6.4", False),    # a ROCm build: its tensors say is_cuda too
    (False, False, None, False),    # a CPU tensor
    (True, True, None, False),      # the interpreter
], ids=["cuda", "hip", "cpu", "interpreter"])
def test_only_compiled_cuda_takes_inline_ptx(monkeypatch, interpreted, is_cuda, hip, want):
    monkeypatch.setattr(_backend, "INTERPRETED", interpreted)
    monkeypatch.setattr(torch.version, "hip", hip)
    assert _backend.ptx_ok(_device_like(is_cuda)) is want


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_the_plan_sets_ptx_stores_on_the_scattering_kernels_only_when_the_device_and_tuning_allow(top_p):
    """Every compact, finish and gather launch carries PTX_STORES = device allows and tuning.ptx_stores;
    the first pass, the passes and the write have no such parameter (nothing they store is scattered)."""
    off = dataclasses.replace(renorm.DEFAULT_TUNING, ptx_stores=False)
    seen = set()
    for bs in (1, 8, 64, 256):  # the small-batch path (gather), the finish path, the large-batch shapes
        for t in (renorm.DEFAULT_TUNING, off):
            for device_ok in (False, True):
                plan = rplan._plan(bs, VOCAB, top_p, True, t, False, device_ok)
                for step in (*plan.launches, plan.write):
                    takes_it = "PTX_STORES" in step.kernel.arg_names
                    assert takes_it is (step.args in SCATTERING), (bs, step.args)
                    if takes_it:
                        seen.add(step.args)
                        assert step.meta["PTX_STORES"] is (device_ok and t.ptx_stores), (bs, device_ok, step.args)
                    else:
                        assert "PTX_STORES" not in step.meta, (bs, step.args)
    assert seen == ({"compact", "finish", "gather"} if top_p else {"compact", "finish"}), seen


@register(suite="kernels", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_a_tuning_refuses_a_ptx_stores_that_is_not_a_bool():
    with pytest.raises(ValueError, match="ptx_stores must be a bool"):
        renorm.RenormTuning(ptx_stores=1)


def _rows(seed: int, bs: int, scale: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(bs, VOCAB, generator=g) * scale, -1).cuda()


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=40)
@requires_gpu()
@pytest.mark.parametrize("top_p", [False, True], ids=["top_k", "top_p"])
def test_ptx_stores_change_no_bit(top_p):
    """The same calls with and without the inline-PTX stores, at batches that take the small-batch
    path, the finish path and the large-batch shapes (top-k with the segment maxima), on bench rows
    and on flat rows (softmax of 0.1 x randn: the narrowing paths): equal bit for bit, eager and in a
    captured graph, and the oracle's. The compiled scattering kernels hold the inline store exactly
    when the tuning asks for it."""
    op = renorm.top_p_renorm if top_p else renorm.top_k_renorm
    ref = R.top_p_renorm if top_p else R.top_k_renorm
    on = renorm.DEFAULT_TUNING
    off = dataclasses.replace(on, ptx_stores=False)
    params = (0.9, 0.95) if top_p else (50, 1000)
    for bs in (1, 8, 64, 256):
        for scale in (3.0, 0.1):
            rows = _rows(int(10 * scale) + bs, bs, scale)
            for param in params:
                want = op(rows, param, tuning=off)
                got = op(rows, param, tuning=on)
                assert torch.equal(got, want), (bs, scale, param)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    op(rows, param, tuning=on)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    graph_out = op(rows, param, tuning=on)
                graph_out.fill_(float("nan"))  # poisoned: an entry the replay does not write shows
                graph.replay()
                assert torch.equal(graph_out, want), (bs, scale, param, "graph")
                if bs <= 8:  # the oracle sorts every row in Python: seconds at the larger batches
                    problem = mismatch(RENORM, got.cpu(), ref(rows.cpu(), param))
                    assert problem is None, (bs, scale, param, problem)
        for t, inline in ((on, True), (off, False)):
            plan = rplan._plan_for(bs, VOCAB, top_p, False, t, _backend.dependent_launch_ok(rows), True)
            compiled = [ck for kernels in plan.compiled.values() for ck in kernels]
            scattering = [ck for ck in compiled if ck.metadata.name in SCATTERING_KERNELS]
            assert scattering, (bs, inline, "the calls compiled no scattering kernel of this plan")
            for ck in compiled:
                has = "@p st.global.f32" in ck.asm["ptx"]
                assert has is (inline and ck.metadata.name in SCATTERING_KERNELS), (bs, inline, ck.metadata.name)
