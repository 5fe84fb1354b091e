"""The metadata builders' output workspace (impl/kernels/metadata_workspace.py).

With ``workspace=ws`` a builder writes into buffers it allocated on the first call of that layout
and returns views of them: the next call with the same layout rewrites every row (poisoned here
between calls, so a row the kernel skips shows), different layouts never share a buffer, the
kept-sync cells do not use it, and on the GPU a call with a warm workspace allocates no device
memory and stays one launch.
"""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.kernels.metadata_workspace import MAX_LAYOUTS, MetadataWorkspace
from impl.platform import emulate, use_kernel_backend
from impl.prefill_metadata import build_prefill_metadata
from impl.verify_metadata import RaggedVerifyLayout, build_verify_metadata
from reference.verify_metadata import token_metadata
from registered.skips import requires_gpu
from registered.spec_fixtures import small_config

pytestmark = pytest.mark.usefixtures("value_checks_off")

FIELDS = ("positions", "seq_lens_causal", "req_indices", "final_pos", "token_batch_index", "is_padding",
          "extend_lens", "extend_start_loc", "seq_lens", "padded_lens")
PATHS = ("verify-uniform", "prefill-uniform", "ragged-graph")
BS = 5


def _inputs(seed: int, cfg, device):
    gen = torch.Generator().manual_seed(seed)
    rows = cfg.verify_rows("target")
    prefix = torch.randint(0, 3000, (BS,), generator=gen).to(device)
    slots = torch.randperm(cfg.num_slots, generator=gen)[:BS].to(device)
    lens = torch.randint(0, rows + 1, (BS,), generator=gen).to(torch.int32).to(device)
    full = torch.full_like(prefix, rows)  # the prefill caller's lens tensor (its input, not built per call)
    return prefix, slots, lens, full


def _build(path, cfg, prefix, slots, lens, full, workspace):
    kw = dict(platform="cuda", algorithm="dspark", workspace=workspace)
    rows = cfg.verify_rows("target")
    if path == "verify-uniform":
        return build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, **kw)
    if path == "prefill-uniform":
        return build_prefill_metadata(prefix, full, slots, window=cfg.window,
                                      path="uniform", num_tokens=rows * BS, **kw)
    layout = RaggedVerifyLayout(lens, tier=rows * BS, padded_bs=8)  # a fixed tier: one layout per call
    return build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, ragged=layout, **kw)


def _want(path, cfg, prefix, slots, lens, _full=None):
    rows = cfg.verify_rows("target")
    ext = lens.tolist() if path == "ragged-graph" else [rows] * BS
    want = token_metadata(prefix.tolist(), ext, slots.tolist(), window=cfg.window,
                          **(dict(tier=rows * BS, padded_bs=8) if path == "ragged-graph" else {}))
    return {**want, "extend_lens": ext}


def _poison(meta) -> None:
    for name in FIELDS:
        t = getattr(meta, name)
        if t is not None:
            t.fill_(True if t.dtype == torch.bool else -7)


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=6)
@pytest.mark.parametrize("backend", ["torch", None])
@pytest.mark.parametrize("path", PATHS)
def test_a_workspace_call_rewrites_every_row_of_the_buffers_it_reuses(path, backend):
    """Two calls with one workspace and one layout: the second returns the first's storage,
    poisoned in between, and every field equals the oracle for the second call's inputs."""
    cfg = small_config(gamma=3, num_slots=8, capture_batch_sizes=(4, 8))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ws = MetadataWorkspace()
    with use_kernel_backend(backend):
        first = _build(path, cfg, *_inputs(1, cfg, device), ws)
        _poison(first)
        second_inputs = _inputs(2, cfg, device)
        second = _build(path, cfg, *second_inputs, ws)
    want = _want(path, cfg, *second_inputs)
    assert len(ws) == 1
    for name in FIELDS:
        got = getattr(second, name)
        if name == "padded_lens" and path != "ragged-graph":
            assert got is None
            continue
        assert got.data_ptr() == getattr(first, name).data_ptr(), f"{name}: not the workspace's buffer"
        assert got.tolist() == want[name], name


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_layouts_never_share_a_buffer_and_a_full_workspace_starts_over():
    """Each (rows, batch, padded batch) gets its own buffers; past MAX_LAYOUTS the workspace forgets
    them all, and tensors it returned before keep their values."""
    ws = MetadataWorkspace()
    prefix, slots = torch.tensor([4, 9]), torch.tensor([1, 0])

    def build(rows):
        return build_prefill_metadata(prefix, rows, slots, window=64, path="uniform", num_tokens=2 * rows,
                                      platform="cuda", algorithm="dspark", workspace=ws)
    kept, other = build(3), build(4)
    assert len(ws) == 2
    tensors = [getattr(m, name) for m in (kept, other) for name in FIELDS if getattr(m, name) is not None]
    spans = sorted((t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in tensors)
    assert len(spans) == 2 * 9 and all(a_end <= b for (_a, a_end), (b, _b_end) in zip(spans, spans[1:])), \
        "two outputs overlap"
    for rows in range(5, 5 + MAX_LAYOUTS):
        build(rows)
    assert len(ws) <= MAX_LAYOUTS
    assert kept.positions.tolist() == [4, 5, 6, 9, 10, 11]  # the first call's, untouched


@register(suite="components", hardware=["cpu", "h200-1", "mi35x-1"], schedule="per-commit", est_time=2)
def test_the_kept_sync_cell_does_not_use_the_workspace():
    """HIP + MTP keeps the sync: its expansion allocates as before, the workspace stays empty."""
    cfg = small_config(gamma=3, num_slots=8)
    ws = MetadataWorkspace()
    prefix, slots = torch.tensor([3, 8, 1]), torch.tensor([2, 0, 1])
    with emulate("hip"):
        meta = build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, algorithm="mtp", workspace=ws)
    assert len(ws) == 0 and not meta.used_output_size


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=2)
@pytest.mark.parametrize("builder", ["verify", "prefill"])
def test_a_workspace_that_is_not_one_is_refused_by_name(builder):
    cfg = small_config(gamma=3, num_slots=8)
    prefix, slots = torch.tensor([3, 8]), torch.tensor([2, 0])
    calls = {
        "verify": lambda: build_verify_metadata(cfg, seq_lens=prefix, req_pool_indices=slots, workspace={}),
        "prefill": lambda: build_prefill_metadata(prefix, prefix, slots, window=64, path="uniform", num_tokens=22,
                                                  workspace=[]),
    }
    with pytest.raises(TypeError, match="workspace must be a MetadataWorkspace"):
        calls[builder]()


@register(suite="components-gpu", hardware="h200-1", schedule="per-commit", est_time=10)
@requires_gpu()
@pytest.mark.parametrize("path", PATHS)
def test_a_warm_workspace_call_allocates_no_device_memory(path):
    """After the first call of a layout, a call with the workspace makes no device allocation (the
    host time it saves) and is still the one kernel."""
    from torch.profiler import ProfilerActivity, profile

    cfg = small_config(gamma=3, num_slots=8, capture_batch_sizes=(4, 8))
    ws = MetadataWorkspace()
    inputs = _inputs(3, cfg, "cuda")
    _build(path, cfg, *inputs, ws)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        meta = _build(path, cfg, *inputs, ws)
        torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    assert len(kernels) == 1, kernels
    assert meta.positions.tolist() == _want(path, cfg, *inputs)["positions"]
