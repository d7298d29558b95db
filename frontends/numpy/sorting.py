"""Sorting: ``np.sort``, ``np.argsort``, ``ndarray.sort`` / ``.argsort``; with
the Array API's ``descending=`` keyword too, as ``lazycore.numpy`` is also
the Array API namespace (NumPy has no such keyword; its code never passes it).

Each is one ``lazy.sort`` (``stablehlo.sort`` of the values and their
positions): stable, NaN after every number (before every number when
descending), as NumPy sorts. NumPy's default ``kind`` (quicksort) is not
stable: for equal elements of large arrays its ``argsort`` may give their
positions in another order than this (the values are the same). Complex
arrays (NumPy's lexicographic order) and ``order=`` (structured arrays) run
NumPy, counted.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from lazycore.trace import core

from .array import ndarray, value, wrap, write
from .fallback import call_numpy, implements
from .indexing import take, take_along_axis
from .reductions import _along
from .reductions import sum as _sum
from .ufuncs import UFUNCS, asarray_like, cast

_KINDS = (None, "quicksort", "mergesort", "heapsort", "stable")


def _by_numpy(a, order, kind) -> bool:
    return order is not None or kind not in _KINDS or a.dtype.kind not in "biuf"


def _sorted(a: ndarray, axis, descending: bool):
    """``(values, indices)`` handles of ``a`` sorted along ``axis`` (None: flattened)."""
    h, d = _along(a, axis)
    keys = cast(h, np.dtype(np.int8)) if a.dtype == np.bool_ else h  # (i1 has no order in the table)
    values, indices = core.apply("sort", keys, dim=d, descending=bool(descending), dtype="i64")
    return (cast(values, a.dtype) if keys is not h else values), indices


def _numpy_can(fn, a, descending, **kw):
    if descending:
        raise TypeError(f"{fn.__name__}: descending=True is the Array API's, for real numbers only; got {a.dtype}")
    return call_numpy(fn, (a,), kw)


@implements(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    a = asarray_like(a)
    if _by_numpy(a, order, kind):
        return _numpy_can(np.sort, a, descending, axis=axis, kind=kind, order=order, stable=stable)
    if a.ndim == 0 and axis is not None:
        normalize_axis_index(axis, 0)  # NumPy's AxisError: a 0-d array has no axis to sort
    return wrap(_sorted(a, axis, descending)[0], a.dtype)


@implements(np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    """Positions of a stable sort: equal elements keep their order, descending too."""
    a = asarray_like(a)
    if _by_numpy(a, order, kind):
        return _numpy_can(np.argsort, a, descending, axis=axis, kind=kind, order=order, stable=stable)
    return wrap(_sorted(a, axis, descending)[1], np.dtype(np.int64))  # (a 0-d array sorts as 1-d: NumPy's [0])


def _sort_method(self, axis=-1, kind=None, order=None, *, stable=None):
    """``a.sort()``: in place."""
    if _by_numpy(self, order, kind):
        write(self, value(asarray_like(call_numpy(np.sort, (self,), dict(axis=axis, kind=kind, order=order,
                                                                         stable=stable)))))
        return None
    if self.ndim == 0:
        normalize_axis_index(axis, 0)
    write(self, _sorted(self, axis, False)[0])


def _argsort_method(self, axis=-1, kind=None, order=None, *, stable=None):
    return argsort(self, axis, kind, order, stable=stable)


def _monotonicity(bins: np.ndarray) -> int:
    """NumPy's ``check_array_monotonic`` on the edges (as doubles): 1 increasing (or all
    equal), -1 decreasing, 0 neither."""
    a = bins.astype(np.float64).tolist()
    i = 1
    while i < len(a) and a[i] == a[0]:
        i += 1
    if i >= len(a):
        return 1
    last, nxt = a[0], a[i]
    up = last < nxt
    for v in a[i + 1:]:
        last, nxt = nxt, v
        if (last > nxt) if up else (last < nxt):
            return 0
    return 1 if up else -1


@implements(np.digitize)
def digitize(x, bins, right=False):
    """The bin of each element: a lazy :func:`searchsorted` of ``x`` in the edges (of the
    reversed edges for decreasing ones), as NumPy's lines. The edges' order is decided on
    the host: lazy edges are read (one small barrier), NumPy checks them (its errors)."""
    xv = asarray_like(x)
    if xv.dtype.kind == "c":
        raise TypeError("x may not be complex")
    host = np.asarray(bins)
    np.digitize(np.zeros(0), host, right)  # NumPy's errors: edges that are not 1-d or not monotonic
    edges = bins if isinstance(bins, ndarray) else asarray_like(host)
    side = "left" if right else "right"
    if _monotonicity(host) == -1:
        return len(host) - searchsorted(edges[::-1], xv, side=side)
    return searchsorted(edges, xv, side=side)


@implements(np.lexsort)
def lexsort(keys, axis=-1):
    """Positions ordering by the last key, ties by the one before it, and so on: a stable
    argsort by the first key, then by each later key in that order (NumPy's mergesort,
    NaN last). Keys of one shape; complex keys run NumPy, counted."""
    if not isinstance(keys, (ndarray, list, tuple)) or isinstance(keys, ndarray) and keys.ndim < 2:
        return call_numpy(np.lexsort, (keys,), {"axis": axis})  # one key or none: NumPy's answers
    rows = [asarray_like(k) for k in keys]
    if not rows:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if any(k.shape != rows[0].shape for k in rows):
        raise ValueError("all keys need to be the same shape")
    if any(k.dtype.kind == "c" for k in rows) or rows[0].ndim == 0:
        return call_numpy(np.lexsort, (keys,), {"axis": axis})
    order = argsort(rows[0], axis=axis, kind="stable")
    axis = normalize_axis_index(axis, rows[0].ndim)
    for k in rows[1:]:
        order = take_along_axis(order, argsort(take_along_axis(k, order, axis), axis=axis, kind="stable"), axis)
    return order


ndarray.sort = _sort_method
ndarray.argsort = _argsort_method


# searchsorted compares every needle with every element: lazy up to this many comparisons
# (label encoding: few classes, many samples), NumPy's binary search above it (counted)
_SEARCH_LIMIT = 1 << 24


@implements(np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """Where ``v`` would go in the sorted 1-d ``a``: the count of elements ordered before it
    (``side="left"``: strictly; ``"right"``: or equal), in sort's order (NaN after every
    number), so the same position NumPy's binary search finds. Lazy for real arrays of at
    most ``_SEARCH_LIMIT`` pairs; NumPy's otherwise, counted."""
    a, vv = asarray_like(a), asarray_like(v)
    lazy = (a.ndim == 1 and side in ("left", "right") and a.dtype.kind in "biuf" and vv.dtype.kind in "biuf"
            and a.size * vv.size <= _SEARCH_LIMIT)
    if not lazy:
        return call_numpy(np.searchsorted, (a, v), {"side": side, "sorter": sorter})
    if sorter is not None:
        a = take(a, sorter, mode="clip")
    row = a.reshape((1,) * vv.ndim + a.shape)
    col = vv.reshape(vv.shape + (1,))
    isnan, logical_and, logical_or, logical_not = (UFUNCS[n] for n in ("isnan", "logical_and", "logical_or",
                                                                        "logical_not"))
    floats = a.dtype.kind == "f" or vv.dtype.kind == "f"
    if side == "left":
        before = UFUNCS["less"](row, col)
        if floats:  # every number is before NaN
            before = logical_or(before, logical_and(logical_not(isnan(row)), isnan(col)))
    else:
        before = UFUNCS["less_equal"](row, col)
        if floats:  # everything is before or equal to NaN
            before = logical_or(before, isnan(col))
    return _sum(before, axis=-1, dtype=np.int64)
