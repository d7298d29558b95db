"""Order statistics: ``np.median``, ``np.percentile``, ``np.quantile`` and their
``nan`` variants, lazily: one sort along the reduced axis (NaN after every
number, as NumPy's partition leaves them), then a gather of the order
statistics each quantile needs and NumPy's interpolation.

Where each quantile sits in the sorted slice depends only on the slice's
length and on ``q`` (host values), so NumPy's own index rules
(``numpy.lib._function_base_impl``'s ``_QuantileMethods``, ``_get_indexes``,
``_get_gamma``) compute it on the host, for every ``method=`` NumPy documents:
the positions and weights are NumPy's bit for bit. The ``nan`` variants drop
NaN by counting the numbers of each slice (lazily); for the default method
(``linear``) each slice computes NumPy's ``(k - 1) * q`` from its count ``k``
on the device, for the others a table of positions and weights holds a row
per possible count (NumPy's rules applied to a column of counts), and each
slice gathers its row.
Weighted quantiles (``weights=``), a lazy ``q`` and a table of more than
``_TABLE_LIMIT`` entries run NumPy (counted).

One difference: NumPy's ``nanquantile`` gives an all-NaN 1-d slice the
array's dtype (its ``np.full(q.shape, nan, arr.dtype)``) where the others
take the interpolation's (float64 for float32 data and a list of
quantiles): a dtype that depends on the values. Here the result has the
interpolation's dtype always. XLA may fuse the interpolation's
``a + (b - a) * t`` into one rounding (NumPy rounds twice): a unit in the
last place of the data at most.
"""

from __future__ import annotations

import operator

import numpy as np
from numpy.lib import _function_base_impl as _fb
from numpy.lib.array_utils import normalize_axis_tuple

from .array import ndarray
from .fallback import call_numpy, implements
from .indexing import take_along_axis
from .manipulation import moveaxis
from .reductions import _store, mean, nanmean
from .scalars import result
from .sorting import sort
from .ufuncs import UFUNCS, asarray_like

__all__ = ["median", "nanmedian", "percentile", "nanpercentile", "quantile", "nanquantile"]

_NoValue = np._NoValue
_TABLE_LIMIT = 1 << 20  # entries of the nan variants' position table: (slice length + 1) * number of quantiles


def _uf(name):
    return UFUNCS[name]


def _to_last(a: ndarray, axis):
    """NumPy's ``_ureduce``: ``a`` with the reduced axes merged into one last
    axis, and the shape ``keepdims`` gives the result (its trailing part)."""
    nd = a.ndim
    if axis is None:
        return a.reshape((a.size,)), (1,) * nd
    axes = normalize_axis_tuple(axis, nd)  # NumPy's AxisError
    keep = [i for i in range(nd) if i not in axes]
    moved = a.transpose(tuple(keep) + axes)
    kept = tuple(1 if i in axes else a.shape[i] for i in range(nd))
    return moved.reshape(moved.shape[:len(keep)] + (int(np.prod([a.shape[i] for i in axes])),)), kept


def _finish(r: ndarray, qshape, kept, keepdims, out):
    if keepdims:
        r = r.reshape(tuple(qshape) + kept)
    if out is not None:
        return _store(r, out)
    return result(r) if isinstance(r, ndarray) else r


# --- NumPy's positions and weights, on the host -----------------------------------------------------


def _plan(n, q: np.ndarray, method: str, inexact: bool):
    """NumPy's ``_quantile`` index work for a slice of ``n`` elements: ``(idx, gamma)``
    with ``idx`` the positions to gather (``(m,)`` for a plain take, ``(2, m)`` for
    interpolation; negative ones counted from the slice's end) and ``gamma`` the
    weights (None for a plain take), ``q`` flattened to ``m`` entries. ``n`` may be
    a column of counts (``(N, 1)``, of ``q``'s type as a Python int would promote):
    a row per count, each NumPy's (its rules are elementwise)."""
    props = _fb._QuantileMethods[method]
    vi = np.asanyarray(props["get_virtual_index"](n, q.ravel()))
    if props["fix_gamma"] is None or (method == "linear" and np.issubdtype(vi.dtype, np.integer)):
        return vi.astype(np.intp), None
    prev, nxt = _fb._get_indexes(np.empty(0, np.float64 if inexact else np.int64), vi, n)
    gamma = _fb._get_gamma(vi, prev, props)
    return np.stack([prev, nxt], axis=-2), gamma


