"""Count the operations that would force a device-to-host sync on a GPU (docs/design.md §4).

Works on CPU: a torch dispatch mode sees every aten op, and a torch function
mode sees the Python-level conversions (``tolist``, ``numpy``) that never reach
the dispatcher on CPU. Each recorded event names the op, so a test can assert
both the count and *which* syncs happened.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten

# aten ops whose result size or value must be read back by the host.
_ALWAYS_SYNC = {
    aten._local_scalar_dense.default: "item",  # .item(), int(t), bool(t), float(t)
    aten.is_nonzero.default: "is_nonzero",
    aten.equal.default: "equal",
    aten.nonzero.default: "nonzero",
    aten.masked_select.default: "masked_select",
    aten._unique2.default: "unique",
    aten.unique_dim.default: "unique",
    aten.unique_consecutive.default: "unique",
    aten._unique.default: "unique",
}

# Python-level methods that read data back without an aten op on CPU.
_FUNCTION_SYNCS = {"tolist": "tolist", "numpy": "numpy"}


def _is_bool_index(indices) -> bool:
    return any(
        isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices if i is not None
    )


def _classify(func, args, kwargs) -> str | None:
    if func in _ALWAYS_SYNC:
        return _ALWAYS_SYNC[func]
    packet = getattr(func, "overloadpacket", None)
    if packet is aten.repeat_interleave:
        # output_size lets the kernel size its output without reading repeats back.
        output_size = kwargs.get("output_size")
        if output_size is None and len(args) > 2 and func is aten.repeat_interleave.self_Tensor:
            output_size = args[3] if len(args) > 3 else None
        if output_size is None and func is aten.repeat_interleave.Tensor:
            output_size = args[1] if len(args) > 1 else None
        if output_size is None and func is not aten.repeat_interleave.self_int:
            return "repeat_interleave without output_size"
        return None
    if packet in (aten.index, aten._unsafe_index) and len(args) > 1 and _is_bool_index(args[1]):
        return "boolean-mask indexing"
    if packet in (aten.index_put, aten.index_put_, aten._index_put_impl_) and len(args) > 1 and _is_bool_index(args[1]):
        return "boolean-mask assignment"
    if packet in (aten._to_copy, aten.copy_):
        src = args[1] if packet is aten.copy_ else args[0]
        dst_dev = args[0].device if packet is aten.copy_ else kwargs.get("device")
        if (isinstance(src, torch.Tensor) and src.device.type != "cpu"
                and dst_dev is not None and torch.device(dst_dev).type == "cpu"):
            return "device-to-host copy"
    return None


@dataclass
class SyncEvent:
    kind: str
    op: str


@dataclass
class SyncLog:
    events: list[SyncEvent] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.events)

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def __repr__(self) -> str:
        return f"SyncLog({self.count}: {self.kinds()})"


class _DispatchRecorder(TorchDispatchMode):
    def __init__(self, log: SyncLog):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind = _classify(func, args, kwargs)
        if kind is not None:
            self.log.events.append(SyncEvent(kind, str(func)))
        return func(*args, **kwargs)


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, log: SyncLog):
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _FUNCTION_SYNCS and args and isinstance(args[0], torch.Tensor):
            self.log.events.append(SyncEvent(_FUNCTION_SYNCS[name], f"Tensor.{name}"))
        return func(*args, **(kwargs or {}))


class count_syncs:
    """``with count_syncs() as log: ...`` then ``log.count`` / ``log.kinds()``."""

    def __init__(self) -> None:
        self.log = SyncLog()
        self._modes = (_FunctionRecorder(self.log), _DispatchRecorder(self.log))

    def __enter__(self) -> SyncLog:
        for m in self._modes:
            m.__enter__()
        return self.log

    def __exit__(self, *exc) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)
