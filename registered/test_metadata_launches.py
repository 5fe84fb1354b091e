"""Kernel launches per metadata-builder call, per layout path (docs/design.md §4), and the
ragged-graph path captured in a CUDA graph.

Where the sync policy elides the expansion's sync, a builder call is one Triton launch
(``impl.kernels.build_token_metadata``) plus, on the eager ragged path, the one kernel of
the total it reads back (``token_metadata.real_total``; the ``.item()`` the policy keeps).
On CPU the launches are counted in the Triton interpreter (counting proxies around the
kernels) and as the aten ops that would launch a device kernel; on the GPU the profiler
counts the kernels that ran.
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import impl.kernels.token_metadata as TM
from ci.registration import register
from impl.platform import default_device, emulate, use_kernel_backend
from impl.prefill_metadata import build_prefill_metadata
from impl.verify_metadata import RaggedVerifyLayout, build_verify_metadata
from reference.verify_metadata import token_metadata
from registered.skips import requires_gpu
from registered.spec_fixtures import small_config

pytestmark = pytest.mark.usefixtures("value_checks_off")

aten = torch.ops.aten
# aten ops that make views or allocate, or read a scalar back (a copy, not a kernel launch)
NO_KERNEL = {aten.empty.memory_format, aten.split_with_sizes.default, aten.view.default, aten.view.dtype,
             aten.slice.Tensor, aten.alias.default, aten.detach.default, aten.as_strided.default,
             aten._local_scalar_dense.default}
# launches per path where the policy elides the sync (CUDA, DSpark): the one kernel, and on the
# eager ragged path the kernel of the total read back
EXPECTED = {"verify-uniform": 1, "prefill-uniform": 1, "ragged-eager": 2, "ragged-graph": 1}


class _AtenKernels(TorchDispatchMode):
    """The aten ops that would launch a device kernel, outside the Triton launches (the
    interpreter's own tensor copies are not the op's)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func not in NO_KERNEL and not self.paused:
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class _CountingKernel:
    """Stands in for the jitted kernel: counts ``kernel[grid](...)`` launches, then runs it."""

    def __init__(self, kernel, aten_ops: _AtenKernels) -> None:
        self.kernel, self.aten_ops, self.launches = kernel, aten_ops, 0

    def __getitem__(self, grid):
        self.launches += 1

        def run(*args, **kwargs):
            self.aten_ops.paused = True
            try:
                return self.kernel[grid](*args, **kwargs)
            finally:
                self.aten_ops.paused = False
        return run


def _calls(device, bs: int = 5):
    cfg = small_config(gamma=3, num_slots=8, capture_batch_sizes=(1, 2, 4, 8))
    gen = torch.Generator().manual_seed(3)
    prefix = torch.randint(0, 60, (bs,), generator=gen).to(device)
    slots = torch.randperm(8, generator=gen)[:bs].to(device)
    lens = torch.tensor([4, 0, 2, 4, 1][:bs], dtype=torch.int32).to(device)
    rows = cfg.verify_rows("target")
    full = torch.full_like(prefix, rows)  # the prefill caller's lens tensor (its input, not built per call)
    kw = dict(platform="cuda", algorithm="dspark")
    return cfg, {
        "verify-uniform": lambda: build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, **kw),
        "prefill-uniform": lambda: build_prefill_metadata(prefix, full, slots, window=cfg.window, path="uniform",
                                                          num_tokens=rows * bs, **kw),
        "ragged-eager": lambda: build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots,
                                                      ragged=RaggedVerifyLayout(lens), **kw),
        "ragged-graph": lambda: build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots,
                                                      ragged=RaggedVerifyLayout.for_graph(lens, cfg), **kw),
    }


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=3)
@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_launches_per_call_in_the_interpreter(path, monkeypatch):
    """One Triton launch per call; torch kernels only for the eager ragged total."""
    fn = _calls("cpu")[1][path]
    aten_ops = _AtenKernels()
    counter = _CountingKernel(TM._token_metadata_kernel, aten_ops)
    total = _CountingKernel(TM._total_kernel, aten_ops)
    monkeypatch.setattr(TM, "_token_metadata_kernel", counter)
    monkeypatch.setattr(TM, "_total_kernel", total)
    with use_kernel_backend("triton-interpret"), aten_ops:  # whatever the environment's gate says
        meta = fn()
    assert counter.launches == 1 and total.launches == (path == "ragged-eager"), path
    assert counter.launches + total.launches + len(aten_ops.ops) == EXPECTED[path] <= 3, aten_ops.ops
    assert meta.num_tokens == int(meta.is_padding.numel())


@register(suite="components-gpu", hardware="h200-1", schedule="per-commit", est_time=10)
@requires_gpu()
@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_launches_per_call_on_the_gpu(path):
    """The profiler sees exactly the expected kernels per call (after a warm-up that compiles)."""
    from torch.profiler import ProfilerActivity, profile

    fn = _calls("cuda")[1][path]
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    assert len(kernels) == EXPECTED[path], "\n".join(kernels)


@register(suite="components-gpu", hardware="h200-1", schedule="per-commit", est_time=10)
@requires_gpu()
def test_ragged_graph_metadata_replays_new_lens():
    """build_verify_metadata on the ragged-graph path, captured once, replayed with new lens and
    prefixes in the same input tensors: every replay equals the oracle."""
    from impl.cuda_graphs import capture_graph

    cfg = small_config(gamma=3, num_slots=8, capture_batch_sizes=(4, 8))
    bs, rows = 6, cfg.verify_rows("target")
    gen = torch.Generator().manual_seed(5)
    prefix = torch.zeros(bs, dtype=torch.int64, device="cuda")
    slots = torch.zeros(bs, dtype=torch.int32, device="cuda")
    lens = torch.zeros(bs, dtype=torch.int32, device="cuda")
    layout = RaggedVerifyLayout.for_graph(lens, cfg)  # tier from the host bound bs * rows: no sync

    def run():
        return build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout,
                                     platform="cuda", algorithm="dspark")
    with emulate("cuda"):
        captured = capture_graph(run, device="cuda", warmup=2)
        for _ in range(4):
            prefix.copy_(torch.randint(0, 3000, (bs,), generator=gen))
            slots.copy_(torch.randperm(8, generator=gen)[:bs])
            lens.copy_(torch.randint(0, rows + 1, (bs,), generator=gen))
            captured.graph.replay()
            torch.cuda.synchronize()
            meta = captured.output
            want = token_metadata(prefix.tolist(), lens.tolist(), slots.tolist(), window=cfg.window,
                                  tier=layout.tier, padded_bs=layout.padded_bs)
            for field in ("positions", "seq_lens_causal", "req_indices", "final_pos", "is_padding",
                          "token_batch_index", "extend_start_loc", "seq_lens", "padded_lens"):
                assert getattr(meta, field).tolist() == want[field], field


@register(suite="components", hardware=["cpu", "h200-1"], schedule="per-commit", est_time=2)
def test_kept_sync_cells_still_expand_with_repeat_interleave():
    """HIP + MTP keeps the sync (docs/design.md §4): that cell does not take the one launch."""
    from impl.sync_detector import count_syncs

    cfg = small_config(gamma=3, num_slots=8)
    prefix = torch.arange(3, device=default_device()) * 5
    slots = torch.arange(3, device=default_device())
    with emulate("hip"), count_syncs() as log:
        meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, algorithm="mtp")
    assert log.kinds() == ["repeat_interleave without output_size"] and not meta.used_output_size
