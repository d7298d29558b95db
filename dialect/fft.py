"""The discrete Fourier transform, with StableHLO's semantics.

``lazy.fft`` transforms the innermost ``len(length)`` (1 to 3) dimensions, as
``stablehlo.fft`` does, unnormalized (IFFT and IRFFT divide by the number of
points, as every library's inverse does). Frontends move other axes innermost
with permutes, pad or crop to ``n`` and scale for their ``norm`` modes.
"""

from __future__ import annotations

from .rules import require_dtype
from .spec import op
from .types import ShapeError, TensorType, complex_dtype, is_complex, real_dtype

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


# (every output bin mixes every input position: padding cannot pad a transform)
@op("fft", ("operand",), attrs={"fft_type": "str", "length": "i64[]"}, padding="refused")
def _fft(x: TensorType, *, fft_type, length):
    """FFT/IFFT (complex to complex), RFFT (f32/f64 to complex: the last
    transformed dimension becomes length[-1] // 2 + 1) or IRFFT (complex to
    real: that dimension holds length[-1] // 2 + 1 inputs and becomes
    length[-1]) over the innermost len(length) dimensions, which (but for
    IRFFT's last) have sizes length."""
    if fft_type not in FFT_TYPES:
        raise ShapeError(f"fft_type must be one of {', '.join(FFT_TYPES)}, got '{fft_type}'")
    length = tuple(length)
    if not 1 <= len(length) <= 3:
        raise ShapeError(f"length must have 1 to 3 entries, got {list(length)}")
    if any(n < 1 for n in length):
        raise ShapeError(f"length must be positive, got {list(length)}")
    if x.rank < len(length):
        raise ShapeError(f"operand of rank {x.rank} has fewer dimensions than length {list(length)}")
    lead, inner = x.shape[: x.rank - len(length)], x.shape[x.rank - len(length):]
    if fft_type == "RFFT":
        require_dtype("operand", x, "float")
        if x.dtype not in ("f32", "f64"):
            raise ShapeError(f"RFFT operand must be f32 or f64, got {x.dtype}")
        want, out = length, length[:-1] + (length[-1] // 2 + 1,)
        dtype = complex_dtype(x.dtype)
    else:
        require_dtype("operand", x, "complex")
        if fft_type == "IRFFT":
            want, out, dtype = length[:-1] + (length[-1] // 2 + 1,), length, real_dtype(x.dtype)
        else:
            want, out, dtype = length, length, x.dtype
    if inner != want:
        raise ShapeError(f"{fft_type} of length {list(length)} needs innermost dimensions {list(want)}, got {x}")
    return TensorType(lead + out, dtype)


__all__ = ["FFT_TYPES"]
