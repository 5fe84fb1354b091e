"""Argument checks shared by every public op: clear errors naming the argument.

Structural checks (type, dtype, rank, shape, contiguity, device) read only host
metadata, so they are always on and never sync. Value checks (negative
positions, out-of-range or duplicate locs, ``output_size`` totals) must read
device memory, so they run only in check mode (:func:`check_mode_enabled`): the
``check_mode`` gate in effect (docs/design.md §2.2), i.e. the innermost
:func:`check_mode` block, else the run's gates, else ``DSPARK_CHECK``.
"""
from __future__ import annotations

import contextlib
from typing import Iterable, Iterator, Sequence

import torch

from impl.gates import active_gates, override_gates

INDEX_DTYPES = (torch.int32, torch.int64)


def check_mode_enabled() -> bool:
    return active_gates().check_mode == "on"


@contextlib.contextmanager
def check_mode(enabled: bool = True) -> Iterator[None]:
    """Turn value checks on (they may sync) -- or off -- inside the block."""
    with override_gates(check_mode="on" if enabled else "off"):
        yield


def _names(dtypes: Iterable[torch.dtype]) -> str:
    return " or ".join(str(d).replace("torch.", "") for d in dtypes)


def check_tensor(
    name: str,
    t: object,
    *,
    dtype: torch.dtype | Sequence[torch.dtype] | None = None,
    ndim: int | Sequence[int] | None = None,
    shape: Sequence[int | None] | None = None,
    contiguous: bool = True,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Validate one tensor argument; ``shape`` entries of None are free."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if dtype is not None:
        allowed = (dtype,) if isinstance(dtype, torch.dtype) else tuple(dtype)
        if t.dtype not in allowed:
            raise TypeError(f"{name} must have dtype {_names(allowed)}, got {str(t.dtype).replace('torch.', '')}")
    if ndim is not None:
        allowed_nd = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if t.dim() not in allowed_nd:
            raise ValueError(f"{name} must be {' or '.join(f'{n}-D' for n in allowed_nd)}, got shape {tuple(t.shape)}")
    if shape is not None:
        if t.dim() != len(shape) or any(s is not None and s != d for s, d in zip(shape, t.shape)):
            want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
            raise ValueError(f"{name} must have shape {want}, got {list(t.shape)}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (got strides {t.stride()} for shape {list(t.shape)})")
    if device is not None and t.device != torch.device(device):
        raise ValueError(f"{name} must be on device {device}, got {t.device}")
    return t


def check_same_device(**tensors: torch.Tensor | None) -> torch.device | None:
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {v.device for v in present.values()}
    if len(devices) > 1:
        listing = ", ".join(f"{k} on {v.device}" for k, v in present.items())
        raise ValueError(f"tensors must share one device: {listing}")
    return next(iter(devices), None)


def check_positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# ---- value checks: only call under check mode (they read device memory) ----

def check_nonnegative(name: str, t: torch.Tensor) -> None:
    if t.numel() and bool((t < 0).any()):
        bad = int(t.reshape(-1).min())
        raise ValueError(f"{name} must be non-negative (positions are never negative), found {bad}")


def check_locs(name: str, loc: torch.Tensor, num_rows: int) -> None:
    """Locs are -1 (skip) or in [0, num_rows), and non-negative ones are unique."""
    if loc.numel() == 0:
        return
    flat = loc.reshape(-1).to(torch.int64)
    out_of_range = (flat >= num_rows) | (flat < -1)
    if bool(out_of_range.any()):
        idx = int(out_of_range.nonzero()[0])
        raise ValueError(
            f"{name}[{idx}] = {int(flat[idx])} is out of range: expected -1 (skip) or 0 <= loc < {num_rows}"
        )
    kept = flat[flat >= 0]
    uniq, counts = torch.unique(kept, return_counts=True)
    if bool((counts > 1).any()):
        dup = uniq[counts > 1][:8].tolist()
        raise ValueError(f"{name} has duplicate non-negative locs {dup}: two rows would race for one slot")
