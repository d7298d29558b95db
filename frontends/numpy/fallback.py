"""NumPy functions without a lazy implementation: run NumPy itself, counted.

:data:`HANDLED` maps NumPy functions to their lazy versions (filled by
:func:`implements`); ``ndarray.__array_function__`` looks them up, so
``np.sum(lazy)`` stays lazy. Anything else materializes its lazy arguments,
calls NumPy, uploads array results, writes back lazy arguments NumPy changed
in place, and records ``numpy.<name>`` with the user's line in
``lazycore.metrics.fallbacks()``.
"""

from __future__ import annotations

import sys

import numpy as np

from lazycore.observe import metrics

from lazycore.ir import sourceloc

from .array import from_host, ndarray, to_host, write

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


def call_numpy(func, args, kwargs, name=None):
    name = name or f"numpy.{getattr(func, '__name__', func)}"
    metrics.fallback(name, sourceloc.user_location())
    hosts: list[tuple[ndarray, np.ndarray, np.ndarray]] = []

    def down(x):
        if isinstance(x, ndarray):
            h = to_host(x)
            hosts.append((x, h, h.copy()))
            return h
        if isinstance(x, (list, tuple)):
            return type(x)(down(v) for v in x)
        if isinstance(x, dict):
            return {k: down(v) for k, v in x.items()}
        return x

    hargs = down(args)
    hkwargs = down(kwargs)
    out = func(*hargs, **hkwargs)
    # NumPy may have written into arguments (out=, np.copyto, a[mask] = v): write those back
    by_id = {}
    for lazy, h, before in hosts:
        by_id[id(h)] = lazy
        if lazy._writeable and not np.array_equal(h, before, equal_nan=h.dtype.kind in "fc"):
            write(lazy, from_host_handle(h))

    def up(o):
        if isinstance(o, np.ndarray):
            if id(o) in by_id:
                return by_id[id(o)]
            from . import dtypes

            return from_host(o) if dtypes.supported(o.dtype) else o
        if isinstance(o, (list, tuple)):
            return type(o)(up(v) for v in o)
        return o

    return up(out)


def from_host_handle(h: np.ndarray):
    from .array import value

    return value(from_host(h))
