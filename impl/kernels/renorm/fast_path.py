"""The eager fast path of top-k / top-p renorm: _fast_call and the Gates object it trusts.

A call like an earlier one (the same Gates object, under which that call ran compiled Triton with
checks off; the same shapes, parameter kind and specialization, device, stream and tuning) checks
what every call must (types, dtypes, shapes, contiguity, devices, no capture, no launch hooks, the
current device) and finds its workspace through one index lookup (workspace._FAST_INDEX, filled
by the full path): no gate resolution, plan lookup or argument messages. Anything else, or a miss,
returns None and the caller takes the full path, which raises the errors and fills the index.
Every name the call reads is bound here at import (module globals, no attribute lookups through
other modules). Imports the workspace and the checks' constants; never the API.
"""
from __future__ import annotations

import torch

from impl.kernels._backend import direct_launch_ready
from impl.kernels.renorm.checks import _P_DTYPES, _fp32
from impl.kernels.renorm.tuning import DEFAULT_TUNING
from impl.kernels.renorm.workspace import (
    _CURRENT_DEVICE,
    _FAST_INDEX,
    _RAW_STREAM,
    _REPLAY,
    _WORKSPACES,
    _bound_launches,
    _capturing,
    _eager_call,
)
from impl.validation import INDEX_DTYPES

_FAST_GATES: list = [None]  # the Gates object of the last call that ran compiled Triton with checks off
_P32: dict[float, float] = {}  # a float p -> the fp32 value of p clamped to [0, 1]
_TENSOR = torch.Tensor
_F32 = torch.float32


def _fast_call(probs, param, top_p: bool, tuning) -> torch.Tensor | None:
    """The renormalised rows of an eager call an earlier call has prepared, else None (the caller
    takes the full path). The caller has checked that the gates are _FAST_GATES' (checks off)."""
    if type(probs) is not _TENSOR or probs.dtype is not _F32 or probs.dim() != 2 or not probs.is_contiguous():
        return None
    dev = probs.get_device()
    if dev < 0:
        return None
    bs, vocab = probs.shape
    p_ptr = probs.data_ptr()
    kind = type(param)
    if kind is _TENSOR:
        dtype = param.dtype
        if (dtype not in (_P_DTYPES if top_p else INDEX_DTYPES) or param.dim() != 1 or param.shape[0] != bs
                or not param.is_contiguous() or param.get_device() != dev):
            return None
        param_ptr, scalar = param.data_ptr(), 0
        spec = (dev, p_ptr % 16 == 0, (dtype, param_ptr % 16 == 0))
    elif top_p:
        if kind is not float:
            return None
        scalar = _P32.get(param)
        if scalar is None:
            if param != param:  # NaN: the full path raises
                return None
            if len(_P32) >= 256:
                _P32.clear()
            scalar = _P32[param] = _fp32(min(max(param, 0.0), 1.0))
        param_ptr, spec = p_ptr, (dev, p_ptr % 16 == 0, ())
    else:
        if kind is not int:
            return None
        scalar = 1 if param < 1 else vocab if param > vocab else param
        param_ptr, spec = p_ptr, (dev, p_ptr % 16 == 0, (scalar == 1, scalar % 16 == 0))
    if _CURRENT_DEVICE() != dev or _capturing() or not direct_launch_ready():
        return None
    t = DEFAULT_TUNING if tuning is None else tuning
    hit = _FAST_INDEX.get((top_p, bs, vocab, spec, _RAW_STREAM(dev), id(t)))
    if hit is None or hit[0] is not t:
        return None
    key = hit[1]
    ws = _WORKSPACES.pop(key, None)
    if ws is None or ws.calls is None:
        if ws is not None:
            _WORKSPACES[key] = ws
        return None
    out = torch.empty_like(probs)
    gkey = (p_ptr, param_ptr, scalar, out.data_ptr())
    graphs = ws.graphs
    if graphs is None:
        _bound_launches(ws.calls, ws.write, ws.packed, *gkey)
    else:
        graph = graphs.get(gkey)
        if graph is not None:
            _REPLAY(graph)
            ws.hits += 1
        else:
            _eager_call(ws, gkey, dev)
    _WORKSPACES[key] = ws  # back, as the newest
    return out
