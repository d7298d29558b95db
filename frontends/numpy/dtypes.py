"""NumPy dtypes <-> lazy dialect element types."""

from __future__ import annotations

import ml_dtypes
import numpy as np

TO_LAZY = {
    np.dtype(np.bool_): "i1",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "ui8",
    np.dtype(np.uint16): "ui16",
    np.dtype(np.uint32): "ui32",
    np.dtype(np.uint64): "ui64",
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(ml_dtypes.bfloat16): "bf16",
}
TO_NUMPY = {v: k for k, v in TO_LAZY.items()}


def supported(dtype) -> bool:
    return np.dtype(dtype) in TO_LAZY


def lazy_dtype(dtype) -> str:
    try:
        return TO_LAZY[np.dtype(dtype)]
    except KeyError:
        raise TypeError(f"lazycore.numpy has no element type for {np.dtype(dtype)}") from None
