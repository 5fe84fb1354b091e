"""``sort_ascending``: ``tl.sort`` in compiled kernels, numpy's sort under Triton's interpreter.

Triton's ``tl.sort`` is a bitonic network written in Triton itself; its compare-and-swap
reduces with a custom combine function, which the interpreter runs element by element in
Python: one 256-key sort costs about a second and a half on a CPU core, and a renorm call
sorts once per row. Under the interpreter only, kernels sort through numpy instead: the same
keys in the same (ascending) order, so every line of our kernels runs as before and only
Triton's own library routine is stood in for. Compiled kernels (every GPU job and the
sm_90 / gfx950 compile check) call ``tl.sort`` itself. ``registered/test_interpreter_sort.py``
holds the stand-in equal to the interpreted ``tl.sort`` on random keys.
"""
from __future__ import annotations

from impl.kernels._backend import INTERPRETED, tl, triton


@triton.jit
def _tl_sort_ascending(x):
    return tl.sort(x)


def _numpy_sort_ascending(x):
    """The interpreter's tensor ``x`` (a numpy array in ``x.handle.data``), sorted along its last axis."""
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    data = np.sort(x.handle.data, axis=-1)
    return tl.core.tensor(TensorHandle(data, x.handle.dtype), x.type)


sort_ascending = _numpy_sort_ascending if INTERPRETED else _tl_sort_ascending
