"""Tensor types as plain Python values, free of MLIR.

Shape rules run on the runtime's per-op path, where no MLIR work may happen,
so they see shapes as tuples and element types as the names MLIR prints
(``f32``, ``i1``, ``ui8`` ...). Converting to and from ``ir`` types is one
``str``/``parse`` away and lives in :mod:`lazycore.dialect.build`.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

# 8-bit floats (MLIR's spellings), the formats of float8 training: E4M3FN
# (no infinities, one NaN, max 448), E5M2 (IEEE-like, with infinities), and
# their FNUZ variants (no negative zero, NaN is the bit pattern of -0, no
# infinities). They are floats to every rule; NumPy holds them through
# ml_dtypes. They come last so every table built from DTYPES keeps its
# positions for the other types.
FLOAT8_DTYPES = ("f8E4M3FN", "f8E5M2", "f8E4M3FNUZ", "f8E5M2FNUZ")
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64") + FLOAT8_DTYPES
SIGNED_DTYPES = ("i8", "i16", "i32", "i64")
UNSIGNED_DTYPES = ("ui8", "ui16", "ui32", "ui64")
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES
BOOL_DTYPE = "i1"
# MLIR's spelling: ``tensor<2xcomplex<f32>>``. Complex types come last so the
# real types keep their positions in every table built from DTYPES.
COMPLEX_DTYPES = ("complex<f32>", "complex<f64>")
DTYPES = FLOAT_DTYPES[:4] + INT_DTYPES + (BOOL_DTYPE,) + COMPLEX_DTYPES + FLOAT8_DTYPES

_TO_NUMPY = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i1": np.dtype(np.bool_),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "ui8": np.dtype(np.uint8),
    "ui16": np.dtype(np.uint16),
    "ui32": np.dtype(np.uint32),
    "ui64": np.dtype(np.uint64),
    "complex<f32>": np.dtype(np.complex64),
    "complex<f64>": np.dtype(np.complex128),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
}
_FROM_NUMPY = {v: k for k, v in _TO_NUMPY.items()}


class ShapeError(ValueError):
    """A shape, dtype or attribute rule of a ``lazy`` op was broken.

    Raised by shape rules: at the user's call on the runtime path, and turned
    into an MLIR diagnostic by the verifier.
    """


class TensorType(NamedTuple):
    shape: tuple[int, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_float8(dtype: str) -> bool:
    return dtype in FLOAT8_DTYPES


def is_complex(dtype: str) -> bool:
    return dtype in COMPLEX_DTYPES


def real_dtype(dtype: str) -> str:
    """The float type of a complex type's parts (``complex<f32>`` -> ``f32``); a real type itself."""
    return dtype[8:-1] if dtype in COMPLEX_DTYPES else dtype


def complex_dtype(dtype: str) -> str:
    """The complex type whose parts are the float ``dtype`` (``f32`` -> ``complex<f32>``)."""
    out = f"complex<{dtype}>"
    if out not in COMPLEX_DTYPES:
        raise ShapeError(f"no complex element type has {dtype} parts (have: {', '.join(COMPLEX_DTYPES)})")
    return out


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_unsigned(dtype: str) -> bool:
    return dtype in UNSIGNED_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == BOOL_DTYPE


def check_dtype(dtype: str) -> str:
    if dtype not in _TO_NUMPY:
        raise ShapeError(f"unsupported element type '{dtype}' (supported: {', '.join(DTYPES)})")
    return dtype


def to_numpy_dtype(dtype: str) -> np.dtype:
    return _TO_NUMPY[check_dtype(dtype)]


def from_numpy_dtype(dtype) -> str:
    try:
        return _FROM_NUMPY[np.dtype(dtype)]
    except KeyError:
        raise ShapeError(f"unsupported NumPy dtype {np.dtype(dtype)}") from None


def type_of(array) -> TensorType:
    """The TensorType of a NumPy array (or anything with .shape and .dtype)."""
    return TensorType(tuple(int(d) for d in array.shape), from_numpy_dtype(array.dtype))
