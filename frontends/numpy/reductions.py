"""Reductions with ``axis``/``keepdims``/``dtype`` and NumPy's result types."""

from __future__ import annotations

import builtins

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from lazycore import core

from .array import ndarray, value, wrap
from .fallback import implements
from .ufuncs import apply, asarray_like, broadcast_to_shape, cast, const

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all"]


def _axes(a: ndarray, axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(a.ndim))
    return normalize_axis_tuple(axis, a.ndim)  # NumPy's AxisError


def _finish(h, a, axes, keepdims, dtype):
    shape = tuple(1 if i in axes else n for i, n in enumerate(a.shape)) if keepdims else tuple(
        n for i, n in enumerate(a.shape) if i not in axes)
    if h.shape != shape:
        h = apply("reshape", h, shape=shape)
    return wrap(h, dtype)


def _reduce(op, a, axes, h):
    if not axes or h.shape == ():
        return h
    return apply(op, h, dims=axes)


def _sum_dtype(a, dtype):
    if dtype is not None:
        return np.dtype(dtype)
    # NumPy: integers and bools accumulate in the platform integer
    if a.dtype.kind == "b" or (a.dtype.kind == "i" and a.dtype.itemsize < 8):
        return np.dtype(np.int64)
    if a.dtype.kind == "u" and a.dtype.itemsize < 8:
        return np.dtype(np.uint64)
    return a.dtype


def _reject_unsupported(where=True, out=None, initial=None):
    if where is not True or out is not None or initial is not None:
        return True
    return False


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    a = asarray_like(a)
    if _reject_unsupported(where, out, initial):
        from .fallback import call_numpy

        return call_numpy(np.sum, (a,), dict(axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                                              initial=initial, where=where) if initial is not None else
                          dict(axis=axis, dtype=dtype, out=out, keepdims=keepdims, where=where))
    axes = _axes(a, axis)
    dt = _sum_dtype(a, dtype)
    h = cast(value(a), dt)
    return _finish(_reduce("reduce_sum", a, axes, h), a, axes, keepdims, dt)


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
    a = asarray_like(a)
    axes = _axes(a, axis)
    dt = _sum_dtype(a, dtype)
    h = cast(value(a), dt)
    return _finish(_reduce("reduce_prod", a, axes, h), a, axes, keepdims, dt)


def _extremum(op, name):
    def reduce(a, axis=None, out=None, keepdims=False, initial=None, where=True):
        a = asarray_like(a)
        axes = _axes(a, axis)
        if builtins.any(a.shape[d] == 0 for d in axes) or (a.size == 0 and not axes):
            raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
        h = value(a)
        r = _reduce(op, a, axes, h)
        if a.dtype.kind == "f" and axes:
            # NumPy propagates NaN through max/min
            nan = _reduce("reduce_max", a, axes, apply("compare", h, h, direction="NE"))
            r = apply("select", nan, const(float("nan"), r), r)
        return _finish(r, a, axes, keepdims, a.dtype)

    return reduce


max = implements(np.max, np.amax)(_extremum("reduce_max", "maximum"))
min = implements(np.min, np.amin)(_extremum("reduce_min", "minimum"))
amax, amin = max, min


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, where=True):
    a = asarray_like(a)
    axes = _axes(a, axis)
    dt = np.dtype(dtype) if dtype is not None else (a.dtype if a.dtype.kind == "f" else np.dtype(np.float64))
    h = cast(value(a), dt)
    total = _reduce("reduce_sum", a, axes, h)
    count = 1
    for d in axes:
        count *= a.shape[d]
    total = apply("div", total, const(count, total))
    return _finish(total, a, axes, keepdims, dt)


def _logical(op):
    def reduce(a, axis=None, out=None, keepdims=False, where=True):
        a = asarray_like(a)
        axes = _axes(a, axis)
        h = cast(value(a), np.dtype(bool))
        return _finish(_reduce(op, a, axes, h), a, axes, keepdims, np.dtype(bool))

    return reduce


any = implements(np.any)(_logical("reduce_max"))
all = implements(np.all)(_logical("reduce_min"))