def _counts_column(n: int, q: np.ndarray) -> np.ndarray:
    """1..n as a column, of the type a Python int takes beside ``q`` (NEP 50: ``q``'s
    own float type, int64 beside integers), so each row's arithmetic is NumPy's."""
    dt = q.dtype if q.dtype.kind == "f" else np.dtype(np.int64)
    return np.arange(1, n + 1, dtype=dt)[:, None]


def _linear_rows(k: ndarray, qa: np.ndarray, dt):
    """The default method's positions and weights for lazy counts ``k`` (``(*batch,)``):
    NumPy's ``(k - 1) * q``, ``_get_indexes``' bounds (past the end: the last number,
    whose weight NumPy takes from the position -1) and ``vi - floor(vi)``, in
    ``dt`` (``q``'s float type), elementwise as NumPy computes them."""
    q = asarray_like(qa.ravel().astype(dt))
    kf = k.astype(dt)[..., None]
    vi = _uf("multiply")(_uf("subtract")(kf, 1), q)
    prev = _uf("floor")(vi)
    above = _uf("greater_equal")(vi, _uf("subtract")(kf, 1))
    prev_num = _select(above, np.array(-1, dt), prev)
    gamma = _uf("subtract")(vi, prev_num)
    last = _uf("subtract")(k[..., None], 1)
    lo = _select(above, last, prev.astype(np.intp))
    hi = _select(above, last, _uf("add")(prev, 1).astype(np.intp))
    return lo, hi, gamma


def _method(method):
    if method not in _fb._QuantileMethods:
        raise ValueError(f"{method!r} is not a valid method. Use one of: {_fb._QuantileMethods.keys()}")


def _lerp(a, b, t, weak: bool):
    """NumPy's ``_lerp``: ``a + (b - a) * t``, or ``b - (b - a) * (1 - t)`` where ``t >= 0.5``
    (``t``: a host array or a lazy one; ``weak``: ``q`` was a Python number, whose
    weight NumPy passes as a Python float)."""
    d = _uf("subtract")(b, a)
    low = _uf("add")(a, _uf("multiply")(d, t))
    high = _uf("subtract")(b, _uf("multiply")(d, _uf("subtract")(1, t)))
    return _select(_uf("greater_equal")(t, 0.5), high.astype(low.dtype), low)


def _select(cond, x, y):
    from .manipulation import where
    return where(cond, x, y)


def _gamma_dtype(gamma: np.ndarray, a_dtype, weak: bool):
    # a Python-number q: NumPy's weight is a Python float, promoted weakly
    return np.result_type(a_dtype, 0.0) if weak else gamma.dtype


# --- quantile / percentile ---------------------------------------------------------------------------


def _q_checked(q, scale, name):
    """``q`` on the host in [0, 1], NumPy's way (``percentile``: divided by 100)."""
    weak = type(q) in (int, float)
    qa = np.true_divide(q, 100) if scale else np.asanyarray(q)
    if not _fb._quantile_is_valid(qa):
        raise ValueError(f"{name} must be in the range [0, {100 if scale else 1}]")
    if qa.ndim > 2:
        raise ValueError("q must be a scalar or 1d")
    return qa, weak


def _gather(s: ndarray, idx):
    """``s[..., idx]`` along the last axis, ``idx`` a host array or a lazy one of ``s``'s batch shape + (m,)."""
    if isinstance(idx, np.ndarray):
        idx = np.broadcast_to(idx, s.shape[:-1] + idx.shape)
    return take_along_axis(s, asarray_like(idx), axis=-1)


