"""Array creation: from data, constants, ranges, and ``*_like``."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from lazycore.trace import core

from . import dtypes
from .array import asarray, device, ndarray, wrap
from .fallback import call_numpy, implements
from .ufuncs import apply, broadcast_to_shape, cast

__all__ = ["array", "asarray", "ascontiguousarray", "asfortranarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
           "empty_like", "arange", "linspace", "eye", "identity"]


def array(obj, dtype=None, *, copy=True, ndmin=0, **kwargs) -> ndarray:
    if ndmin or kwargs.get("order", "K") not in "KCA":
        return call_numpy(np.array, (obj,), dict(kwargs, dtype=dtype, ndmin=ndmin))
    return asarray(obj, dtype=dtype, copy=copy)


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
    if flag == "c_contiguous":
        return x.copy()
    return x.T.copy().T  # the transpose's row-major copy, transposed back: column-major


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(operator.index(s) for s in shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError("negative dimensions are not allowed")
    return shape


def full(shape, fill_value, dtype=None, order="C", *, device=None, like=None) -> ndarray:
    shape = _shape(shape)
    dt = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    lt = dtypes.lazy_dtype(dt)
    fill = np.asarray(fill_value, dtype=dt)
    if fill.ndim:
        return asarray(np.broadcast_to(fill, shape).copy())
    # scalar policy: 0 and 1 baked, other values a parameter (no recompile when they change)
    s = core.scalar(fill.item(), lt, device=_device())
    return wrap(broadcast_to_shape(s, shape), dt)


def _device():
    return device()


# np.dtype(None) is float64: NumPy's default for dtype=None (the standard's too)


def zeros(shape, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    return full(shape, 0, dtype=np.dtype(dtype))


def ones(shape, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    return full(shape, 1, dtype=np.dtype(dtype))


def empty(shape, dtype=float, order="C", *, device=None, like=None) -> ndarray:
    # NumPy leaves memory uninitialized; zeros keep programs deterministic
    return full(shape, 0, dtype=np.dtype(dtype))


def _like(a, dtype, shape):
    a_shape = a.shape if isinstance(a, ndarray) else np.shape(a)
    a_dtype = a.dtype if isinstance(a, ndarray) else np.asarray(a).dtype
    return (a_shape if shape is None else shape), (a_dtype if dtype is None else dtype)


@implements(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    shape, dtype = _like(a, dtype, shape)
    return full(shape, fill_value, dtype=dtype)


@implements(np.zeros_like)
def zeros_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    return full_like(a, 0, dtype=dtype, shape=shape)


@implements(np.ones_like)
def ones_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    return full_like(a, 1, dtype=dtype, shape=shape)


@implements(np.empty_like)
def empty_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None) -> ndarray:
    return full_like(a, 0, dtype=dtype, shape=shape)


def arange(start, stop=None, step=None, dtype=None, *, device=None, like=None) -> ndarray:
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise ZeroDivisionError("division by zero")
    n = builtins.max(0, int(np.ceil((stop - start) / step)))
    dt = np.dtype(dtype) if dtype is not None else np.result_type(start, stop, step)
    wide = "f64" if dt.kind == "f" else "i64"
    i = core.apply("iota", dim=0, shape=(n,), dtype=wide, device=_device())
    v = apply("add", apply("mul", i, _const(step, wide, n)), _const(start, wide, n))
    return wrap(cast(v, dt), dt)


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
    step = (stop - start) / div if div > 0 else float("nan")
    dt = np.dtype(dtype) if dtype is not None else np.result_type(start, stop, float(num))
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
