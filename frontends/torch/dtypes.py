"""torch dtypes <-> lazy dialect element types, and host copies in and out."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

TO_LAZY = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.uint8: "ui8",
    torch.uint16: "ui16",
    torch.uint32: "ui32",
    torch.uint64: "ui64",
    torch.bool: "i1",
    torch.complex64: "complex<f32>",
    torch.complex128: "complex<f64>",
}
TO_TORCH = {v: k for k, v in TO_LAZY.items()}


def lazy_dtype(dtype: torch.dtype) -> str:
    try:
        return TO_LAZY[dtype]
    except KeyError:
        raise TypeError(f"lazycore has no element type for {dtype}") from None


def supported(dtype: torch.dtype) -> bool:
    return dtype in TO_LAZY


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A host torch tensor as a NumPy array (bfloat16 through ml_dtypes)."""
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """A NumPy array as a host torch tensor that owns its memory."""
    a = np.asarray(a, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy() if not a.flags.writeable else a)
