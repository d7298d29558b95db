"""Reductions and scans with ``axis``/``keepdims``/``dtype``/``where``/``out`` and NumPy's result types.

NumPy's rules kept here: bools and small integers sum in the platform
integer; half floats accumulate in float32 and round back once (NumPy's
loops accumulate them in float too); ``max``/``min``/``argmax`` propagate NaN
(the first NaN wins); ``var``/``std`` divide by ``max(n - ddof, 0)``; a
``where=`` mask replaces left-out elements by the reduction's identity.
Integer and boolean scans are Hillis-Steele (log2(n) steps of
shift-by-``pad`` and combine; exact); float scans in a program for the CPU
add one element after another in a loop, as NumPy's does (its values bit
for bit), and on other platforms take the Hillis-Steele tree too
(:func:`lazycore.trace.scans.in_order` says why).
"""

from __future__ import annotations

import builtins
import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_index, normalize_axis_tuple

from lazycore.dialect.folds import identity_value
from lazycore.dialect.spec import spec_of
from lazycore.dialect.types import is_float
from lazycore.trace import core, recipes, scans

from . import dtypes, minmax_loops
from .array import ndarray, value, wrap
from .fallback import call_numpy, implements
from .scalars import result
from .ufuncs import (
    UFUNCS, apply, asarray_like, broadcast_to_shape, cast, const, device_of, shape_of, store_out, to_handle,
)

__all__ = ["sum", "prod", "max", "min", "amax", "amin", "mean", "any", "all", "std", "var", "argmax", "argmin",
           "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "nansum", "nanprod", "nanmean", "nanmax",
           "nanmin", "nanvar", "nanstd", "nancumsum", "nancumprod", "ptp", "average", "count_nonzero",
           "isclose", "allclose", "array_equal", "array_equiv"]

_NoValue = np._NoValue
_BOOL = np.dtype(bool)
_F64 = np.dtype(np.float64)


# --- shared pieces ---------------------------------------------------------------------------


def _given(x) -> bool:
    return x is not None and x is not _NoValue


def _axes(a: ndarray, axis, ufunc_reduce=False) -> tuple[int, ...]:
    """The axes ``axis`` names; ``ufunc_reduce``: the reduction is NumPy's
    ``ufunc.reduce``, which takes axis 0 or -1 (an integer) of a 0-d array."""
    if axis is None:
        return tuple(range(a.ndim))
    if ufunc_reduce and not a.ndim and isinstance(axis, (int, np.integer)) and axis in (0, -1):
        return ()
    return normalize_axis_tuple(axis, a.ndim)  # NumPy's AxisError


def _is_float(dt) -> bool:
    return dtypes.lazy_dtype(dt) in ("f16", "bf16", "f32", "f64")


def _acc(dt: np.dtype) -> np.dtype:
    """The type to accumulate ``dt`` in: half floats in float32."""
    return np.dtype(np.float32) if dtypes.lazy_dtype(dt) in ("f16", "bf16") else dt


def _kept_shape(shape, axes, keepdims) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _count(shape, axes) -> int:
    n = 1
    for d in axes:
        n *= shape[d]
    return n


def _finish(h, shape, axes, keepdims, dtype) -> ndarray:
    h = cast(h, dtype)
    target = _kept_shape(shape, axes, keepdims)
    if h.shape != target:
        h = apply("reshape", h, shape=target)
    return result(wrap(h, dtype))


def _reduce(op, axes, h):
    if not axes or h.shape == ():
        if op == "reduce_sum" and is_float(h.dtype):  # (a sum from zero: NumPy's -0 gives +0)
            return apply(op, h, dims=())
        return h
    return apply(op, h, dims=axes)


def _mask(a: ndarray, where):
    """The ``where=`` mask as an i1 handle of ``a``'s shape; None when every element counts."""
    if where is True or where is _NoValue:
        return None
    shape = shape_of(where)
    try:
        ok = np.broadcast_shapes(shape, a.shape) == a.shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"operands could not be broadcast together with remapped shapes "
                         f"[original->remapped]: {shape} and requested shape {a.shape}")
    return broadcast_to_shape(to_handle(where, _BOOL, device_of(a)), a.shape)


def _isnan(h):
    return apply("compare", h, h, direction="NE")


def _and(m, other):
    return other if m is None else apply("and", m, other)


