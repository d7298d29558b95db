"""Complex arrays: ``.real``/``.imag`` (writable views of a complex array, as
NumPy's), ``np.real``, ``np.imag``, ``np.angle``, ``np.iscomplexobj``."""

from __future__ import annotations

import numpy as np

from lazycore.trace import composites
from lazycore.trace.views import AsReal, Reshape, Slice

from . import dtypes
from .array import _new, ndarray, value, wrap
from .fallback import implements
from .ufuncs import UFUNCS, apply, asarray_like


def _part(a: ndarray, index: int) -> ndarray:
    """The real (0) or imaginary (1) parts of a complex array, as a view of it."""
    steps = (AsReal(), Slice(a.ndim, index, 1, 1), Reshape(a.shape))
    # NumPy's own layout for the parts: every stride doubles, the imaginary part one element on
    return _new(a._storage, a._steps + steps, a.shape, np.finfo(a._dtype).dtype,
                tuple(2 * s for s in a._estrides), 2 * a._offset + index, a._writeable)


def real(a: ndarray) -> ndarray:
    """``a.real``: a view of a complex array's real parts; a real array itself (a view)."""
    return _part(a, 0) if a.dtype.kind == "c" else a.view()


def imag(a: ndarray) -> ndarray:
    """``a.imag``: a view of a complex array's imaginary parts; zeros, read-only, for a real array."""
    if a.dtype.kind == "c":
        return _part(a, 1)
    out = wrap(composites.constant(0, dtypes.lazy_dtype(a.dtype), a.device, a.shape), a.dtype)
    out._writeable = False
    return out


def _setter(getter):
    def assign(self, v):
        getter(self)[...] = v

    return assign


ndarray.real = property(real, _setter(real))
ndarray.imag = property(imag, _setter(imag))


@implements(np.real)
def np_real(val):
    return real(val) if isinstance(val, ndarray) else np.real(val)


@implements(np.imag)
def np_imag(val):
    return imag(val) if isinstance(val, ndarray) else np.imag(val)


@implements(np.angle)
def angle(z, deg=False):
    a = asarray_like(z)
    if a.dtype.kind == "c":
        h = value(a)
        out = wrap(apply("atan2", apply("imag", h), apply("real", h)))
    else:  # NumPy's: arctan2(0, z), so pi below (and at -0.0), 0 above, NaN stays
        out = UFUNCS["arctan2"](0, a)
    return UFUNCS["multiply"](out, 180 / np.pi) if deg else out


@implements(np.iscomplexobj)
def iscomplexobj(x):
    return (x.dtype if isinstance(x, ndarray) else np.asarray(x).dtype).kind == "c"