def _quantile_sorted(s: ndarray, n: int, qa, method, weak, counts=None):
    """Quantiles along the last axis of the sorted ``s`` (NaN last): ``(*batch, m)``.
    ``counts``: a lazy count of the numbers of each slice (the nan variants)."""
    inexact = s.dtype.kind in "fc"
    m = qa.size
    if counts is None:
        idx, gamma = _plan(n, qa, method, inexact)
        idx = np.where(idx < 0, idx + n, idx)
        if gamma is None:
            r = _gather(s, idx)
        else:
            g = gamma.astype(_gamma_dtype(gamma, s.dtype, weak))
            r = _lerp(_gather(s, idx[0]), _gather(s, idx[1]), g, weak)
        if inexact and n:
            last = s[..., -1:]
            r = _select(_uf("isnan")(last), last.astype(r.dtype), r)
        return r
    k = counts
    if method == "linear" and qa.dtype.kind == "f" or (n + 1) * max(m, 1) * 2 > _TABLE_LIMIT:
        lo, hi, gamma = _linear_rows(k, qa, qa.dtype)
        if weak:
            gamma = gamma.astype(_gamma_dtype(gamma, s.dtype, weak))
        r = _lerp(_gather(s, _uf("maximum")(lo, 0)), _gather(s, _uf("maximum")(hi, 0)), gamma, weak)
        empty = k.reshape(k.shape + (1,)) == 0
        return _select(empty, np.array(np.nan, s.dtype), r)
    # a row of positions and weights per count of numbers (0: an all-NaN slice), NumPy's rules on the host
    idx, gamma = _plan(_counts_column(n, qa), qa, method, inexact)
    counts_col = np.arange(1, n + 1).reshape((n,) + (1,) * (idx.ndim - 1))
    idx = np.where(idx < 0, idx + counts_col, idx)
    table = np.concatenate([np.zeros((1,) + idx.shape[1:], np.intp), idx.astype(np.intp)])
    if gamma is None:
        r = _gather(s, _rows(table, k))
    else:
        gdt = _gamma_dtype(gamma, s.dtype, weak)
        gtab = np.concatenate([np.zeros((1, m), gdt), gamma.astype(gdt)])
        both = _rows(table.reshape(n + 1, 2 * m), k)
        r = _lerp(_gather(s, both[..., :m]), _gather(s, both[..., m:]), _rows(gtab, k), weak)
    empty = k.reshape(k.shape + (1,)) == 0
    return _select(empty, np.array(np.nan, s.dtype), r)


def _rows(table: np.ndarray, k: ndarray) -> ndarray:
    """``table[k]`` for the lazy integer array ``k``: ``k.shape + table.shape[1:]``."""
    from .indexing import take
    return take(asarray_like(table), k, axis=0)


def _quantile(a, qa, axis, out, method, keepdims, weak, nan: bool):
    _method(method)
    a = asarray_like(a)
    if a.dtype.kind == "c":
        raise TypeError("a must be an array of real numbers")
    if nan and a.size == 0:
        return nanmean(a, axis, out=out, keepdims=bool(keepdims) and keepdims is not _NoValue)
    flat, kept = _to_last(a, axis)
    n = flat.shape[-1]
    if nan and (n + 1) * max(qa.size, 1) * 2 > _TABLE_LIMIT and not (method == "linear" and qa.dtype.kind == "f"):
        return None
    s = sort(flat, axis=-1)
    counts = None
    if nan and a.dtype.kind in "fc":
        counts = _uf("logical_not")(_uf("isnan")(flat)).sum(axis=-1)
    elif n == 0:
        raise IndexError("index -1 is out of bounds for axis 0 with size 0")
    r = _quantile_sorted(s, n, qa, method, weak, counts)  # (*batch, m)
    r = moveaxis(r, -1, 0).reshape(qa.shape + flat.shape[:-1])
    return _finish(r, qa.shape, kept, keepdims is True, out)


