"""Argument checks shared by the kernel ops (structural ones never sync)."""
from __future__ import annotations

import torch

from impl.validation import INDEX_DTYPES, check_positive_int, check_same_device, check_tensor


def index_vector(name: str, t: object, length: int | None = None) -> torch.Tensor:
    """A contiguous 1-D int32/int64 tensor, of ``length`` rows when given."""
    return check_tensor(name, t, dtype=INDEX_DTYPES, ndim=1, shape=None if length is None else (length,))


def optional_index_vector(name: str, t: object, length: int) -> torch.Tensor | None:
    return None if t is None else index_vector(name, t, length)


def ring_and_window(ring: object, window: object) -> tuple[int, int]:
    """The ring must hold at least window + 1 rows (config checks the gamma-aware bound)."""
    check_positive_int("window", window)
    check_positive_int("ring", ring)
    if ring < window + 1:
        raise ValueError(
            f"ring ({ring}) is too small for window ({window}): a ring needs at least window + 1 rows "
            "(SpecConfig requires window + num_draft_tokens - 1)"
        )
    return ring, window


def same_device(**tensors: torch.Tensor | None) -> None:
    check_same_device(**tensors)


def float_scalar(name: str, value: object, *, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, got {type(value).__name__}")
    if value != value or (minimum is not None and value < minimum):  # NaN or below minimum
        raise ValueError(f"{name} must be a number >= {minimum}, got {value!r}")
    return float(value)


def int_scalar(name: str, value: object, *, minimum: int = 0) -> int:
    return check_positive_int(name, value, minimum=minimum)


# raw-bits views: data movement copies bit patterns, never values
_BITS_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits_view(t: torch.Tensor) -> torch.Tensor:
    """The same memory viewed as integers of equal width (fp8/bf16/fp32 move as raw bytes)."""
    if t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"unsupported dtype for data movement: {t.dtype}")
    return t.view(_BITS_VIEW[t.element_size()])
