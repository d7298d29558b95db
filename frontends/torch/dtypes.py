"""torch dtypes <-> lazy dialect element types, and host copies in and out."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch

from lazycore.ir import events, sourceloc
from lazycore.trace import core

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
    torch.float8_e4m3fn: "f8E4M3FN",
    torch.float8_e5m2: "f8E5M2",
    torch.float8_e4m3fnuz: "f8E4M3FNUZ",
    torch.float8_e5m2fnuz: "f8E5M2FNUZ",
}
TO_TORCH = {v: k for k, v in TO_LAZY.items()}

# complex32 (torch.chalf) is stored as complex<f32>: StableHLO's complex element types are
# complex<f32> and complex<f64> only. Each part of a stored chalf value holds a float16
# (:func:`chalf_rounded`, applied wherever a chalf tensor gets a value), so every op computes
# in complex<f32> from float16 parts and rounds its result once, as eager's CPU kernels for
# c10::complex<Half> do (through c10::complex<float>). The torch dtype of a complex<f32>
# handle is then the meta result's, not TO_TORCH's.
CHALF = torch.complex32
STORED = {CHALF: "complex<f32>"}

# torch dtypes NumPy has no type for, and the ml_dtypes type of the same bits
_BITS = {
    torch.bfloat16: (torch.int16, np.int16, ml_dtypes.bfloat16),
    torch.float8_e4m3fn: (torch.uint8, np.uint8, ml_dtypes.float8_e4m3fn),
    torch.float8_e5m2: (torch.uint8, np.uint8, ml_dtypes.float8_e5m2),
    torch.float8_e4m3fnuz: (torch.uint8, np.uint8, ml_dtypes.float8_e4m3fnuz),
    torch.float8_e5m2fnuz: (torch.uint8, np.uint8, ml_dtypes.float8_e5m2fnuz),
}
_FROM_ML = {np.dtype(ml): (np_bits, tdt) for tdt, (_, np_bits, ml) in _BITS.items()}
FLOAT8 = tuple(t for t, lazy in TO_LAZY.items() if lazy.startswith("f8"))


def lazy_dtype(dtype: torch.dtype) -> str:
    try:
        return TO_LAZY[dtype]
    except KeyError:
        if dtype in STORED:
            return STORED[dtype]
        raise TypeError(f"lazycore has no element type for {dtype}") from None


def supported(dtype: torch.dtype) -> bool:
    return dtype in TO_LAZY or dtype in STORED


def chalf_rounded(h):
    """A complex<f32> handle with each part rounded to float16 (nearest even, as
    c10's float -> Half), still complex<f32>: the value a chalf tensor holds."""
    parts = [core.convert_to(core.convert_to(core.apply(p, h), "f16"), "f32") for p in ("real", "imag")]
    return core.apply("complex", *parts)


def check_chalf(value):
    """An argument eager converts to complex32 checked (``alpha=``, ``value=``):
    a finite part beyond float16's range raises eager's error. The value is
    given back as it is (a recorded float stays one: it is a parameter of the
    recording), to be rounded in the graph by :func:`chalf_rounded`."""
    c = complex(value)
    if any(math.isfinite(p) and abs(p) > _HALF_MAX for p in (c.real, c.imag)):
        raise RuntimeError("value cannot be converted to type c10::complex<c10::Half> without overflow")
    return value


_HALF_MAX = 65504.0


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A host torch tensor as a NumPy array (bfloat16 and float8 through
    ml_dtypes, by their bits; a sparse one densified, see :func:`densified`)."""
    if t.layout != torch.strided:
        t = densified(t)
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    if t.dtype == CHALF:  # (NumPy has no complex32; complex64 holds it exactly)
        t = t.to(torch.complex64)
    bits = _BITS.get(t.dtype)
    if bits is not None:
        return t.view(bits[0]).numpy().view(bits[2])
    return t.numpy()


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """A NumPy array as a host torch tensor that owns its memory."""
    a = np.asarray(a, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    bits = _FROM_ML.get(a.dtype)
    if bits is not None:
        return torch.from_numpy(a.view(bits[0]).copy()).view(bits[1])
    return torch.from_numpy(a.copy() if not a.flags.writeable else a)


def densified(t: torch.Tensor) -> torch.Tensor:
    """A sparse host tensor's values as a dense one, counted as a fallback.

    The lazy device has no sparse layouts (XLA's buffers are dense): a sparse
    tensor moved there, or made there by an op that ran on the CPU
    (``to_sparse``, ``sparse.sampled_addmm``), arrives with eager's values in
    the strided layout, and the conversion is counted with the user's line,
    as every op the device does not run is (``lazycore.metrics.fallbacks()``).
    """
    events.fallback(f"to_dense ({t.layout} on the lazy device)", sourceloc.user_location())
    return t.to_dense()
