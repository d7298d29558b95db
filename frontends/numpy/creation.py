"""Array creation: from data, constants, ranges, and ``*_like``."""

from __future__ import annotations

import builtins
import functools
import operator

import numpy as np

from lazycore.trace import core

from . import dtypes, layouts
from .array import asarray, device, from_host, laid_out, ndarray, wrap
from .fallback import call_numpy, implements
from .ufuncs import apply, broadcast_to_shape, cast

__all__ = ["array", "asarray", "copy", "ascontiguousarray", "asfortranarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
           "empty_like", "arange", "linspace", "eye", "identity", "triu_indices", "tril_indices", "diag_indices",
           "mask_indices", "indices", "tri", "hamming", "hanning", "bartlett", "blackman", "kaiser",
           "diag_indices_from", "triu_indices_from", "tril_indices_from", "fromfunction"]


def array(obj, dtype=None, *, copy=True, order="K", subok=True, ndmin=0, like=None, **kwargs) -> ndarray:
    if ndmin or kwargs:
        return call_numpy(np.array, (obj,), dict(kwargs, dtype=dtype, copy=copy, order=order, ndmin=ndmin))
    return asarray(obj, dtype=dtype, order=order, copy=copy)


@implements(np.copy)
def copy(a, order="K", subok=False) -> ndarray:
    return asarray(a).copy(order=order)


@implements(np.ascontiguousarray)
def ascontiguousarray(a, dtype=None, *, like=None) -> ndarray:
    """NumPy's: ``a`` itself when it is C-contiguous (and of ``dtype``), else a
    C-contiguous copy; at least 1-d. (Through the fallback, NumPy saw the
    materialized copy, contiguous, and handed back a strided view unchanged.)"""
    return _laid_out(a, dtype, "c_contiguous")


@implements(np.asfortranarray)
def asfortranarray(a, dtype=None, *, like=None) -> ndarray:
    """NumPy's: ``a`` itself when it is Fortran-contiguous, else a column-major copy."""
    return _laid_out(a, dtype, "f_contiguous")


def _laid_out(a, dtype, flag: str) -> ndarray:
    x = asarray(a, dtype=dtype)
    if x.ndim == 0:
        x = x.reshape(1)
    if getattr(x._standin().flags, flag):
        return x
    return x.copy(order="C" if flag == "c_contiguous" else "F")


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(operator.index(s) for s in shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError("negative dimensions are not allowed")
    return shape


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None) -> ndarray:
    return _full(shape, fill_value, dtype, layouts.check(order, ("C", "F")))


def _full(shape, fill_value, dtype, order, proto=None) -> ndarray:
    shape = _shape(shape)
    dt = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    lt = dtypes.lazy_dtype(dt)
    fill = np.asarray(fill_value, dtype=dt)
    if fill.ndim:
        return laid_out(asarray(np.broadcast_to(fill, shape).copy()), order, proto)
    # scalar policy: 0 and 1 baked, other values a parameter (no recompile when they change)
    s = core.scalar(fill.item(), lt, device=_device())
    return laid_out(wrap(broadcast_to_shape(s, shape), dt), order, proto)


def _device():
    return device()


# np.dtype(None) is float64: NumPy's default for dtype=None (the standard's too)


