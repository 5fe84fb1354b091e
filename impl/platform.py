"""Which platform's rules apply, detected from torch or explicitly emulated (docs/design.md §2).

``current_platform()`` answers backend (cuda / hip / cpu), arch and device
count. Emulation -- running HIP policy on a CPU or CUDA device -- is selected by
the ``platform`` gate (``DSPARK_PLATFORM=hip``) or by the ``emulate(...)``
context manager, and is announced on stderr the first time it takes effect so
it is never silent. Tensors always live on the *real* device (``Platform.device``).
Gates are read through :func:`impl.gates.active_gates` (a run's gates, else the
environment's), never from the environment directly.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import Iterator

import torch

from impl.gates import active_gates, override_gates, validate_gate_value

DEFAULT_ARCH = {"cuda": "sm90", "hip": "gfx950", "cpu": "cpu"}


@dataclass(frozen=True)
class Platform:
    backend: str  # whose rules apply: "cuda", "hip" or "cpu"
    arch: str  # e.g. "sm90", "gfx942" (MI300-class), "gfx950" (MI35x-class)
    device_count: int
    device: str  # where tensors really live: "cuda" (also ROCm builds) or "cpu"
    emulated: bool = False

    @property
    def real_backend(self) -> str:
        return _detect().backend

    def describe(self) -> str:
        text = f"{self.backend}/{self.arch} x{self.device_count} on {self.device}"
        if self.emulated:
            text += f" (EMULATED: really {self.real_backend})"
        return text


def _detect() -> Platform:
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        if getattr(torch.version, "hip", None):
            arch = getattr(props, "gcnArchName", "gfx").split(":")[0]
            backend = "hip"
        else:
            arch = f"sm{props.major}{props.minor}"
            backend = "cuda"
        return Platform(backend, arch, torch.cuda.device_count(), "cuda")
    return Platform("cpu", "cpu", 0, "cpu")


_override: list[Platform] = []
_announced: set[str] = set()


def _announce(p: Platform) -> None:
    key = p.describe()
    if p.emulated and key not in _announced:
        _announced.add(key)
        print(f"[dspark] PLATFORM EMULATION ACTIVE: {key}", file=sys.stderr, flush=True)


def _emulated(backend: str, arch: str | None, device_count: int | None) -> Platform:
    real = _detect()
    validate_gate_value("platform", backend, source="backend")
    if backend == real.backend and arch is None and device_count is None:
        return real
    return Platform(
        backend=backend,
        arch=arch or DEFAULT_ARCH[backend],
        device_count=real.device_count if device_count is None else device_count,
        device=real.device,
        emulated=True,
    )


def platform_for(backend: str | None) -> Platform:
    """The platform a run resolved to ``backend`` uses (None: detected); emulation is announced."""
    p = _detect() if backend is None else _emulated(backend, None, None)
    _announce(p)
    return p


def current_platform() -> Platform:
    """The platform whose rules apply now: innermost ``emulate``, then the gate, then torch.

    For ops called without a run's options; the engine takes ``RunOptions.platform``."""
    if _override:
        p = _override[-1]
        _announce(p)
        return p
    return platform_for(active_gates().platform)


@contextlib.contextmanager
def emulate(backend: str, arch: str | None = None, device_count: int | None = None) -> Iterator[Platform]:
    """Apply ``backend``'s rules (e.g. HIP) while tensors stay on the real device."""
    p = _emulated(backend, arch, device_count)
    _override.append(p)
    try:
        _announce(p)
        yield p
    finally:
        _override.pop()


@contextlib.contextmanager
def use_kernel_backend(backend: str | None) -> Iterator[None]:
    """Inside the block the ops run on ``backend`` (the kernel_backend gate, overridden);
    None: the hardware default, whatever the environment says."""
    with override_gates(kernel_backend=backend):
        yield


def default_kernel_backend() -> str:
    return "triton" if _detect().device == "cuda" else "triton-interpret"


def concrete_kernel_backend(chosen: str | None) -> str:
    """The backend a kernel_backend gate value means here: None is triton on a GPU and the
    interpreter on CPU; 'triton' without a GPU is an error."""
    real = _detect()
    if chosen is None:
        return "triton" if real.device == "cuda" else "triton-interpret"
    if chosen == "triton" and real.device != "cuda":
        raise ValueError(
            "DSPARK_KERNEL_BACKEND=triton needs a GPU; on CPU use 'triton-interpret' or 'torch'"
        )
    return chosen


def kernel_backend() -> str:
    """Who runs the data-moving ops: the kernel_backend gate in effect (the innermost
    ``use_kernel_backend``, else the run's gates, else the environment), else the hardware default."""
    return concrete_kernel_backend(active_gates().kernel_backend)


def default_device() -> torch.device:
    return torch.device(_detect().device)
