"""torch.fft through ``lazy.fft``: ATen's three kernels every ``torch.fft``
function reaches (padding and cropping to ``n`` happen before them, in ATen),
and the physical conjugate its hermitian transforms use."""

from __future__ import annotations

import math

import torch

from lazycore.trace import composites
from lazycore.trace.fft import transform

from ..lowering import convert, lowers

aten = torch.ops.aten

# ATen's fft_norm_mode: none, by_root_n, by_n
_SCALE = {0: lambda n: 1.0, 1: lambda n: 1.0 / math.sqrt(n) if n else 1.0, 2: lambda n: 1.0 / n if n else 1.0}


def _size(shape, dims) -> int:
    return math.prod(shape[d] for d in dims)


@lowers(aten._fft_c2c.default)
def _c2c(ctx, x, dim, normalization, forward):
    return transform(x, dim, "c2c", _SCALE[normalization](_size(x.shape, dim)), inverse=not forward)


@lowers(aten._fft_r2c.default)
def _r2c(ctx, x, dim, normalization, onesided):
    if x.dtype not in ("f32", "f64"):
        return NotImplemented  # half precision: eager's CPU kernel has its say (it refuses)
    scale = _SCALE[normalization](_size(x.shape, dim))
    if not onesided:  # the whole spectrum: the complex transform of the real input
        return transform(convert(x, ctx.dtype), dim, "c2c", scale)
    return transform(x, dim, "r2c", scale)


@lowers(aten._fft_c2r.default)
def _c2r(ctx, x, dim, normalization, last_dim_size):
    return transform(x, dim, "c2r", _SCALE[normalization](math.prod(ctx.shape[d] for d in dim)),
                     inverse=True, last_size=last_dim_size)


# --- complex parts (torch.fft's hermitian transforms conjugate) ---------------------------


@lowers(aten._conj_physical.default, aten.conj_physical.default)
def _conj_physical(ctx, x):
    return composites.conj(x)