def zeros(shape, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    return full(shape, 0, dtype=np.dtype(dtype), order=order)


def ones(shape, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    return full(shape, 1, dtype=np.dtype(dtype), order=order)


def empty(shape, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    # NumPy leaves memory uninitialized; zeros keep programs deterministic
    return full(shape, 0, dtype=np.dtype(dtype), order=order)


def _like(a, dtype, shape):
    a_shape = a.shape if isinstance(a, ndarray) else np.shape(a)
    a_dtype = a.dtype if isinstance(a, ndarray) else np.asarray(a).dtype
    return (a_shape if shape is None else shape), (a_dtype if dtype is None else dtype)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    order = layouts.check(order)
    new_shape, dtype = _like(a, dtype, shape)
    proto = None
    if order in "AK" and (shape is None or _shape(shape) == np.shape(a)):  # (NumPy: a new shape is row-major)
        proto = a._standin() if isinstance(a, ndarray) else a if isinstance(a, np.ndarray) else None
    return _full(new_shape, fill_value, dtype, order, proto)


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    return full_like(a, 0, dtype=dtype, order=order, shape=shape)


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    return full_like(a, 1, dtype=dtype, order=order, shape=shape)


@implements(np.empty_like)
def empty_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    return full_like(a, 0, dtype=dtype, order=order, shape=shape)


def arange(start, stop=None, step=None, dtype=None, *, device=None, like=None) -> ndarray:
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise ZeroDivisionError("division by zero")
    n = builtins.max(0, int(np.ceil((stop - start) / step)))
    dt = np.dtype(dtype) if dtype is not None else np.result_type(start, stop, step)
    if dt.kind in "iuf":
        return _filled_range(start, step, n, dt)
    wide = "f64" if dt.kind == "f" else "i64"
    i = core.apply("iota", dim=0, shape=(n,), dtype=wide, device=_device())
    v = apply("add", apply("mul", i, _const(step, wide, n)), _const(start, wide, n))
    return wrap(cast(v, dt), dt)


def _filled_range(start, step, n: int, dt: np.dtype) -> ndarray:
    """NumPy's ``arange`` of a real type: its first two elements are ``start``
    and ``start + step`` (Python numbers) stored into the type (a fractional
    step of an integer type truncated there: ``arange(-3, 3, 0.013, int32)``
    counts by 1), and the dtype's fill loop makes the rest as
    ``first + i * (second - first)`` in the type itself (float32 arithmetic
    for float32, wrapping integers)."""
    head = np.zeros(2, dt)
    for k in range(builtins.min(n, 2)):
        head[k] = start + k * step  # (NumPy's own conversions and errors)
    # the loop's type: float16's fill works in float32
    work = np.dtype(np.float32) if dt == np.float16 else dt if dt.kind == "f" else np.dtype(np.int64)
    first = head[:1].astype(work)
    # (an integer type's difference wraps in the type, as the fill loop's ``delta -= start``)
    delta = (head[1:].astype(work) - first)[0] if dt.kind == "f" else (head[1:] - head[:1]).astype(work)[0]
    lt, wide = dtypes.lazy_dtype(dt), dtypes.lazy_dtype(work)
    i = core.apply("iota", dim=0, shape=(n,), dtype="i64", device=_device())
    v = apply("add", apply("mul", cast(i, work) if dt.kind == "f" else i, _const(delta, wide, n)),
              _const(first[0], wide, n))
    v = cast(v, dt)
    for k in (0, 1):  # stored as given, not made by the loop
        v = apply("select", apply("compare", i, _const(k, "i64", n), direction="EQ"), _const(head[k], lt, n), v)
    return wrap(v, dt)


def _const(value, lt, n):
    c = core.apply("constant", value=np.asarray(value, dtype=dtypes.TO_NUMPY[lt]), device=_device())
    return broadcast_to_shape(c, (n,))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    if np.ndim(start) or np.ndim(stop) or axis != 0:
        return call_numpy(np.linspace, (start, stop, num), dict(endpoint=endpoint, retstep=retstep,
                                                                 dtype=dtype, axis=axis))
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    wide = np.result_type(start, stop, float(num))
    # NumPy's step is a scalar of the computation type (np.float64 for Python numbers), but
    # Python's nan where there is no step (num <= 1 with the endpoint)
    step = wide.type((stop - start) / div) if div > 0 else float("nan")
    dt = np.dtype(dtype) if dtype is not None else wide
    i = core.apply("iota", dim=0, shape=(num,), dtype="f64", device=_device())
    v = apply("add", apply("mul", i, _const(step if div > 0 else 0.0, "f64", num)), _const(start, "f64", num))
    if endpoint and num > 1:
        last = apply("compare", i, _const(num - 1, "f64", num), direction="EQ")
        v = apply("select", last, _const(stop, "f64", num), v)
    if dt.kind in "iu":
        v = apply("floor", v)
    out = wrap(cast(v, dt), dt)
    return (out, step) if retstep else out


def eye(N, M=None, k=0, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    M = N if M is None else M
    dt = np.dtype(dtype)
    rows = core.apply("iota", dim=0, shape=(N, M), dtype="i64", device=_device())
    cols = core.apply("iota", dim=1, shape=(N, M), dtype="i64", device=_device())
    if k:
        rows = apply("add", rows, broadcast_to_shape(core.apply("constant", value=np.asarray(k, np.int64),
                                                                 device=_device()), (N, M)))
    return wrap(cast(apply("compare", rows, cols, direction="EQ"), dt), dt)


def identity(n, dtype=float, *, like=None) -> ndarray:
    return eye(n, dtype=dtype)


# --- constants of shapes and integers ---------------------------------------------------------------
# Functions whose arguments are shapes and integers (a triangle's or diagonal's index
# tuples, a grid of indices, a triangle of ones, NumPy's windows) make constants of the
# call's numbers: NumPy computes them on the host and they are uploaded, as ``fftfreq``'s
# are, not a counted fallback (nothing lazy is read). The ``*_from`` forms read only their
# array's shape. A lazy number where NumPy wants one (``kaiser``'s beta) is read by the
# counted fallback, as any other function's.


def _uploaded(r):
    if isinstance(r, np.ndarray):
        return from_host(r)
    if isinstance(r, tuple):
        return tuple(_uploaded(x) for x in r)
    return r  # (mask_indices of a lazy mask_func: what NumPy made of its lazy result)


def _shape_of(a):
    """A host stand-in with ``a``'s shape and dtype and no data (broadcast: no memory)."""
    return np.broadcast_to(np.empty((), a.dtype), a.shape) if isinstance(a, ndarray) else a


def _host_constant(fn, shaped=False):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if isinstance(kwargs.get("like"), ndarray):  # (the result is this namespace's anyway)
            del kwargs["like"]
        if shaped:  # ``arr``, the first argument
            if args:
                args = (_shape_of(args[0]), *args[1:])
            elif "arr" in kwargs:
                kwargs["arr"] = _shape_of(kwargs["arr"])
        if builtins.any(isinstance(x, ndarray) for x in (*args, *kwargs.values())):
            return call_numpy(fn, args, kwargs)
        return _uploaded(fn(*args, **kwargs))

    return implements(fn)(call)


triu_indices, tril_indices, diag_indices, mask_indices, indices, tri = (
    _host_constant(f) for f in (np.triu_indices, np.tril_indices, np.diag_indices, np.mask_indices, np.indices,
                                np.tri))
hamming, hanning, bartlett, blackman, kaiser = (
    _host_constant(f) for f in (np.hamming, np.hanning, np.bartlett, np.blackman, np.kaiser))
diag_indices_from, triu_indices_from, tril_indices_from = (
    _host_constant(f, shaped=True) for f in (np.diag_indices_from, np.triu_indices_from, np.tril_indices_from))


@implements(np.fromfunction)
def fromfunction(function, shape, *, dtype=float, like=None, **kwargs):
    """NumPy's: ``function`` of the index grids, here lazy ones (NumPy's own would give
    the function host arrays, and run what it does on them in NumPy)."""
    return function(*indices(shape, dtype=dtype), **kwargs)
