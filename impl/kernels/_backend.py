"""Who runs a data-moving op: Triton (compiled or interpreted) or torch.

Triton decides "interpret or compile" when it is *imported* (its own
``triton.language.standard`` helpers such as ``tl.sum`` are jitted then) and
again in every ``@triton.jit`` (both read ``TRITON_INTERPRET`` through
``triton.knobs.runtime.interpret`` in triton 3.6 and 3.9). So the mode is
process-wide: this module sets ``TRITON_INTERPRET=1`` before importing triton
when there is no GPU (or the kernel_backend gate asks for the interpreter), and
every kernel module imports triton through here.

Eager calls are host-bound at small sizes, so this module also keeps the per-call
host work small: ``launch_mode`` resolves the kernel_backend gate once per distinct
raw value of its environment variable (the cache is keyed on the string itself, so a
changed or removed variable is seen on the very next call: never stale, nothing to
refresh), and ``cdiv`` is plain integer arithmetic (``triton.cdiv`` is a
constexpr-function wrapper costing several microseconds a call on the host).
"""
from __future__ import annotations

import os

import torch

from impl.gates import GATES, GateError, gate_value
from impl.platform import kernel_backend


def _wants_interpreter() -> bool:
    if os.environ.get("TRITON_INTERPRET", "") not in ("", "0"):
        return True
    try:
        requested = gate_value("kernel_backend")
    except GateError:
        requested = None  # a bad value is reported when an op runs, with the gate's message
    return requested == "triton-interpret" or not torch.cuda.is_available()


if _wants_interpreter():
    os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402  (must follow the environment set-up above)
import triton.language as tl  # noqa: E402,F401

INTERPRETED: bool = bool(triton.knobs.runtime.interpret)


def _standard_library_interpreted() -> bool:
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(triton.language.standard.sum, InterpretedFunction)


_BACKEND_VAR = GATES["kernel_backend"].env_var
_resolved: dict[str | None, str] = {}  # raw env value -> kernel_backend(); invalid values are never cached


def _resolved_backend() -> str:
    """kernel_backend(), re-resolved whenever the raw environment value changes (errors re-raise)."""
    raw = os.environ.get(_BACKEND_VAR)
    backend = _resolved.get(raw)
    if backend is None:
        backend = _resolved[raw] = kernel_backend()  # whether a GPU exists is fixed for the process
    return backend


def launch_mode(*tensors: torch.Tensor | None) -> str:
    """'triton' or 'torch' for an op on ``tensors``, per the kernel_backend gate.

    Raises a ValueError naming DSPARK_KERNEL_BACKEND for unknown gate values and
    when the interpreter is requested after triton was imported in compiled mode.
    """
    backend = _resolved_backend()
    if backend == "torch":
        return "torch"
    if backend == "triton-interpret" and not INTERPRETED:
        raise ValueError(
            "DSPARK_KERNEL_BACKEND=triton-interpret must be set before impl.kernels is imported: "
            "Triton fixes interpret-vs-compile at import time (set TRITON_INTERPRET=1 too)"
        )
    if INTERPRETED:
        if not _standard_library_interpreted():
            raise RuntimeError(
                "triton was imported before TRITON_INTERPRET=1 was set, so its standard library is "
                "compiled-mode and interpreted kernels cannot call it; set TRITON_INTERPRET=1 in the "
                "environment (or import impl.kernels before triton)"
            )
        return "triton"
    # Compiled Triton cannot read host memory: host tensors take the torch path.
    if any(t is not None and t.device.type != "cuda" for t in tensors):
        return "torch"
    return "triton"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
