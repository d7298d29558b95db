"""NumPy's ufunc protocol on lazy arrays, and a lazy ufunc's methods beyond calls.

``ndarray.__array_ufunc__`` (bound by :mod:`.methods`) and the ufunc objects'
``reduce``, ``accumulate``, ``outer``, ``at`` and ``reduceat`` (bound here,
onto :class:`.ufuncs.ufunc`) come to :func:`array_ufunc`. A call is
:mod:`.ufuncs`'s (a generalized ufunc's, ``matmul``'s, is :mod:`.gufuncs`');
``reduce`` of a ufunc one of NumPy's reductions is (``add.reduce`` is ``sum``)
is that reduction; ``accumulate`` of an associative loop is cumsum/cumprod
or a parallel prefix; ``outer`` is a broadcast call; anything else is NumPy's,
counted. Reductions, products and joins are written with ufunc calls, so these
methods live above them rather than in :mod:`.ufuncs`.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from . import reductions
from .array import value, wrap
from .fallback import call_numpy
from .gufuncs import BY_UFUNC
from .manipulation import concatenate
from .ufuncs import LOOPS, asarray_like, call, quick, ufunc


def array_ufunc(uf, method, inputs, kwargs):
    """``ndarray.__array_ufunc__``: calls stay lazy; ``reduce`` maps to reductions."""
    if method == "__call__":
        if not kwargs and uf.__name__ in LOOPS:
            return quick(uf, inputs)
        lazy = BY_UFUNC.get(uf)
        if lazy is not None:  # a gufunc: ``host @ lazy``, ``numpy.matvec(lazy, ...)``
            return lazy(*inputs, **kwargs)
        return call(uf, inputs, **kwargs)
    if uf in BY_UFUNC:  # (NumPy refuses a gufunc most methods: its error, read off stand-ins)
        return getattr(BY_UFUNC[uf], method)(*inputs, **kwargs)
    if method == "reduce" and uf.__name__ in REDUCERS:
        kwargs = dict(kwargs)
        kwargs.setdefault("axis", 0)  # NumPy passes only what the caller gave; reduce's default is 0
        if kwargs.get("dtype", None) is None:
            kwargs.pop("dtype", None)  # max/min/any/all take no dtype
        return getattr(reductions, REDUCERS[uf.__name__])(*inputs, **kwargs)
    if method == "outer" and not kwargs.get("out") and uf.nin == 2 and uf.nout == 1:
        return _outer(uf, inputs, kwargs)
    if method == "accumulate":
        done = _accumulate(uf, inputs, kwargs)
        if done is not None:
            return done
    return call_numpy(getattr(uf, method), inputs, kwargs, name=f"numpy.{uf.__name__}.{method}")


def _outer(uf, inputs, kwargs):
    """``uf.outer(A, B)``: ``uf(A[..., None, ...], B)``, the lazy broadcasting NumPy's is."""
    if len(inputs) != 2:
        raise TypeError(f"{uf.__name__}.outer() takes exactly 2 positional arguments ({len(inputs)} given)")
    a, b = (asarray_like(x) for x in inputs)
    a = a.reshape(a.shape + (1,) * b.ndim)
    kwargs = {k: v for k, v in kwargs.items() if not (k == "out" and v is None)}
    return call(uf, (a, b), **kwargs) if kwargs else quick(uf, (a, b))


# binary ufuncs whose loop is associative on its own type: an accumulation is a parallel
# prefix (Hillis-Steele) over them, with no identity needed
_ASSOCIATIVE = {"add", "multiply", "maximum", "minimum", "fmax", "fmin", "logical_and", "logical_or",
                "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"}


def _accumulate(uf, inputs, kwargs):
    """``uf.accumulate(a, axis=0, dtype=None)`` lazily, for the associative ufuncs whose
    loop keeps its type (NumPy runs the loop ``(t, t) -> t``); None: NumPy's, counted."""
    if uf.__name__ not in _ASSOCIATIVE or len(inputs) != 1:
        return None
    kwargs = dict(kwargs)
    axis, dtype, out = kwargs.pop("axis", 0), kwargs.pop("dtype", None), kwargs.pop("out", None)
    if kwargs or out is not None or axis is None:
        return None
    a = asarray_like(inputs[0])
    if a.ndim == 0:
        return None  # NumPy's error
    if uf.__name__ in ("add", "multiply"):  # NumPy's sum/prod dtypes (small integers widen): cumsum/cumprod
        return getattr(reductions, "cumsum" if uf.__name__ == "add" else "cumprod")(a, axis=axis, dtype=dtype)
    axis = normalize_axis_index(axis, a.ndim)
    dt = np.dtype(dtype) if dtype is not None else a.dtype
    try:
        loop = uf.resolve_dtypes((dt, dt, None), reduction=True)  # the loop NumPy accumulates with
    except TypeError:
        return None
    if not (loop[0] == loop[1] == loop[2]):
        return None
    h = a.astype(loop[0], copy=False) if a.dtype != loop[0] else a
    n, k = a.shape[axis], 1
    lead = (slice(None),) * axis
    while k < n:
        combined = quick(uf, (h[lead + (slice(k, None),)], h[lead + (slice(0, n - k),)]))
        h = concatenate([h[lead + (slice(0, k),)], combined], axis=axis)
        k *= 2
    return h if h is not a else wrap(value(a), a.dtype)


REDUCERS = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
            "logical_and": "all", "logical_or": "any"}


# --- the methods of the ufunc objects (lazycore.numpy.add.reduce, ...) ---------------------


def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, **kwargs):
    return array_ufunc(self._uf, "reduce", (a,), dict(axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                                                       **kwargs))


def accumulate(self, array, axis=0, dtype=None, out=None):
    """Lazy for the associative ufuncs (a parallel prefix); else NumPy's, counted."""
    return array_ufunc(self._uf, "accumulate", (array,), dict(axis=axis, dtype=dtype, out=out))


def outer(self, A, B, /, **kwargs):
    """Lazy: ``self(A[..., None, ...], B)``."""
    return array_ufunc(self._uf, "outer", (A, B), kwargs)


def at(self, a, indices, b=None, /):
    """Unbuffered in place: NumPy's on the value, counted, written back to ``a``."""
    return array_ufunc(self._uf, "at", (a, indices) if b is None else (a, indices, b), {})


def reduceat(self, array, indices, axis=0, dtype=None, out=None):
    """NumPy's, counted."""
    return array_ufunc(self._uf, "reduceat", (array, indices), dict(axis=axis, dtype=dtype, out=out))


for _method in (reduce, accumulate, outer, at, reduceat):
    setattr(ufunc, _method.__name__, _method)
