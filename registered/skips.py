"""The registered skip reasons. A test may only skip through these.

The suite runner fails a job when a test skips with a message that does not
start with ``[registered:<key>]`` for a key below -- a silent skip is how a
suite "passes" while testing nothing.
"""
from __future__ import annotations

import pytest
import torch

SKIP_REASONS: dict[str, str] = {
    "needs-gpu": "needs a CUDA or ROCm device (CUDA graphs, real Triton, device syncs)",
    "needs-multi-gpu": "needs at least two GPUs for an NCCL world",
    "needs-hip": "needs a real ROCm device, not emulation",
    "no-gpu-compiler": "this triton build cannot compile for sm_90 here (no ptxas: a ROCm build, say)",
}


def skip_message(key: str) -> str:
    if key not in SKIP_REASONS:
        raise KeyError(f"unregistered skip reason {key!r}; add it to registered/skips.py")
    return f"[registered:{key}] {SKIP_REASONS[key]}"


def registered_skip(key: str) -> None:
    """Skip the running test for a registered reason."""
    pytest.skip(skip_message(key))


def requires_gpu():
    """Marker: skip (registered reason) when no GPU is present."""
    return pytest.mark.skipif(not torch.cuda.is_available(), reason=skip_message("needs-gpu"))


def requires_gpus(n: int):
    return pytest.mark.skipif(
        torch.cuda.device_count() < n, reason=skip_message("needs-multi-gpu")
    )
