"""NumPy functions without a lazy implementation: run NumPy itself, counted.

:data:`HANDLED` maps NumPy functions to their lazy versions (filled by
:func:`implements`); ``ndarray.__array_function__`` looks them up, so
``np.sum(lazy)`` stays lazy. Anything else goes through the shared fallback
(:mod:`lazycore.trace.fallback`): lazy arguments are materialized, NumPy runs,
array results are uploaded, and ``numpy.<name>`` is recorded with the user's
line in ``lazycore.metrics.fallbacks()``. This bridge says what is NumPy's:
an argument NumPy changed in place (``out=``, ``np.copyto``, ``a[mask] = v``)
is found by comparing it with a copy taken before, and written back.
(``__array_function__`` first runs a NumPy function written in Python over
other NumPy functions as NumPy's own code on the lazy arrays, :mod:`.pycode`,
and comes here only where that code needs a value.)
"""

from __future__ import annotations

import sys

import numpy as np

from lazycore.ir import sourceloc
from lazycore.trace import fallback

from . import dtypes
from .array import from_host, host_laid_out, ndarray, value, write
from .hostguard import RUN, NeedsHost
from .scalars import as_scalar

sourceloc.skip(np)
sourceloc.skip(sys.modules["lazycore.frontends"])

HANDLED: dict = {}


def implements(*np_funcs):
    """Register the decorated function as the lazy version of ``np_funcs``."""

    def deco(fn):
        for f in np_funcs:
            if f in HANDLED:
                raise ValueError(f"{f.__name__} already has a lazy implementation")
            HANDLED[f] = fn
        return fn

    return deco


def array_function(func, args, kwargs):
    impl = HANDLED.get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    return call_numpy(func, args, kwargs)


class _Bridge(fallback.Bridge):
    lazy = ndarray
    host = (np.ndarray, np.generic)  # NumPy's scalar results too: see from_host

    def to_host(self, x, call):
        h = host_laid_out(x)  # NumPy reads memory order in places (ravel('K'), reshape(order='A'))
        if type(x) is not ndarray:  # a lazy scalar: NumPy sees its scalar
            h = h[()]
        call.notes[id(h)] = h.copy()
        return h

    def changed(self, call, func):
        for lazy, h in call.inputs:
            before = call.notes[id(h)]
            if lazy._writeable and not np.array_equal(h, before, equal_nan=h.dtype.kind in "fc"):
                yield lazy, h

    def write(self, lazy, host, call):
        write(lazy, value(from_host(host)))

    def from_host(self, host, call):
        if not dtypes.supported(host.dtype):
            return host
        if isinstance(host, np.generic):
            # NumPy's scalar (a ufunc of 0-d operands) is a lazy scalar, as the lazy ufunc
            # gives: not a second namespace beside the lazy one (scipy.stats.pearsonr's
            # betaincc of its 0-d statistic, then xpx.apply_where of both)
            return as_scalar(from_host(np.asarray(host)))
        return from_host(host)


_BRIDGE = _Bridge()


def uploaded(out):
    """A result NumPy's code gave as the fallback gives it: NumPy arrays and scalars
    uploaded (as lazy arrays and lazy scalars), lazy ones as they are."""
    if isinstance(out, (np.ndarray, np.generic)):
        return _BRIDGE.from_host(out, None)
    if isinstance(out, (list, tuple)):
        items = [uploaded(o) for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)  # (a named tuple)
    return out


def call_numpy(func, args, kwargs, name=None):
    if RUN.depth:  # inside a lazy run of NumPy's code: it stops, the outermost call falls back
        raise NeedsHost(name or getattr(func, "__name__", "a host function"))
    return fallback.run(name or f"numpy.{getattr(func, '__name__', func)}", func, args, kwargs, _BRIDGE)
