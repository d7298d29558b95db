"""Unique elements: ``unique_values``, ``unique_counts``, ``unique_inverse``,
``unique_all`` (the Array API's) and ``np.unique`` on the flattened array,
sorted, as every array library scikit-learn and SciPy are tested with
returns them (NumPy 2.4's own ``unique_values`` may come unsorted: hashing).

Lazily, but for one number: the result's length. The flattened values are
sorted (``lazy.sort``, stable, NaN last), a mask marks each value that differs
from the one before it (NaN never equals NaN: each is its own value, as the
Array API says; ``np.unique``'s ``equal_nan=True`` joins them), and reading
the mask's sum is the one barrier. The first positions of the groups are the
first ``count`` positions of a stable sort of the inverted mask; values,
counts, first indices and inverse indices are gathers and cumulative sums of
those, all lazy. Complex arrays (NumPy's lexicographic order) run NumPy,
counted.
"""

from __future__ import annotations

import numpy as np
from numpy.lib._arraysetops_impl import UniqueAllResult, UniqueCountsResult, UniqueInverseResult

from .array import ndarray, value, wrap
from .fallback import call_numpy, implements
from .creation import full, ones
from .indexing import take
from .manipulation import concatenate
from .reductions import cumsum
from .sorting import _sorted, argsort
from .ufuncs import UFUNCS, asarray_like

__all__ = ["unique_values", "unique_counts", "unique_inverse", "unique_all", "unique"]

_I64 = np.dtype(np.int64)


class _Groups:
    """The sorted, grouped flattening of an array (lazy, but for ``count``)."""

    def __init__(self, x: ndarray, equal_nan: bool):
        flat = x.reshape(-1)
        self.n = n = flat.size
        self.x = x
        h_sorted, h_perm = _sorted(flat, None, False)
        self.sorted = sv = wrap(h_sorted, x.dtype)
        self.perm = wrap(h_perm, _I64)
        if n == 0:
            self.count = 0
            return
        differs = UFUNCS["not_equal"](sv[1:], sv[:-1])
        if equal_nan and x.dtype.kind == "f":
            isnan = UFUNCS["isnan"]
            both_nan = UFUNCS["logical_and"](isnan(sv[1:]), isnan(sv[:-1]))
            differs = UFUNCS["logical_and"](differs, UFUNCS["logical_not"](both_nan))
        self.new = new = concatenate([_ones_bool(1), differs])
        self.count = int(new.sum())  # the barrier: the result's length
        # positions (in sorted order) where a group starts: the Trues of ``new``, ascending
        self.first = argsort(UFUNCS["logical_not"](new))[: self.count]

    def values(self) -> ndarray:
        if self.n == 0:
            return self.sorted
        return _take(self.sorted, self.first, mode="clip")

    def counts(self) -> ndarray:
        if self.n == 0:
            return wrap(value(self.perm), _I64)
        ends = concatenate([self.first[1:], _full_i64(1, self.n)])
        return UFUNCS["subtract"](ends, self.first)

    def indices(self) -> ndarray:
        """Where each value first occurs in the flattened array (the sort is stable)."""
        if self.n == 0:
            return self.perm
        return _take(self.perm, self.first, mode="clip")

    def inverse(self) -> ndarray:
        """For each element of the array, its value's position in :meth:`values`; the array's shape."""
        if self.n == 0:
            return wrap(value(self.perm), _I64).reshape(self.x.shape)
        group = UFUNCS["subtract"](cumsum(self.new, dtype=_I64), 1)  # in sorted order
        back = argsort(self.perm)  # the inverse permutation
        return _take(group, back, mode="clip").reshape(self.x.shape)


def _take(a, positions, mode):
    return take(a, positions, mode=mode)


def _ones_bool(n):
    return ones(n, dtype=bool)


def _full_i64(n, v):
    return full(n, v, dtype=_I64)


def _lazy_ok(x: ndarray) -> bool:
    return x.dtype.kind in "biuf"


def _groups(x, equal_nan=False):
    return _Groups(asarray_like(x), equal_nan)


@implements(np.unique_values)
def unique_values(x, /):
    x = asarray_like(x)
    if not _lazy_ok(x):
        return call_numpy(np.unique, (x,), {"equal_nan": False}, name="numpy.unique_values")
    return _groups(x).values()


@implements(np.unique_counts)
def unique_counts(x, /):
    x = asarray_like(x)
    if not _lazy_ok(x):
        v, c = call_numpy(np.unique, (x,), {"return_counts": True, "equal_nan": False},
                          name="numpy.unique_counts")
        return UniqueCountsResult(v, c)
    g = _groups(x)
    return UniqueCountsResult(g.values(), g.counts())


@implements(np.unique_inverse)
def unique_inverse(x, /):
    x = asarray_like(x)
    if not _lazy_ok(x):
        v, i = call_numpy(np.unique, (x,), {"return_inverse": True, "equal_nan": False},
                          name="numpy.unique_inverse")
        return UniqueInverseResult(v, i.reshape(x.shape))
    g = _groups(x)
    return UniqueInverseResult(g.values(), g.inverse())


@implements(np.unique_all)
def unique_all(x, /):
    x = asarray_like(x)
    if not _lazy_ok(x):
        v, f, i, c = call_numpy(np.unique, (x,), {"return_index": True, "return_inverse": True,
                                                  "return_counts": True, "equal_nan": False},
                                name="numpy.unique_all")
        return UniqueAllResult(v, f, i.reshape(x.shape), c)
    g = _groups(x)
    return UniqueAllResult(g.values(), g.indices(), g.inverse(), g.counts())


@implements(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):
    """``np.unique``: lazily over the flattened array (``axis=None``); rows or columns
    (``axis=``) and complex arrays run NumPy, counted. Always sorted (``sorted=False``
    lets NumPy choose an order; sorted is one of them)."""
    x = asarray_like(ar)
    if axis is not None or not _lazy_ok(x):
        return call_numpy(np.unique, (x,), dict(return_index=return_index, return_inverse=return_inverse,
                                                return_counts=return_counts, axis=axis, equal_nan=equal_nan,
                                                sorted=sorted))
    g = _groups(x, equal_nan=equal_nan)
    out = [g.values()]
    if return_index:
        out.append(g.indices())
    if return_inverse:
        out.append(g.inverse())
    if return_counts:
        out.append(g.counts())
    return out[0] if len(out) == 1 else tuple(out)
