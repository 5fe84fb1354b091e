"""Who runs a data-moving op: Triton (compiled or interpreted) or torch.

Triton decides "interpret or compile" when it is *imported* (its own
``triton.language.standard`` helpers such as ``tl.sum`` are jitted then) and
again in every ``@triton.jit`` (both read ``TRITON_INTERPRET`` through
``triton.knobs.runtime.interpret`` in triton 3.6 and 3.9). So the mode is
process-wide: this module sets ``TRITON_INTERPRET=1`` before importing triton
when there is no GPU (or the kernel_backend gate in effect -- the run's, when the
first op of a run imports this module, else the environment's -- asks for the
interpreter), and every kernel module imports triton through here.

Eager calls are host-bound at small sizes, so this module also keeps the per-call
host work small: ``launch_mode`` asks :func:`impl.gates.active_gates` (cached on the
raw environment strings, so a changed or removed variable is seen on the very next
call: never stale, nothing to refresh) and resolves each gate value to a backend once,
and ``cdiv`` is plain integer arithmetic (``triton.cdiv`` is a
constexpr-function wrapper costing several microseconds a call on the host).
``LaunchCache`` launches an op's fixed sequence of kernels through the compiled
kernels themselves after the first call: ``kernel[grid](...)`` re-binds the
arguments, re-derives the specialization and looks the kernel up on every call
(~20-50 us a launch on the H200's host with triton 3.6, measured), which made an
eager batch-1 renorm call host-bound at 250-450 us.
"""
from __future__ import annotations

import os

import torch

from impl.gates import GateError, active_gates
from impl.platform import concrete_kernel_backend


def _wants_interpreter() -> bool:
    if os.environ.get("TRITON_INTERPRET", "") not in ("", "0"):
        return True
    try:
        requested = active_gates().kernel_backend
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


_resolved: dict[str | None, str] = {}  # kernel_backend gate value -> backend; errors never cached


def _resolved_backend(gates=None) -> str:
    """``impl.platform.kernel_backend()``, resolved once per gate value (errors re-raise).

    The gate value is the one in effect (:func:`impl.gates.active_gates`: the innermost
    ``use_kernel_backend`` block, a run's gates, else the environment); whether a GPU exists
    is fixed for the process.
    """
    chosen = (gates or active_gates()).kernel_backend
    backend = _resolved.get(chosen)
    if backend is None:
        backend = _resolved[chosen] = concrete_kernel_backend(chosen)
    return backend


def launch_mode(*tensors: torch.Tensor | None, gates=None) -> str:
    """'triton' or 'torch' for an op on ``tensors``, per the kernel_backend gate (of ``gates``, the
    caller's :func:`impl.gates.active_gates`, when given: one lookup per call).

    Raises a ValueError naming DSPARK_KERNEL_BACKEND for unknown gate values and
    when the interpreter is requested after triton was imported in compiled mode.
    """
    backend = _resolved_backend(gates)
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
    if any(t is not None and not t.is_cuda for t in tensors):
        return "torch"
    return "triton"


_DIRECT_OK = [True]  # cleared for the process if this triton's compiled-kernel entry point differs


def _no_hook(hook) -> bool:
    # triton 3.6+ keeps launch hooks in a HookChain (empty: none set); older ones use None
    return hook is None or (isinstance(getattr(hook, "calls", None), list) and not hook.calls)


def _direct_launch_ready() -> bool:
    runtime = triton.knobs.runtime
    return (_DIRECT_OK[0] and not INTERPRETED
            and _no_hook(runtime.launch_enter_hook) and _no_hook(runtime.launch_exit_hook))


class LaunchCache:
    """Compiled kernels of an op's launch sequence, reused by later eager calls.

    The caller owns one cache per launch plan and gives every launch a key holding everything
    Triton specializes the kernel on that the plan does not fix (device, 16-byte alignment of
    caller-provided pointers, dtypes, int arguments equal to 1 or divisible by 16). The first
    launch of a key goes through ``kernel[grid](...)`` (compiling if needed) and keeps the
    compiled kernel; later ones call its launcher directly on the current stream (so CUDA-graph
    capture works the same). In the interpreter, or with launch hooks set (profilers), every
    launch takes the ordinary path. Kernels must take their constexpr parameters last, by keyword.
    """

    def __init__(self) -> None:
        self._compiled: dict = {}

    @staticmethod
    def stream(device_index: int):
        """The stream launches go to now, or None when launches must take the ordinary path."""
        if not _direct_launch_ready():
            return None
        return triton.runtime.driver.active.get_current_stream(device_index)

    def launch(self, key, stream, kernel, grid: tuple, args: tuple, meta: dict) -> None:
        hit = self._compiled.get(key) if stream is not None else None
        if hit is not None:
            compiled, constexprs = hit
            try:
                compiled.run(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1, stream,
                             compiled.function, compiled.packed_metadata, None, None, None, *args, *constexprs)
                return
            except (TypeError, AttributeError):  # another triton's launcher: ordinary launches from now on
                _DIRECT_OK[0] = False
                self._compiled.clear()
        compiled = kernel[grid](*args, **meta)
        if stream is not None and compiled is not None:
            names = kernel.arg_names[len(args):]  # the constexpr parameters, in order
            self._compiled[key] = (compiled, tuple(meta[name] for name in names))


