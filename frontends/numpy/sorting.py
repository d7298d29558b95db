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
from .indexing import take
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
