"""Discrete Fourier transforms over any dimensions, from ``lazy.fft``.

``lazy.fft`` (like ``stablehlo.fft``) transforms the innermost one to three
dimensions; torch's ``_fft_*`` kernels and ``numpy.fft`` name any dimensions,
in any order and number. :func:`transform` permutes the named dimensions
innermost (the last named one is the halved dimension of a real transform),
splits more than three into passes of at most three (the transform is
separable), and scales once at the end, so each frontend only states its
normalization as one factor.
"""

from __future__ import annotations

import math


from . import composites, core

MAX_DIMS = 3
"""The most dimensions one ``lazy.fft`` transforms."""


def _permute(h, dims):
    return h if tuple(dims) == tuple(range(len(dims))) else core.apply("permute", h, dims=tuple(dims))


def _inverse(perm):
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return out


def _chunks(positions):
    """Trailing positions in groups of at most MAX_DIMS, the last group last."""
    n = len(positions)
    first = n % MAX_DIMS or MAX_DIMS
    groups = [positions[:first]] + [positions[i:i + MAX_DIMS] for i in range(first, n, MAX_DIMS)]
    return [g for g in groups if g]


def _fft_at(h, fft_type, positions, length):
    """``lazy.fft`` over ``positions`` (consecutive), moved innermost and back if need be."""
    rank = len(h.shape)
    if positions[-1] == rank - 1:
        return core.apply("fft", h, fft_type=fft_type, length=tuple(length))
    rest = [d for d in range(rank) if d not in positions]
    perm = rest + list(positions)
    out = core.apply("fft", _permute(h, perm), fft_type=fft_type, length=tuple(length))
    return _permute(out, _inverse(perm))


def transform(x, dims, kind: str, scale: float, inverse: bool = False, last_size: int | None = None):
    """The transform of ``x`` over ``dims``, multiplied by ``scale``.

    ``kind``: ``"c2c"`` (complex ``x``, forward or ``inverse``), ``"r2c"``
    (f32/f64 ``x``, forward; the last of ``dims`` keeps size // 2 + 1) or
    ``"c2r"`` (complex ``x``, inverse; the last of ``dims`` becomes
    ``last_size``, from ``last_size // 2 + 1`` inputs). ``scale`` applies to
    the unnormalized sums (1 for eager's "backward" forward transform, 1 / n
    for its inverse)."""
    rank = len(x.shape)
    dims = [d + rank if d < 0 else d for d in dims]
    if not dims:
        return x if scale == 1.0 else core.apply("mul", x, composites.full_like(x, scale))
    perm = [d for d in range(rank) if d not in dims] + dims
    h = _permute(x, perm)
    positions = list(range(rank - len(dims), rank))
    groups = _chunks(positions)
    applied = 1.0  # the factor the transforms applied themselves (IFFT and IRFFT divide by n)
    if kind == "r2c":
        last = groups[-1]
        h = core.apply("fft", h, fft_type="RFFT", length=tuple(h.shape[p] for p in last))
        for g in groups[:-1]:
            h = _fft_at(h, "FFT", g, [h.shape[p] for p in g])
    elif kind == "c2r":
        for g in groups[:-1]:
            sizes = [h.shape[p] for p in g]
            h = _fft_at(h, "IFFT", g, sizes)
            applied /= math.prod(sizes)
        last = groups[-1]
        sizes = [h.shape[p] for p in last[:-1]] + [last_size]
        h = core.apply("fft", h, fft_type="IRFFT", length=tuple(sizes))
        applied /= math.prod(sizes)
    else:
        for g in groups:
            sizes = [h.shape[p] for p in g]
            h = _fft_at(h, "IFFT" if inverse else "FFT", g, sizes)
            if inverse:
                applied /= math.prod(sizes)
    factor = scale / applied
    if factor != 1.0:
        h = core.apply("mul", h, composites.full_like(h, factor))
    return _permute(h, _inverse(perm))


def norm_scale(norm: str, n: int, inverse: bool) -> float:
    """The factor of NumPy's and torch.fft's ``norm`` modes: "backward" scales
    the inverse by 1 / n, "forward" the forward transform, "ortho" both by
    1 / sqrt(n)."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n) if n else 1.0
    if (norm == "backward") == inverse:
        return 1.0 / n if n else 1.0
    return 1.0


__all__ = ["MAX_DIMS", "norm_scale", "transform"]
