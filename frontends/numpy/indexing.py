"""Indexing: basic indexing makes views (as in NumPy); assignment writes through them.

Basic keys (ints, slices, ``...``, ``None``) become view steps: a slice per
indexed dim (a reverse first for negative steps), then one reshape for the
dims ints drop and ``None`` adds. NumPy's stand-in checks the key and gives
the result's strides. Advanced keys (integer arrays, boolean masks) are
copies, as in NumPy: see :func:`advanced_getitem`.
"""

from __future__ import annotations

import numpy as np

from lazycore import core
from lazycore.views import Reshape, Reverse, Slice

from .array import ndarray, value, wrap, write

_BASIC = (int, np.integer, slice, type(Ellipsis), type(None))


def _normalize(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def is_basic(key: tuple) -> bool:
    return all(isinstance(k, _BASIC) and not isinstance(k, (bool, np.bool_)) for k in key)


def basic_view(a: ndarray, key: tuple) -> ndarray:
    origin = a._standin()
    probe = key if any(k is Ellipsis for k in key) else key + (Ellipsis,)
    out = origin[probe]  # NumPy's IndexError for bad keys, and the view's strides
    steps = []
    n_indexed = sum(1 for k in key if k is not None and k is not Ellipsis)
    d = 0
    for k in key:
        if k is None:
            continue
        if k is Ellipsis:
            d += a.ndim - n_indexed
            continue
        n = a.shape[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            if step < 0:
                steps.append(Reverse((d,)))
                start, step = n - 1 - start, -step
            if not (start == 0 and step == 1 and count == n):
                steps.append(Slice(d, start, count, step))
        else:
            steps.append(Slice(d, int(k) % n, 1, 1))
        d += 1
    if out.shape != _sliced_shape(a.shape, steps):
        steps.append(Reshape(out.shape))
    return a._view(tuple(steps), out, origin)


def _sliced_shape(shape, steps):
    shape = list(shape)
    for s in steps:
        if isinstance(s, Slice):
            shape[s.dim] = s.count
    return tuple(shape)


def getitem(a: ndarray, key):
    key = _normalize(key)
    if is_basic(key):
        return basic_view(a, key)
    return advanced_getitem(a, key)


def advanced_getitem(a: ndarray, key: tuple):
    """Integer-array and mask indexing: a copy (mask shapes depend on data: NumPy computes them)."""
    from .fallback import call_numpy

    return call_numpy(_getitem, (a, key), {}, name="ndarray.__getitem__")


def _getitem(a, key):
    return a[key]


def setitem(a: ndarray, key, val) -> None:
    key = _normalize(key)
    if not a._writeable:
        raise ValueError("assignment destination is read-only")
    if is_basic(key):
        target = basic_view(a, key)
        write(target, _broadcast_value(val, target))
        return
    advanced_setitem(a, key, val)


def _broadcast_value(val, target: ndarray):
    """``val`` cast (unsafely, as NumPy assignment does) and broadcast to ``target``."""
    from .ufuncs import broadcast_to_shape, shape_of, to_handle

    shape = shape_of(val)
    try:
        ok = np.broadcast_shapes(shape, target.shape) == target.shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"could not broadcast input array from shape {shape} into shape {target.shape}")
    return broadcast_to_shape(to_handle(val, target.dtype), target.shape)


def advanced_setitem(a: ndarray, key: tuple, val) -> None:
    from .fallback import call_numpy

    call_numpy(_setitem, (a, key, val), {}, name="ndarray.__setitem__")


def _setitem(a, key, val):
    a[key] = val