def _keep(h, mask, op):
    """``h`` with the elements ``mask`` leaves out replaced by the identity of
    reduction ``op`` (the op table's, for ``h``'s element type)."""
    if mask is None:
        return h
    return apply("select", mask, h, const(identity_value(spec_of(op).identity, h.dtype), h))


def _store(res: ndarray, out) -> ndarray:
    """Return ``res``, or write it into ``out`` (cast unsafely, as NumPy's reductions do)."""
    if isinstance(out, tuple) and len(out) == 1:
        out = out[0]
    return store_out(res, out, "output parameter has the wrong shape: expected {want}, got {got}")


def _sum_dtype(a, dtype) -> np.dtype:
    if dtype is not None:
        return np.dtype(dtype)
    # NumPy: bools and small integers accumulate in the platform integer
    if a.dtype.kind == "b" or (a.dtype.kind == "i" and a.dtype.itemsize < 8):
        return np.dtype(np.int64)
    if a.dtype.kind == "u" and a.dtype.itemsize < 8:
        return np.dtype(np.uint64)
    return a.dtype


def _mean_dtype(a, dtype) -> np.dtype:
    if dtype is not None:
        return np.dtype(dtype)
    return _F64 if a.dtype.kind in "biu" else a.dtype


def _convert(h, lt: str):
    return h if h.dtype == lt else apply("convert", h, dtype=lt)


def _divide(total, count):
    """``total / count`` in floating point (``count``: a Python number or a handle)."""
    if total.dtype not in ("f32", "f64", "complex<f32>", "complex<f64>"):
        total = _convert(total, "f64")
    if isinstance(count, (int, float)):
        return apply("div", total, const(count, total))
    return apply("div", total, _convert(count, total.dtype))


# --- sum, prod, any, all ------------------------------------------------------------------------

_BOOL_FOR = {"reduce_sum": "reduce_max", "reduce_prod": "reduce_min"}  # dtype=bool: or/and
_COMBINE = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "or", "reduce_min": "and"}


def _sum_like(op, a, axis, dtype, out, keepdims, initial, where, nan=False):
    a = asarray_like(a)
    axes = _axes(a, axis, ufunc_reduce=True)
    dt = _sum_dtype(a, dtype)
    h = cast(value(a), dt)
    valid = _mask(a, where)
    if nan and _is_float(a.dtype):
        # NaN of the input, not of the cast: nansum(x, dtype=int) still skips them
        valid = _and(valid, apply("not", _isnan(value(a))))
    if dt == _BOOL:
        op = _BOOL_FOR[op]
    h = cast(h, _acc(dt))
    r = _reduce(op, axes, _keep(h, valid, op))
    if _given(initial):
        r = apply(_COMBINE[op], r, const(initial, r))
    return _store(_finish(r, a.shape, axes, keepdims, dt), out)