def _entry(np_fn, scale, nan, name):
    def fn(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *, weights=None,
           interpolation=None):
        if interpolation is not None or weights is not None or isinstance(q, ndarray):
            kw = dict(axis=axis, out=out, overwrite_input=overwrite_input, method=method, keepdims=keepdims,
                      weights=weights)
            if interpolation is not None:
                kw["interpolation"] = interpolation
            return call_numpy(np_fn, (a, q), kw)
        if isinstance(a, ndarray) and a.dtype.kind == "c":
            raise TypeError("a must be an array of real numbers")
        qa, weak = _q_checked(q, scale, name)
        r = _quantile(a, qa, axis, out, method, keepdims, weak, nan)
        if r is None:
            return call_numpy(np_fn, (a, q), dict(axis=axis, out=out, method=method, keepdims=keepdims))
        return r

    fn.__name__ = np_fn.__name__
    return implements(np_fn)(fn)


quantile = _entry(np.quantile, False, False, "Quantiles")
percentile = _entry(np.percentile, True, False, "Percentiles")
nanquantile = _entry(np.nanquantile, False, True, "Quantiles")
nanpercentile = _entry(np.nanpercentile, True, True, "Percentiles")


# --- median ----------------------------------------------------------------------------------------


@implements(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """NumPy's ``_median``: the mean of the middle one or two sorted elements
    (NumPy's ``mean``: its dtype, float64 for integers); NaN where the slice holds one."""
    a = asarray_like(a)
    flat, kept = _to_last(a, axis)
    n = flat.shape[-1]
    s = sort(flat, axis=-1)
    h = n // 2
    mid = s[..., h:h + 1] if n % 2 else s[..., max(h - 1, 0):h + 1]
    r = mean(mid, axis=-1)
    if a.dtype.kind in "fc" and n:
        last = s[..., -1]
        r = _select(_uf("isnan")(last), last.astype(r.dtype), r)
    return _finish(asarray_like(r), (), kept, keepdims is True, out)


@implements(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=_NoValue):
    """NumPy's ``nanmedian``: the median of each slice's numbers; NaN for an all-NaN
    slice. A 1-d slice (``axis=None`` or 1-d ``a``) takes ``median``'s mean of the
    middle elements, others NumPy's masked median (``(low + high) / 2`` in the
    array's type)."""
    a = asarray_like(a)
    if a.dtype.kind not in "fc" or a.size == 0:
        if a.size == 0:
            return nanmean(a, axis, out=out, keepdims=keepdims is True)
        return median(a, axis, out, keepdims=keepdims is True)
    flat, kept = _to_last(a, axis)
    k = _uf("logical_not")(_uf("isnan")(flat)).sum(axis=-1)
    s = sort(flat, axis=-1)
    k1 = k.reshape(k.shape + (1,))
    lo = _uf("floor_divide")(_uf("subtract")(k1, 1), 2)
    hi = _uf("floor_divide")(k1, 2)
    lo = _uf("maximum")(lo, 0)
    low, high = _gather(s, lo), _gather(s, hi)
    if axis is None or a.ndim == 1:
        pair = mean(_concat(low, high), axis=-1)
        r = _select(_uf("equal")(lo, hi)[..., 0], low[..., 0], pair)
    else:
        r = _uf("true_divide")(_uf("add")(low, high), 2.0)[..., 0]
        r = r.astype(a.dtype)
    r = _select(_uf("equal")(k, 0), np.array(np.nan, a.dtype), r)
    return _finish(asarray_like(r), (), kept, keepdims is True, out)


def _concat(x, y):
    from .manipulation import concatenate
    return concatenate((x, y), axis=-1)



# --- cov, corrcoef: NumPy's formulas in lazy operations -------------------------------------------


def _host_weights(w, name, n):
    """NumPy's checks of ``fweights``/``aweights`` (host values: the checks read them)."""
    w = np.asarray(w, dtype=float)
    if name == "fweights" and not np.all(w == np.around(w)):
        raise TypeError("fweights must be integer")
    if w.ndim > 1:
        raise RuntimeError(f"cannot handle multidimensional {name}")
    if w.shape[0] != n:
        raise RuntimeError(f"incompatible numbers of samples and {name}")
    if any(w < 0):
        raise ValueError(f"{name} cannot be negative")
    return w


def _rows2(x, dtype):
    """NumPy's ``array(x, ndmin=2, dtype=dtype)``."""
    x = asarray_like(x).astype(dtype)
    return x.reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x


def _cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype):
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    m = asarray_like(m)
    if m.ndim > 2:
        raise ValueError("m has more than 2 dimensions")
    if y is not None:
        y = asarray_like(y)
        if y.ndim > 2:
            raise ValueError("y has more than 2 dimensions")
    if dtype is None:
        dtype = np.result_type(m.dtype, np.float64) if y is None else np.result_type(m.dtype, y.dtype, np.float64)
    dtype = np.dtype(dtype)
    X = _rows2(m, dtype)
    if not rowvar and m.ndim != 1:
        X = X.T
    if X.shape[0] == 0:
        return asarray_like(np.array([]).reshape(0, 0))
    if y is not None:
        yy = _rows2(y, dtype)
        if not rowvar and yy.shape[0] != 1:
            yy = yy.T
        from .manipulation import concatenate
        X = concatenate((X, yy), axis=0)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    w = None
    if fweights is not None:
        w = _host_weights(fweights, "fweights", X.shape[1])
    if aweights is not None:
        aw = _host_weights(aweights, "aweights", X.shape[1])
        w = aw if w is None else w * aw
    from .reductions import average
    if w is None:
        avg = average(X, axis=1)
        fact = X.shape[1] - ddof
    else:
        avg, w_sum = average(X, axis=1, weights=w, returned=True)
        w_sum_host = np.sum(w, dtype=np.result_type(dtype, w.dtype))  # NumPy's w_sum: the weights' sum
        if ddof == 0:
            fact = w_sum_host
        elif aweights is None:
            fact = w_sum_host - ddof
        else:
            fact = w_sum_host - ddof * sum(w * aw) / w_sum_host
    if fact <= 0:
        import warnings
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=3)
        fact = 0.0
    X = _uf("subtract")(X, avg[:, None]).astype(dtype)
    X_T = X.T if w is None else _uf("multiply")(X, w).astype(dtype).T
    from .linalg import dot
    c = dot(X, _uf("conjugate")(X_T))
    with np.errstate(divide="ignore"):
        scale = np.true_divide(1, fact)
    c = _uf("multiply")(c, scale).astype(c.dtype)  # NumPy's c *= scale: computed in the scale's type, kept in c's
    return c.squeeze()


