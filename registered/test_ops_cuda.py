"""GPU only: ops on CUDA tensors at larger sizes vs the oracle, and CUDA-graph capture +
replay of every graph-safe op with *changed* inputs giving the eager result."""
from __future__ import annotations

import pytest
import torch

from ci.registration import register
from impl.testing.op_table import case_id, cases, clone_kwargs, mismatch, run_op, run_reference
from registered.skips import requires_gpu

LARGE = cases(large=True)
GRAPH_CASES = [c for c in LARGE if c[0].graph_safe and c[1].syncs is None]


def _fresh(t: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """New finite values (new random bytes for 1-byte dtypes), same shape/dtype/device."""
    if t.dtype.is_floating_point and t.element_size() > 1:
        return (torch.randn(t.shape, generator=g) * 2).to(t.dtype).to(t.device)
    raw = torch.randint(0, 256, (*t.shape[:-1], t.shape[-1] * t.element_size()), generator=g, dtype=torch.uint8)
    return raw.view(t.dtype).to(t.device) if t.dim() else raw.to(t.device)


def _roll(t):
    return t.roll(1, 0) if isinstance(t, torch.Tensor) else t


def _shift(t, by):
    return None if t is None else t + by


def _vary(name: str, kw: dict, g: torch.Generator) -> dict:
    """A second valid input set for op ``name`` with the same shapes (graph inputs change in place)."""
    if name == "scatter_into_unified":
        return {**kw, "kv": _fresh(kw["kv"], g), "loc": _roll(kw["loc"]), "unified": _fresh(kw["unified"], g)}
    if name == "store_swa_into_unified":
        return {**kw, "kv": _fresh(kw["kv"], g), "positions": kw["positions"] + 1,
                "final_pos": _shift(kw.get("final_pos"), 1), "unified": _fresh(kw["unified"], g)}
    if name == "fused_norm_rope_":
        return {**kw, "kv": _fresh(kw["kv"], g), "positions": _roll(kw["positions"])}
    if name == "build_commit_inject_layout":
        return {**kw, "req_pool_indices": _roll(kw["req_pool_indices"]), "prefix_lens": kw["prefix_lens"] + 7,
                "commit_lens": _roll(kw["commit_lens"])}
    if name == "unified_inject_loc":
        return {**kw, "positions": kw["positions"] + 3, "state_slot": _roll(kw["state_slot"]),
                "final_pos": _shift(kw.get("final_pos"), 3), "commit_lens": _roll(kw.get("commit_lens"))}
    if name == "expand_prefill_causally":
        return {**kw, "seq_lens": _roll(kw["seq_lens"]) + 2, "extend_lens": _roll(kw["extend_lens"]),
                "req_pool_indices": _roll(kw["req_pool_indices"])}
    if name == "pad_verify_lens_to_bucket":
        return {**kw, "verify_lens": _roll(kw["verify_lens"])}
    if name == "build_token_metadata":  # rolled lens keep their sum, so num_tokens still holds them
        return {**kw, "prefix_lens": _roll(kw["prefix_lens"]) + 5, "extend_lens": _roll(kw["extend_lens"]),
                "req_pool_indices": _roll(kw["req_pool_indices"])}
    if name in ("top_k_renorm", "top_p_renorm"):
        cols = torch.randperm(kw["probs"].shape[1], generator=g).to(kw["probs"].device)
        return {**kw, "probs": kw["probs"][:, cols].contiguous(), **{k: _roll(kw[k]) for k in ("k", "p") if k in kw}}
    raise KeyError(f"no input variation for {name}; add one")


@register(suite="kernels-cuda", hardware=["h200-1", "mi35x-1"], schedule="per-commit", est_time=60)
@requires_gpu()
@pytest.mark.parametrize("case", LARGE, ids=case_id)
def test_cuda_large_samples_match_reference(case):
    op, sample = case
    kwargs = sample.make(torch.device("cuda"))
    got = run_op(op, op.impl, clone_kwargs(kwargs))
    for i, (g, w) in enumerate(zip(got, run_reference(op, kwargs), strict=True)):
        problem = mismatch(op.compare, g, w)
        assert problem is None, f"{op.name} output {i}: {problem}"


@register(suite="kernels-cuda", hardware=["h200-1", "mi35x-1"], schedule="per-commit", est_time=60)
@requires_gpu()
@pytest.mark.parametrize("case", GRAPH_CASES, ids=case_id)
@pytest.mark.usefixtures("kernel_backend")
def test_cuda_graph_replay_with_changed_inputs_equals_eager(case):
    op, sample = case
    first = sample.make(torch.device("cuda"))
    second = _vary(op.name, first, torch.Generator().manual_seed(7))
    static = clone_kwargs(first)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: Triton compiles and torch caches outside the capture
        run_op(op, op.impl, clone_kwargs(first))
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run_op(op, op.impl, static)
    for name, value in second.items():  # change the inputs in place, then replay
        if isinstance(value, torch.Tensor):
            static[name].copy_(value)
    graph.replay()
    torch.cuda.synchronize()
    eager = run_op(op, op.impl, clone_kwargs(second))
    for i, (g, e) in enumerate(zip(captured, eager, strict=True)):
        assert g.shape == e.shape and g.dtype == e.dtype
        assert torch.equal(g.view(torch.uint8) if g.dtype.is_floating_point else g,
                           e.view(torch.uint8) if e.dtype.is_floating_point else e), f"{op.name} output {i}"
    for i, (e, w) in enumerate(zip(eager, run_reference(op, second), strict=True)):
        problem = mismatch(op.compare, e, w)  # the varied inputs were valid
        assert problem is None, f"{op.name} output {i} (varied inputs): {problem}"


@register(suite="kernels-cuda", hardware=["h200-1"], schedule="per-commit", est_time=20)
@requires_gpu()
@pytest.mark.parametrize("name", ["top_k_renorm", "top_p_renorm", "fused_norm_rope_"])
def test_repeated_eager_calls_reuse_compiled_kernels_correctly(name):
    """After the first call, eager launches go straight to the compiled kernels (LaunchCache,
    impl/kernels/_backend.py). Later calls with new values, with a misaligned input (another
    specialization) and inside a CUDA graph must still match the oracle."""
    op, sample = next(c for c in LARGE if c[0].name == name)
    g = torch.Generator().manual_seed(3)
    kwargs = sample.make(torch.device("cuda"))
    for attempt in range(4):
        kw = _vary(name, kwargs, g) if attempt else kwargs
        if attempt == 3:  # a view one element in: not 16-byte aligned, a different specialization
            key = "probs" if "probs" in kw else "kv"
            padded = torch.empty(kw[key].numel() + 1, dtype=kw[key].dtype, device="cuda")
            kw = {**kw, key: padded[1:].view(kw[key].shape).copy_(kw[key])}
            assert kw[key].data_ptr() % 16 != 0
        want = run_reference(op, kw)  # from copies, before an in-place op changes kw
        got = run_op(op, op.impl, kw if attempt == 3 else clone_kwargs(kw))  # a clone would realign the view
        for i, (o, w) in enumerate(zip(got, want, strict=True)):
            problem = mismatch(op.compare, o, w)
            assert problem is None, f"{name} call {attempt} output {i}: {problem}"