# How a compiled kernel's launcher is called without its Python wrapper (CudaLauncher.__call__): the
# C entry point's argument layout differs by triton release. "flat" (triton 3.6): the kernel's
# arguments follow the launch parameters one by one; "packed" (triton 3.9): they come as one tuple
# after the argument annotations and the packed signature. Other releases use CompiledKernel.run.
_RAW_ABI = {"3.6": "flat", "3.9": "packed"}.get(".".join(triton.__version__.split(".")[:2]))


def bound_launcher(compiled, grid: tuple, stream: int):
    """``(launch, packed)`` for ``compiled`` with its grid and stream bound: ``launch(*args)`` (or
    ``launch(args)`` when ``packed``) launches it with the kernel arguments ``args`` (constexprs
    included, in parameter order; pointers may be ints). The lowest-overhead path this triton
    offers: its C launcher with every per-kernel value bound once (no scratch allocation, no
    hooks: callers check :func:`direct_launch_ready`), else ``CompiledKernel.run``."""
    import functools

    g = (*grid, 1, 1)[:3]
    run = compiled.run  # the launcher object (loads the module on first use)
    raw = getattr(run, "launch", None)
    plain = (raw is not None and not getattr(run, "global_scratch_size", 1)
             and not getattr(run, "profile_scratch_size", 1) and not getattr(run, "gsan_enabled", False))
    common = (compiled.function, run.launch_cooperative_grid, run.launch_pdl) if plain else ()
    if plain and _RAW_ABI == "flat" and not hasattr(run, "arg_annotations"):
        return functools.partial(raw, *g, stream, *common, None, None, compiled.packed_metadata, None, None,
                                 None), False
    if plain and _RAW_ABI == "packed" and hasattr(run, "arg_annotations"):
        return functools.partial(raw, *g, stream, *common, compiled.packed_metadata, None, None, None, None, None,
                                 run.arg_annotations, run.kernel_signature), True
    return functools.partial(run, *g, stream, compiled.function, compiled.packed_metadata, None, None, None), False


_DEPENDENT_LAUNCH: dict[int, bool] = {}  # device index -> whether it takes programmatic dependent launches


def dependent_launch_ok(t: torch.Tensor) -> bool:
    """Whether kernels on ``t``'s device may be launched as programmatic dependent launches
    (``launch_pdl``): compiled Triton on a CUDA GPU of compute capability 9.0 or later, with a triton
    whose CUDA backend has the option. Never on HIP, the CPU or the interpreter."""
    if INTERPRETED or not t.is_cuda or torch.version.hip is not None:
        return False
    dev = t.get_device()
    ok = _DEPENDENT_LAUNCH.get(dev)
    if ok is None:
        from triton.backends.nvidia.compiler import CUDAOptions

        ok = _DEPENDENT_LAUNCH[dev] = (torch.cuda.get_device_capability(dev)[0] >= 9
                                       and "launch_pdl" in CUDAOptions.__dataclass_fields__)
    return ok


def ptx_ok(t: torch.Tensor) -> bool:
    """Whether kernels for ``t``'s device compile for CUDA, so they may hold inline PTX: compiled
    Triton on an NVIDIA GPU. Never on HIP, the CPU or the interpreter."""
    return not INTERPRETED and t.is_cuda and torch.version.hip is None


def direct_launch_ready() -> bool:
    """Whether compiled kernels may be launched through :func:`bound_launcher` now (compiled mode,
    no launch hooks: profilers set them and expect every launch to pass through them)."""
    return _direct_launch_ready()


def specialization_key(*values) -> tuple:
    """Per argument, what Triton specializes a kernel on: a tensor's dtype and 16-byte alignment,
    an int's value 1, divisibility by 16 and width; other values (floats) by type only."""
    key = []
    for v in values:
        if isinstance(v, torch.Tensor):
            key.append((v.dtype, v.data_ptr() % 16 == 0))
        elif isinstance(v, bool):
            key.append(("bool", v))
        elif isinstance(v, int):
            key.append((v == 1, v % 16 == 0, -(2**31) <= v < 2**31))
        else:
            key.append(type(v))
    return tuple(key)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()
