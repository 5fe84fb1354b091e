"""The checks of renorm's arguments on the full path: probs, k / p in every accepted form, tuning.

Each bad argument raises one line naming it and what was expected (docs/design.md §10.7); the
message-building checks run only on a mismatch, so a good call pays attribute tests alone.
Imports impl.validation and the tuning's type; never the plan, the workspace or the API.
"""
from __future__ import annotations

import numbers
import struct

import torch

from impl.kernels.renorm.tuning import DEFAULT_TUNING, RenormTuning
from impl.validation import check_tensor

_INF = float("inf")
_P_DTYPES = (torch.float32, torch.float64)  # a per-row p (k's: impl.validation.INDEX_DTYPES)


def _param_tensor(name, value, bs, dtypes, kind, probs: torch.Tensor, checks: bool) -> torch.Tensor | None:
    """``value`` as a per-row tensor (None for a scalar), checked; it must be on ``probs``' device
    (compared through the tensors: cheaper than building torch.device objects)."""
    if isinstance(value, torch.Tensor):
        if (value.dtype not in dtypes or value.dim() != 1 or value.shape[0] != bs or not value.is_contiguous()
                or value.is_cuda != probs.is_cuda or value.get_device() != probs.get_device() or value.is_meta):
            check_tensor(name, value, dtype=dtypes, shape=(bs,))  # raises the message naming the argument
            if value.device != probs.device:
                raise ValueError(f"{name} must be on device {probs.device} (probs' device), got {value.device}")
        if name == "p" and checks and value.numel() and bool(value.isnan().any()):
            raise ValueError("p must not hold NaN (check mode; with checks off a NaN p keeps the whole row)")
        return value
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind[-1].__name__} or a tensor of shape [bs], got {type(value).__name__}")
    if value != value:
        raise ValueError(f"{name} must not be NaN")
    return None


def _check_probs(probs, checks: bool) -> None:
    if not (isinstance(probs, torch.Tensor) and probs.dtype is torch.float32 and probs.dim() == 2
            and probs.is_contiguous()):
        check_tensor("probs", probs, dtype=torch.float32, ndim=2)  # raises the message naming the argument
    if checks and probs.numel() and not bool(((probs >= 0) & (probs < _INF)).all()):
        found = [what for what, bad in (("NaN", probs.isnan()), ("+inf", probs == _INF), ("-inf", probs == -_INF),
                                        ("negative values", (probs < 0) & (probs > -_INF))) if bool(bad.any())]
        raise ValueError(f"probs must be finite and non-negative, found {', '.join(found)} (check mode; with checks "
                         "off NaN, +-inf and negative entries weigh 0)")


def _fp32(value: float) -> float:
    """The fp32 value nearest ``value`` (p's precision on every backend, docs/design.md §3.9)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _plain_param(value, probs: torch.Tensor, *, integral: bool):
    """k / p as the rest of the call takes them: a numpy (or other ``numbers``) scalar becomes the
    Python number, a 0-d tensor one value per row on its own device (no read back: no sync)."""
    if type(value) is int or type(value) is float or isinstance(value, bool):
        return value  # a bool stays one: _param_tensor refuses it for k and p alike
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and probs.dim() == 2:
            return value.reshape(1).expand(probs.shape[0]).contiguous()
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if not integral and isinstance(value, numbers.Real):
        return float(value)
    return value   # anything else: _param_tensor raises the TypeError naming the argument


def _tuning(tuning: object) -> RenormTuning:
    if tuning is None:
        return DEFAULT_TUNING
    if not isinstance(tuning, RenormTuning):
        raise TypeError(f"tuning must be a RenormTuning, got {type(tuning).__name__}")
    return tuning