@implements(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    return _sum_like("reduce_sum", a, axis, dtype, out, keepdims, initial, where)


@implements(np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    return _sum_like("reduce_prod", a, axis, dtype, out, keepdims, initial, where)


@implements(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    return _sum_like("reduce_sum", a, axis, dtype, out, keepdims, initial, where, nan=True)


@implements(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    return _sum_like("reduce_prod", a, axis, dtype, out, keepdims, initial, where, nan=True)


def _logical(op):
    def reduce(a, axis=None, out=None, keepdims=False, *, where=True):
        a = asarray_like(a)
        axes = _axes(a, axis, ufunc_reduce=True)
        h = _keep(cast(value(a), _BOOL), _mask(a, where), op)
        return _store(_finish(_reduce(op, axes, h), a.shape, axes, keepdims, _BOOL), out)

    return reduce


any = implements(np.any)(_logical("reduce_max"))
all = implements(np.all)(_logical("reduce_min"))


@implements(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    """A sum of ``a != 0`` in the platform integer. NumPy gives a Python int for the
    whole array; here that is a lazy 0-d int64 scalar (an int would be a barrier)."""
    a = asarray_like(a)
    return sum(UFUNCS["not_equal"](a, 0), axis=axis, dtype=np.intp, keepdims=keepdims)


# --- isclose, allclose, array_equal, array_equiv: NumPy's formulas in lazy ufuncs ---------------


def _uf(name):
    return UFUNCS[name]


@implements(np.isclose)
def isclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    """NumPy's ``|a - b| <= atol + rtol * |b|`` with ``b`` finite, or ``a == b`` (its
    infinities); ``b`` in at least float64's kind first, as NumPy converts it."""
    x, y, atol, rtol = (v if isinstance(v, (int, float, complex)) else asarray_like(v) for v in (a, b, atol, rtol))
    if isinstance(y, ndarray):
        dt = np.result_type(y.dtype, 1.0)
        if dt != y.dtype:
            y = y.astype(dt)
    elif isinstance(y, int):
        y = float(y)
    absolute, less_equal, isfinite, equal = _uf("absolute"), _uf("less_equal"), _uf("isfinite"), _uf("equal")
    with np.errstate(invalid="ignore"):
        close = less_equal(absolute(_uf("subtract")(x, y)), _uf("add")(atol, _uf("multiply")(rtol, absolute(y))))
        result = _uf("logical_or")(_uf("logical_and")(close, isfinite(y)), equal(x, y))
        if equal_nan:
            isnan = _uf("isnan")
            result = _uf("logical_or")(result, _uf("logical_and")(isnan(x), isnan(y)))
    return result[()] if isinstance(result, ndarray) and not result.ndim else result


@implements(np.allclose)
def allclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    """A Python bool, as NumPy's: one value read (NumPy read both arrays)."""
    return builtins.bool(all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


@implements(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    a1, a2 = asarray_like(a1), asarray_like(a2)
    if a1.shape != a2.shape:
        return False
    same = _uf("equal")(a1, a2)
    if equal_nan and a1.dtype.kind in "fc" and a2.dtype.kind in "fc":
        isnan = _uf("isnan")
        same = _uf("logical_or")(same, _uf("logical_and")(isnan(a1), isnan(a2)))
    return builtins.bool(all(same))


@implements(np.array_equiv)
def array_equiv(a1, a2):
    a1, a2 = asarray_like(a1), asarray_like(a2)
    try:
        np.broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return False
    return builtins.bool(all(_uf("equal")(a1, a2)))


# --- max, min -------------------------------------------------------------------------------------


def _extremum(op, name, nan_ignoring=False):
    combine = "maximum" if op == "reduce_max" else "minimum"

    def reduce(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
        a = asarray_like(a)
        axes = _axes(a, axis, ufunc_reduce=True)
        valid = _mask(a, where)
        has_initial = _given(initial)
        if not has_initial:
            if valid is not None:
                raise ValueError(f"reduction operation '{name}' does not have an identity, so to use a where "
                                 f"mask one has to specify 'initial'")
            if builtins.any(a.shape[d] == 0 for d in axes):
                raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
        h = value(a)
        is_float = _is_float(a.dtype)
        nan = _isnan(h) if is_float else None
        kept = _and(valid, apply("not", nan)) if nan_ignoring and is_float else valid
        r = _reduce(op, axes, _keep(h, kept, op))
        if is_float and valid is None and not has_initial:
            # a tie of signed zeros: the zero NumPy's loop keeps, not IEEE's order (nanmax: fmax.reduce's)
            r = minmax_loops.reduced(a, h, r, name, axes)
        if is_float and axes and not nan_ignoring:
            # NaN wins over every number, as in NumPy
            any_nan = _reduce("reduce_max", axes, _keep(nan, valid, "reduce_max"))
            r = apply("select", any_nan, const(math.nan, r), r)
        if has_initial:
            r = apply(combine, r, const(initial, r))
        elif is_float and nan_ignoring:
            # an all-NaN slice has nothing to compare: NaN (NumPy warns)
            none = _reduce("reduce_min", axes, nan)
            r = apply("select", none, const(math.nan, r), r)
        return _store(_finish(r, a.shape, axes, keepdims, a.dtype), out)

    return reduce


def _complex_by_numpy(np_fn, fn):
    """``fn``, but NumPy itself (a counted fallback) for complex arrays: it orders
    complex numbers lexicographically, which no lazy reduction does."""
    def reduce(a, *args, **kwargs):
        if isinstance(a, ndarray) and a.dtype.kind == "c":
            return call_numpy(np_fn, (a,) + args, kwargs)
        return fn(a, *args, **kwargs)

    reduce.__name__ = np_fn.__name__
    reduce.__wrapped__ = fn  # inspect.signature: the lazy function's own (the Array API's checks read it)
    return reduce


max = implements(np.max)(_complex_by_numpy(np.max, _extremum("reduce_max", "maximum")))
min = implements(np.min)(_complex_by_numpy(np.min, _extremum("reduce_min", "minimum")))
if np.amax is not np.max:
    implements(np.amax)(max)
    implements(np.amin)(min)
amax, amin = max, min
nanmax = implements(np.nanmax)(_complex_by_numpy(np.nanmax, _extremum("reduce_max", "fmax", nan_ignoring=True)))
nanmin = implements(np.nanmin)(_complex_by_numpy(np.nanmin, _extremum("reduce_min", "fmin", nan_ignoring=True)))


def _along(a, axis):
    """``a``'s value and the dim an axis-wise op runs along: ``axis=None`` (and
    any axis of a 0-d array) means the flattened array, as in NumPy."""
    h = value(a)
    if axis is None or a.ndim == 0:
        if axis is not None:
            normalize_axis_index(axis, 1)  # NumPy treats a 0-d array as 1-d here
        return apply("reshape", h, shape=(a.size,)), 0
    return h, normalize_axis_index(axis, a.ndim)


# --- argmax, argmin -------------------------------------------------------------------------------


def _arg(op, name):
    def reduce(a, axis=None, out=None, *, keepdims=False):
        a = asarray_like(a)
        h, d = _along(a, axis)
        n = h.shape[d]
        if axis is None or a.ndim == 0:
            shape = (1,) * a.ndim if keepdims else ()
        else:
            shape = _kept_shape(a.shape, (d,), keepdims)
        if n == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        r = apply(op, h, dim=d, dtype="i64")
        if r.shape != shape:
            r = apply("reshape", r, shape=shape)
        return _store(result(wrap(r, np.dtype(np.int64))), out)

    return reduce


argmax = implements(np.argmax)(_complex_by_numpy(np.argmax, _arg("argmax", "argmax")))
argmin = implements(np.argmin)(_complex_by_numpy(np.argmin, _arg("argmin", "argmin")))


# --- mean, var, std -------------------------------------------------------------------------------


def _mean_parts(a, axes, dt, valid):
    """(sum, count) of the elements ``valid`` keeps, the sum in ``dt``'s accumulation type."""
    acc = _acc(dt) if _is_float(dt) else dt
    h = cast(cast(value(a), dt), acc)
    total = _reduce("reduce_sum", axes, _keep(h, valid, "reduce_sum"))
    if valid is None:
        return total, _count(a.shape, axes)
    return total, _reduce("reduce_sum", axes, _convert(valid, "i64"))


@implements(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    a = asarray_like(a)
    axes = _axes(a, axis)
    dt = _mean_dtype(a, dtype)
    total, count = _mean_parts(a, axes, dt, _mask(a, where))
    return _store(_finish(_divide(total, count), a.shape, axes, keepdims, dt), out)


@implements(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    a = asarray_like(a)
    if not _is_float(a.dtype):
        return mean(a, axis, dtype, out, keepdims, where=where)
    if dtype is not None and np.dtype(dtype).kind not in "fc":
        raise TypeError("If a is inexact, then dtype must be inexact")
    axes = _axes(a, axis)
    dt = _mean_dtype(a, dtype)
    valid = _and(_mask(a, where), apply("not", _isnan(value(a))))
    total, count = _mean_parts(a, axes, dt, valid)
    return _store(_finish(_divide(total, count), a.shape, axes, keepdims, dt), out)


def _var(a, axis, dtype, out, ddof, keepdims, where, mean_, correction, root, nan=False):
    if _given(correction):
        if ddof != 0:
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    a = asarray_like(a)
    axes = _axes(a, axis)
    dt = _mean_dtype(a, dtype)
    cplx = dt.kind == "c"  # the deviations' squared moduli: a real variance, of the parts' type
    acc = dt if cplx else _acc(dt) if _is_float(dt) else _F64
    count_dt = np.finfo(dt).dtype if cplx else acc
    valid = _mask(a, where)
    if nan and _is_float(a.dtype):
        valid = _and(valid, apply("not", _isnan(value(a))))
    h = cast(value(a), acc)
    if valid is None:
        n = _count(a.shape, axes)
    else:
        n = _reduce("reduce_sum", axes, cast(valid, count_dt))
    if _given(mean_):
        m = to_handle(mean_, acc, device_of(a))
        try:
            np.broadcast_shapes(m.shape, a.shape)
        except ValueError:
            raise ValueError(f"mean of shape {m.shape} does not broadcast to the array's shape {a.shape}") from None
        m = broadcast_to_shape(m, a.shape)
    else:
        m = _reduce("reduce_sum", axes, _keep(h, valid, "reduce_sum"))
        m = apply("div", m, const(n, m) if isinstance(n, int) else cast(n, acc))
        m = broadcast_to_shape(apply("reshape", m, shape=_kept_shape(a.shape, axes, True)), a.shape)
    dev = apply("sub", h, m)
    if cplx:
        re, im = apply("real", dev), apply("imag", dev)
        square = apply("add", apply("mul", re, re), apply("mul", im, im))
    else:
        square = apply("mul", dev, dev)
    s = _reduce("reduce_sum", axes, _keep(square, valid, "reduce_sum"))
    if isinstance(n, int):
        dof = builtins.max(n - ddof, 0)
        v = apply("div", s, const(dof, s))
        if nan and dof <= 0:
            v = const(math.nan, v)
    else:
        dof = apply("maximum", apply("sub", n, const(ddof, n)), const(0, n))
        v = apply("div", s, dof)
        if nan:
            # NumPy's nanvar gives NaN where the degrees of freedom run out
            v = apply("select", apply("compare", dof, const(0, dof), direction="LE"), const(math.nan, v), v)
    if root:
        v = apply("sqrt", v)
    return _store(_finish(v, a.shape, axes, keepdims, count_dt if cplx else dt), out)


@implements(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NoValue,
        correction=_NoValue):
    return _var(a, axis, dtype, out, ddof, keepdims, where, mean, correction, root=False)


@implements(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NoValue,
        correction=_NoValue):
    return _var(a, axis, dtype, out, ddof, keepdims, where, mean, correction, root=True)


@implements(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NoValue,
           correction=_NoValue):
    return _var(a, axis, dtype, out, ddof, keepdims, where, mean, correction, root=False, nan=True)


@implements(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=_NoValue,
           correction=_NoValue):
    return _var(a, axis, dtype, out, ddof, keepdims, where, mean, correction, root=True, nan=True)


# --- ptp, average -----------------------------------------------------------------------------------


@implements(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    a = asarray_like(a)
    hi = max(a, axis, keepdims=keepdims)
    lo = min(a, axis, keepdims=keepdims)
    return UFUNCS["subtract"](hi, lo) if out is None else UFUNCS["subtract"](hi, lo, out=out)


_ZERO_WEIGHTS = "Weights sum to zero, can't be normalized"


@implements(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=_NoValue):
    """NumPy's ``average``. Weights summing to zero are NumPy's ZeroDivisionError,
    which only the values tell: a check, raised where the result is read."""
    a = asarray_like(a)
    if axis is not None:
        axis = normalize_axis_tuple(axis, a.ndim, argname="axis")
    kw = {} if keepdims is _NoValue else {"keepdims": keepdims}
    if weights is None:
        avg = mean(a, axis, **kw)
        scl = avg.dtype.type(a.size / avg.size)
    else:
        w = asarray_like(weights)
        if a.shape != w.shape:
            if axis is None:
                raise TypeError("Axis must be specified when shapes of a and weights differ.")
            if w.shape != tuple(a.shape[ax] for ax in axis):
                raise ValueError("Shape of weights must be consistent with shape of a along specified axis.")
            w = w.transpose(tuple(int(i) for i in np.argsort(axis)))
            w = w.reshape(tuple((s if ax in axis else 1) for ax, s in enumerate(a.shape)))
        if a.dtype.kind in "biu":
            rdt = np.result_type(a.dtype, w.dtype, "f8")
        else:
            rdt = np.result_type(a.dtype, w.dtype)
        scl = sum(w, axis=axis, dtype=rdt, **kw)
        avg = UFUNCS["true_divide"](sum(UFUNCS["multiply"](a, w, dtype=rdt), axis, **kw), scl)
        zero = value(UFUNCS["equal"](scl, 0))
        avg, scl = (result(wrap(core.check(value(x), zero, _ZERO_WEIGHTS, "ZeroDivisionError"), x.dtype))
                    for x in (avg, scl))
    if returned:
        if scl.shape != avg.shape:  # NumPy scalars have a shape too
            scl = wrap(broadcast_to_shape(to_handle(scl, scl.dtype), avg.shape), scl.dtype)
        return avg, scl
    return avg


# --- scans ------------------------------------------------------------------------------------------


def scan(h, d: int, combine: str, identity):
    """Inclusive scan of ``h`` along ``d`` (Hillis-Steele: shift by 1, 2, 4, ... and combine)."""
    n = h.shape[d]
    rank = len(h.shape)
    fill = core.apply("constant", value=np.asarray(identity, dtype=dtypes.TO_NUMPY[h.dtype]), device=h.device)
    k = 1
    while k < n:
        low, high = [0] * rank, [0] * rank
        low[d], high[d] = k, -k  # shift right by k: negative high padding crops the tail
        shifted = apply("pad", h, fill, low=low, high=high, interior=[0] * rank)
        h = apply(combine, h, shifted)
        k *= 2
    return h


def _cumulative(a, axis, dtype, out, combine, identity, nan=False):
    a = asarray_like(a)
    h, d = _along(a, axis)
    dt = _sum_dtype(a, dtype)
    return _store(wrap(_scanned(h, d, dt, combine, identity, nan and _is_float(a.dtype)), dt), out)


@recipes.replayed
def _scanned(h, d: int, dt, combine: str, identity, nan: bool):
    """The scan of ``h`` along ``d`` in ``dt``, as a recorded lowering: the
    in-order float scan is a loop, whose body a later call of the same
    signature does not trace again (three bodies a call: 0.4 ms of host
    time), as torch's cumsum since the recordings hold loops."""
    if nan:
        h = apply("select", _isnan(h), const(identity, h), h)
    h = cast(h, dt)
    if _is_float(dt) and h.shape[d] > 1 and scans.in_order(h.device):
        # -0.0 + x is x for every x (0.0 + -0.0 is not): the first element stays itself, as NumPy copies it
        start = -0.0 if combine == "add" else 1.0
        return scans.one_by_one(h, d, _numpy_step(h, combine), start)
    if dt == _BOOL:
        combine, identity = {"add": ("or", False), "mul": ("and", True)}[combine]
    h = cast(h, _acc(dt))
    if h.shape[d] > 1:
        h = scan(h, d, combine, identity)
    return cast(h, dt)


def _numpy_step(h, combine: str):
    """The ``combine`` of a float scan step as NumPy's loop: each partial result
    rounded to ``h``'s type, half types added in float32 (NumPy's half loop adds
    there); for :func:`lazycore.trace.scans.one_by_one`, which gives NumPy's
    values bit for bit (1e6 elements on XLA's CPU: 27 ms, against 120-800 ms for
    the log2(n) shifted copies of :func:`scan`)."""
    lt = h.dtype
    wide = "f32" if lt in ("f16", "bf16") else None

    def step(a, b):
        if wide:
            a, b = apply("convert", a, dtype=wide), apply("convert", b, dtype=wide)
        s = apply(combine, a, b)
        return apply("convert", s, dtype=lt) if wide else s

    return step


@implements(np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    return _cumulative(a, axis, dtype, out, "add", 0)


@implements(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    return _cumulative(a, axis, dtype, out, "mul", 1)


@implements(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    return _cumulative(a, axis, dtype, out, "add", 0, nan=True)


@implements(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    return _cumulative(a, axis, dtype, out, "mul", 1, nan=True)


def _array_api_cumulative(x, axis, dtype, out, include_initial, combine, identity):
    x = asarray_like(x)
    if x.ndim == 0:
        x = wrap(apply("reshape", value(x), shape=(1,)), x.dtype)
    if axis is None:
        if x.ndim >= 2:
            raise ValueError("For arrays which have more than one dimension ``axis`` argument is required.")
        axis = 0
    res = _cumulative(x, axis, dtype, None, combine, identity)
    if include_initial:
        d = normalize_axis_index(axis, x.ndim)
        shape = list(res.shape)
        shape[d] = 1
        first = broadcast_to_shape(to_handle(identity, res.dtype, device_of(res)), tuple(shape))
        res = wrap(apply("concatenate", first, value(res), dim=d), res.dtype)
    return _store(res, out)


if hasattr(np, "cumulative_sum"):
    @implements(np.cumulative_sum)
    def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        return _array_api_cumulative(x, axis, dtype, out, include_initial, "add", 0)

    @implements(np.cumulative_prod)
    def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        return _array_api_cumulative(x, axis, dtype, out, include_initial, "mul", 1)
else:  # NumPy < 2.1
    __all__ = [n for n in __all__ if not n.startswith("cumulative_")]