@implements(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *, dtype=None):
    """NumPy's ``cov``; weights given as lazy arrays run NumPy (its checks read them), counted."""
    if isinstance(fweights, ndarray) or isinstance(aweights, ndarray):
        return call_numpy(np.cov, (m, y, rowvar, bias, ddof, fweights, aweights), {"dtype": dtype})
    return _cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype)


@implements(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """NumPy's ``corrcoef``: the covariance scaled by the deviations, clipped to [-1, 1]
    (complex arrays: each part)."""
    c = _cov(x, y, rowvar, False, None, None, None, dtype)
    if c.ndim != 2:  # a scalar covariance: NaN for NaN, Inf or 0, else 1
        return result(_uf("true_divide")(c, c))
    from .manipulation import clip, diag
    from .complexes import np_imag, np_real
    stddev = _uf("sqrt")(np_real(diag(c)) if c.dtype.kind == "c" else diag(c))
    c = _uf("true_divide")(c, stddev[:, None]).astype(c.dtype)
    c = _uf("true_divide")(c, stddev[None, :]).astype(c.dtype)
    if c.dtype.kind == "c":
        re = clip(np_real(c), -1, 1)
        im = clip(np_imag(c), -1, 1)
        return _uf("add")(re, _uf("multiply")(im, 1j)).astype(c.dtype)
    return clip(c, -1, 1)


# --- polyval, interp ------------------------------------------------------------------------------


@implements(np.polyval)
def polyval(p, x):
    """NumPy's Horner loop: ``y = y * x + p[i]`` from ``zeros_like(x)``."""
    p = asarray_like(p)
    x = asarray_like(x)
    from .creation import zeros_like
    y = zeros_like(x)
    for i in range(len(p)):
        y = _uf("add")(_uf("multiply")(y, x), p[i])
    return y


__all__ += ["cov", "corrcoef", "polyval"]


@implements(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """NumPy's ``interp`` (its C loop, in float64): ``j`` the last sample point at or
    below ``x`` (``searchsorted``), ``slope * (x - xp[j]) + fp[j]``, from the right
    neighbour where that is NaN, ``fp[j]`` where ``x`` is a sample point; ``left``/
    ``right`` outside, NaN for NaN. Complex ``fp``, ``period=`` and lazy ``left``/
    ``right`` run NumPy (counted)."""
    if period is not None or isinstance(left, ndarray) or isinstance(right, ndarray) or np.iscomplexobj(
            fp if not isinstance(fp, ndarray) else np.empty(0, fp.dtype)):
        return call_numpy(np.interp, (x, xp, fp), dict(left=left, right=right, period=period))
    f64 = np.dtype(np.float64)
    x, xp, fp = (asarray_like(v).astype(f64) for v in (x, xp, fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ValueError("object too deep for desired array" if max(xp.ndim, fp.ndim) > 1
                         else "object of too small depth for desired array")
    n = xp.shape[0]
    if fp.shape[0] != n:
        raise ValueError("fp and xp are not of the same length.")
    if n == 0:
        raise ValueError("array of sample points is empty")
    lval = fp[0] if left is None else float(left)
    rval = fp[n - 1] if right is None else float(right)
    where, less, greater, isnan = _select, _uf("less"), _uf("greater"), _uf("isnan")
    if n == 1:
        r = where(less(x, xp[0]), lval, where(greater(x, xp[0]), rval, fp[0]))
        return result(asarray_like(r).astype(f64))
    from .sorting import searchsorted
    from .indexing import take
    j = _uf("subtract")(searchsorted(xp, x, side="right"), 1)
    jc = _uf("minimum")(_uf("maximum")(j, 0), n - 2)
    x0, x1 = take(xp, jc), take(xp, _uf("add")(jc, 1))
    y0, y1 = take(fp, jc), take(fp, _uf("add")(jc, 1))
    sub, mul, add = _uf("subtract"), _uf("multiply"), _uf("add")
    slope = _uf("true_divide")(sub(y1, y0), sub(x1, x0))
    d1 = add(mul(slope, sub(x, x0)), y0)
    d2 = add(mul(slope, sub(x, x1)), y1)
    d2 = where(_uf("logical_and")(isnan(d2), _uf("equal")(y0, y1)), y0, d2)
    r = where(isnan(d1), d2, d1)
    r = where(_uf("equal")(x0, x), y0, r)  # a sample point: its value (no 0 * inf)
    r = where(_uf("equal")(j, n - 1), fp[n - 1], r)
    r = where(greater(x, xp[n - 1]), rval, r)
    r = where(_uf("equal")(j, -1), lval, r)
    r = where(isnan(x), x, r)
    return result(asarray_like(r).astype(f64))


__all__ += ["interp"]


# --- histogram --------------------------------------------------------------------------------------

_HIST_LIMIT = 1 << 26  # lazy up to this many (element, bin) comparisons; NumPy's loop above it (counted)


@implements(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """NumPy's ``histogram`` for edges known on the host: an integer ``bins`` with
    ``range=`` (or an empty ``a``), or the edges themselves; NumPy's
    ``_get_bin_edges`` makes them (its errors too). Equal bins place each element
    as NumPy's loop does (its scaled index, moved by one where the edges say),
    given edges by comparison; values outside the edges (and NaN) are dropped.
    Edges that depend on the values (``bins`` a string, or no ``range``), lazy
    edges or weights, and more than ``_HIST_LIMIT`` comparisons run NumPy (counted)."""
    from numpy.lib import _histograms_impl as _hi
    a = asarray_like(a)
    n_elems = a.size
    edges_known = not isinstance(bins, (str, ndarray)) and not isinstance(range, ndarray) and (
        range is not None or np.ndim(bins) != 0 or n_elems == 0)
    n_bins = np.size(bins) if np.ndim(bins) else bins if isinstance(bins, (int, np.integer)) else 1
    if not edges_known or n_elems * max(int(n_bins), 1) > _HIST_LIMIT:
        return call_numpy(np.histogram, (a, bins), dict(range=range, density=density, weights=weights))
    if a.dtype == np.bool_:
        import warnings
        warnings.warn(f"Converting input from {a.dtype} to {np.uint8} for compatibility.", RuntimeWarning,
                      stacklevel=2)
        a = a.astype(np.uint8)
    if weights is not None:
        weights = asarray_like(weights)
        if weights.shape != a.shape:
            raise ValueError("weights should have the same shape as a.")
        weights = weights.reshape((n_elems,))
    a = a.reshape((n_elems,))
    edges, uniform = _hi._get_bin_edges(np.empty(0, a.dtype), bins, range, None)
    ntype = np.dtype(np.intp) if weights is None else weights.dtype
    lt, le, ge, land = _uf("less"), _uf("less_equal"), _uf("greater_equal"), _uf("logical_and")
    nbins = edges.size - 1
    if uniform is not None and (weights is None or np.can_cast(weights.dtype, np.double)
                                or np.can_cast(weights.dtype, complex)):
        first, last, _ = uniform
        keep = land(ge(a, first), le(a, last))
        t = a.astype(edges.dtype)
        denom = _hi._unsigned_subtract(last, first)
        f = _uf("multiply")(_uf("true_divide")(_uf("subtract")(t, first), denom), nbins)  # NumPy's scaled index
        idx = _uf("minimum")(_uf("maximum")(f, -1), nbins + 1).astype(np.intp)  # (NaN and outside: dropped)
        idx = _select(_uf("equal")(idx, nbins), idx - 1, idx)
        from .indexing import take
        e = asarray_like(edges)
        safe = _uf("minimum")(_uf("maximum")(idx, 0), nbins - 1)
        idx = _select(lt(t, take(e, safe)), idx - 1, idx)
        safe = _uf("minimum")(_uf("maximum")(idx, 0), nbins - 1)
        idx = _select(land(ge(t, take(e, safe + 1)), _uf("not_equal")(idx, nbins - 1)), idx + 1, idx)
        member = land(keep[:, None], _uf("equal")(idx[:, None], np.arange(nbins)))
    else:
        e = edges
        below_hi = [lt(a[:, None], e[1:-1]), le(a[:, None], e[-1:])] if nbins > 1 else [le(a[:, None], e[-1:])]
        from .manipulation import concatenate
        member = land(ge(a[:, None], e[:-1]), concatenate(below_hi, axis=1))
    if weights is None:
        n = member.sum(axis=0, dtype=ntype)
    else:
        w = weights[:, None]
        n = _select(member, w, np.zeros((), w.dtype)).sum(axis=0).astype(ntype)
    e = asarray_like(edges)
    if density:
        db = np.diff(edges)
        return _uf("true_divide")(_uf("true_divide")(n, db), n.sum()), e
    return n, e


__all__ += ["histogram"]


# --- vander, polyfit --------------------------------------------------------------------------------


@implements(np.vander)
def vander(x, N=None, increasing=False):
    """NumPy's ``vander``: ones, then the running product of ``x`` along the columns
    (its ``multiply.accumulate``: in order, so its values)."""
    x = asarray_like(x)
    if x.ndim != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = x.shape[0] if N is None else operator.index(N)
    dt = np.promote_types(x.dtype, int)
    from .creation import ones
    from .manipulation import broadcast_to, concatenate
    from .reductions import cumprod
    cols = [ones((x.shape[0], min(n, 1)), dtype=dt)]
    if n > 1:
        cols.append(cumprod(broadcast_to(x.astype(dt)[:, None], (x.shape[0], n - 1)), axis=1))
    v = concatenate(cols, axis=1)
    return v if increasing else v[:, ::-1].copy()


@implements(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """NumPy's ``polyfit``: the least-squares solution of the column-scaled
    Vandermonde system by its SVD (``gelsd``'s: singular values at most ``rcond``
    times the largest are dropped). Its ``RankWarning`` reads the rank (a value
    read). ``full=`` and ``cov=`` run NumPy (counted)."""
    if full or cov:
        return call_numpy(np.polyfit, (x, y, deg), dict(rcond=rcond, full=full, w=w, cov=cov))
    order = int(deg) + 1
    x = _uf("add")(asarray_like(x), 0.0)
    y = _uf("add")(asarray_like(y), 0.0)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = len(x) * np.finfo(x.dtype).eps
    lhs = vander(x, order)
    rhs = y
    if w is not None:
        w = _uf("add")(asarray_like(w), 0.0)
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = _uf("multiply")(lhs, w[:, None]).astype(lhs.dtype)
        rhs = _uf("multiply")(rhs, w[:, None] if rhs.ndim == 2 else w).astype(rhs.dtype)
    scale = _uf("sqrt")(_uf("multiply")(lhs, lhs).sum(axis=0))
    lhs = _uf("true_divide")(lhs, scale).astype(lhs.dtype)
    from .decompositions import svd
    from .linalg import matmul
    u, s, vt = svd(lhs, full_matrices=False)
    keep = _uf("greater")(s, _uf("multiply")(rcond, s[0]))
    inv = _select(keep, _uf("true_divide")(1, s), np.zeros((), s.dtype))
    uty = matmul(u.T, rhs)
    c = matmul(vt.T, _uf("multiply")(inv[:, None] if uty.ndim == 2 else inv, uty))
    c = (_uf("true_divide")(c.T, scale)).T
    if int(keep.sum()) != order:  # NumPy's warning: the rank, read
        import warnings
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning, stacklevel=2)
    return c


__all__ += ["vander", "polyfit"]


@implements(np.bincount)
def bincount(x, /, weights=None, minlength=0):
    """NumPy's ``bincount`` as a scatter-add into zeros on the device. The length is
    ``max(x) + 1`` (at least ``minlength``): one value read of the least and the
    largest element, which is also NumPy's check that none is negative. Counts are
    ``intp``; with ``weights``, float64 sums (NumPy's, added in the order XLA adds)."""
    from lazycore.trace import core

    from .array import to_host, value, wrap
    from .manipulation import stack

    x = asarray_like(x)
    if x.ndim != 1:
        raise ValueError("object too deep for desired array" if x.ndim > 1
                         else "object of too small depth for desired array")
    if not np.can_cast(x.dtype, np.intp, "safe"):
        raise TypeError(f"Cannot cast array data from {x.dtype!r} to dtype('int64') according to the rule 'safe'")
    minlength = 0 if minlength is None else operator.index(minlength)
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    if weights is not None:
        weights = asarray_like(weights)
        if weights.shape != x.shape:
            raise ValueError("The weights and list don't have the same length.")
    length = minlength
    if x.size:
        lo, hi = (int(v) for v in to_host(stack([x.min(), x.max()]).astype(np.intp)))
        if lo < 0:
            raise ValueError("'list' argument must have no negative elements")
        length = max(length, hi + 1)
    from .creation import ones, zeros

    out_dt = np.dtype(np.intp) if weights is None else np.dtype(np.float64)
    empty = zeros(length, out_dt)
    if not x.size:
        return empty
    updates = weights.astype(np.float64) if weights is not None else ones(x.shape, out_dt)
    idx = core.apply("reshape", value(x.astype(np.intp)), shape=(x.size, 1))
    h = core.apply("scatter", value(empty), idx, value(updates), update_window_dims=(), inserted_window_dims=(0,),
                   input_batching_dims=(), scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,),
                   index_vector_dim=1, mode="add")
    return wrap(h, out_dt)


__all__ += ["bincount"]
