"""Raw-bit views: the one helper that oracles and tests use to compare tensors bit for bit.

A floating tensor viewed as the integer type of its width, so NaN payloads, -0.0 and
fp8 bytes compare exactly; other dtypes are returned as they are. Imports torch only.
"""
from __future__ import annotations

import torch

_INT_OF_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def int_dtype_of_width(dtype: torch.dtype) -> torch.dtype:
    """The integer dtype as wide as ``dtype`` (uint8 for 1-byte dtypes)."""
    return _INT_OF_WIDTH[torch.empty((), dtype=dtype).element_size()]


def bits_view(t: torch.Tensor) -> torch.Tensor:
    """The same memory as integers of equal width when ``t`` is floating, else ``t`` itself."""
    return t.view(int_dtype_of_width(t.dtype)) if t.dtype.is_floating_point else t
