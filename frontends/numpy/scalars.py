"""NumPy's scalars, lazily: what ``a[0]``, ``a.sum()`` and ``x + y`` of 0-d
operands give.

NumPy returns a scalar (``np.float64`` & co.) where a result is 0-d: integer
indexing down to one element, reductions over every axis, ufuncs whose inputs
are all 0-d. A scalar differs from a 0-d array in what a program can see
without its value: it is immutable (``s += x`` rebinds ``s`` to ``s + x``,
whose shape and dtype may differ), ``out=`` refuses it, and its 0-d method
results are scalars again. Item assignment is the exception: NumPy's scalars
refuse it (TypeError), a lazy scalar takes it as the Array API's 0-d arrays do
(:meth:`scalar.__setitem__` says why). A :class:`scalar` is a lazy 0-d array that behaves so, still lazy: reading its value stays a
barrier (``float(s)``, ``s.item()``), as for any lazy array. It is not a
``numpy.generic`` (``isinstance(s, np.generic)`` is False).
"""

from __future__ import annotations

import numpy as np

from .array import ndarray, to_host, value, wrap


class scalar(ndarray):
    """A lazy NumPy scalar: a 0-d lazy array that is immutable, as ``np.float64`` is."""

    __slots__ = ()

    def __setitem__(self, key, val):
        # The one place a scalar is not NumPy's: lazycore.numpy is also the Array API
        # namespace (x.__array_namespace__()), whose 0-d results are arrays, and arrays take
        # item assignment. Consumers tell NumPy's read-only scalars apart by their type
        # (array-api-compat's is_writeable_array: numpy.generic) and copy first; a lazy
        # scalar is an unknown Array API object to them, written in place
        # (array-api-extra's at(r, mask).set(nan) on a reduction's result, scipy.stats).
        # So it is written as a 0-d array is (NumPy's errors for its keys), into a value of
        # its own: the array it was read from, and anyone else's value, stay as they were.
        a = array_of(self)
        a[key] = val
        self._storage, self._steps, self._estrides, self._offset, self._cache = (
            a._storage, (), a._estrides, a._offset, None)

    def __getitem__(self, key):
        # NumPy indexes a scalar as a fresh 0-d array, except that s[()] is the scalar
        if type(key) is tuple and not key:
            return self
        return array_of(self)[key]

    def _view(self, steps, standin, origin, writeable=None):
        # a view of a fresh array (NumPy's scalar methods work on one), a scalar again when 0-d
        return result(ndarray._view(array_of(self), steps, standin, origin, writeable))

    def __hash__(self):
        return hash(to_host(self)[()])  # NumPy's scalars hash by value: a barrier

    def __repr__(self):
        return repr(to_host(self)[()])

    def copy(self, order="C"):
        return as_scalar(wrap(value(self), self._dtype))

    def astype(self, dtype, *args, **kwargs):
        return result(ndarray.astype(self, dtype, *args, **kwargs))

    def fill(self, v):
        array_of(self).fill(v)  # NumPy fills a temporary: the value is checked, the scalar unchanged


def _rebinding(dunder):
    op = getattr(ndarray, f"__{dunder}__")

    def iop(self, other):
        return op(self, other)  # immutable: ``s += x`` is ``s = s + x``

    return iop


def bind_inplace_operators(dunders) -> None:
    """Make ``scalar``'s in-place operators the plain ones (called once ndarray has them)."""
    for d in dunders:
        setattr(scalar, f"__i{d}__", _rebinding(d))


def as_scalar(a: ndarray) -> scalar:
    """``a``, a fresh 0-d array nobody else holds, as a scalar (retyped in place:
    the same slots)."""
    a.__class__ = scalar
    a._writeable = False
    return a


def result(a: ndarray) -> ndarray:
    """``a`` as NumPy would return it: a scalar when 0-d (``a`` is fresh)."""
    return as_scalar(a) if not a._shape and type(a) is ndarray else a


def array_of(s: ndarray) -> ndarray:
    """A 0-d array of ``s``'s value (its own storage: writing to it leaves ``s`` alone)."""
    return wrap(value(s), s._dtype)
