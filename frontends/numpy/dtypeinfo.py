"""Questions about types and shapes, answered from metadata: no value is read,
nothing runs on the host, nothing is counted as a fallback.

``isdtype``, ``issubdtype``, ``promote_types``, ``finfo`` and ``iinfo`` are
NumPy's own (they take dtypes; ``finfo(lazy)`` reads its ``.dtype``).
``result_type``, ``can_cast`` and ``common_type`` take arrays too: NumPy's
``__array_function__`` brings a lazy argument here, where its dtype stands in
for it. NumPy 2 promotes an array (0-d included) and a NumPy scalar by their
dtypes alone (NEP 50), so the dtype gives NumPy's answer; Python numbers stay
weak, passed as they are.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

from .array import ndarray
from .fallback import implements

__all__ = ["isdtype", "issubdtype", "result_type", "can_cast", "common_type", "promote_types", "finfo", "iinfo",
           "shape", "ndim", "size"]

isdtype = np.isdtype
issubdtype = np.issubdtype
promote_types = np.promote_types
finfo = np.finfo
iinfo = np.iinfo


def _dtype_of(x):
    return x.dtype if isinstance(x, ndarray) else x


@implements(np.result_type)
def result_type(*arrays_and_dtypes):
    return np.result_type(*(_dtype_of(x) for x in arrays_and_dtypes))


@implements(np.can_cast)
def can_cast(from_, to, casting="safe"):
    return np.can_cast(_dtype_of(from_), to, casting)


@implements(np.common_type)
def common_type(*arrays):
    return np.common_type(*(np.empty(0, a.dtype) if isinstance(a, ndarray) else a for a in arrays))


# ``np.shape(a)``, ``np.ndim(a)``, ``np.size(a)`` of a lazy array: its metadata (they ran
# NumPy on the materialized array, a barrier and a download for a tuple of ints)


@implements(np.shape)
def shape(a):
    return a.shape if isinstance(a, ndarray) else np.shape(a)


@implements(np.ndim)
def ndim(a):
    return a.ndim if isinstance(a, ndarray) else np.ndim(a)


@implements(np.size)
def size(a, axis=None):
    if not isinstance(a, ndarray):
        return np.size(a, axis)
    if axis is None:
        return a.size
    return math.prod(a.shape[d] for d in normalize_axis_tuple(axis, a.ndim))  # NumPy's AxisError
