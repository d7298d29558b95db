"""``numpy.linalg``'s factorizations and solvers: cholesky, qr, eigh, eigvalsh,
svd, svdvals, solve, inv, det, slogdet, pinv, matrix_rank, lstsq, cond.

Each is the factorization op it stands on (:mod:`lazycore.trace.factorizations`)
computed as NumPy computes it: in float64 (complex128) whatever the input's
precision, the result cast back to NumPy's result type (float32 for float32
input, float64 for integers). NumPy's shape errors (``LinAlgError``) are
raised at the call; its value errors ("Matrix is not positive definite",
"Singular matrix", "... did not converge") at the barrier, with the line of
the call, as a ``ValueError`` (``LinAlgError``'s base: a value check raises
one of the builtin types). Empty matrices, ``hermitian=True``, ``qr``'s raw
mode, array-valued tolerances and platforms without the ops run NumPy
(counted fallbacks).
"""

from __future__ import annotations

import numpy as np
from numpy.linalg import LinAlgError

from lazycore.trace import core
from lazycore.trace import factorizations as fz

from . import dtypes
from .array import ndarray, value, wrap
from .fallback import call_numpy, implements
from .ufuncs import asarray_like, cast

_NOT_PD = "Matrix is not positive definite"
_SINGULAR = "Singular matrix"


def _types(*arrays) -> tuple[np.dtype, np.dtype]:
    """NumPy's ``_commonType``: the computation type (always double precision)
    and the result type (single for single-precision inputs)."""
    single, complex_ = True, False
    for a in arrays:
        dt = a.dtype
        if dt.kind in "fc":
            complex_ |= dt.kind == "c"
            base = np.dtype(dt.char.lower()) if dt.kind == "c" else dt
            if base == np.float64 or dt == np.complex128:
                single = False
            elif base != np.float32 and dt != np.complex64:
                raise TypeError(f"array type {dt} is unsupported in linalg")
        else:
            single = False
    if complex_:
        return np.dtype(np.complex128), np.dtype(np.complex64 if single else np.complex128)
    return np.dtype(np.float64), np.dtype(np.float32 if single else np.float64)


def _stacked_2d(*arrays) -> None:
    for a in arrays:
        if a.ndim < 2:
            raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")


def _stacked_square(*arrays) -> None:
    for a in arrays:
        if a.shape[-2] != a.shape[-1]:
            raise LinAlgError("Last 2 dimensions of the array must be square")


def _lazy(op: str, *arrays) -> bool:
    """Whether the call is answered with ``lazy.<op>`` (else NumPy runs it)."""
    return all(a.size for a in arrays) and all(dtypes.supported(a.dtype) and a.dtype.kind in "biufc" for a in arrays) \
        and fz.lowered(op, value(arrays[0]).device, "f64")


def lazy_svd(a: ndarray) -> bool:
    """Whether ``a``'s singular values come from ``lazy.svd`` (norms ask)."""
    return _lazy("svd", a)


def _in(a: ndarray, t: np.dtype):
    return cast(value(a), t)


def _out(h, rt: np.dtype) -> ndarray:
    return wrap(cast(h, rt))


def _checked(h, info, message: str):
    return core.check(h, fz.failed(info), message, "LinAlgError")  # (NumPy's, a ValueError)


def _numpy(func, args, kwargs):
    return call_numpy(func, args, kwargs, name=f"numpy.linalg.{func.__name__}")


@implements(np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    a = asarray_like(a)
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a)
    if not _lazy("cholesky", a):
        return _numpy(np.linalg.cholesky, (a,), dict(upper=upper))
    factor, info = core.apply("cholesky", _in(a, t))
    if upper:
        factor = fz.transpose(factor, conjugate=True)
    return _out(_checked(factor, info, _NOT_PD), rt)


def _lu(a: ndarray, t: np.dtype):
    return fz.lu(_in(a, t))


def _batch(*arrays) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(*(a.shape[:-2] for a in arrays)))


@implements(np.linalg.solve)
def solve(a, b):
    a, b = asarray_like(a), asarray_like(b)
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a, b)
    vector = b.ndim == 1
    n = a.shape[-1]
    if (b.shape[0] if vector else b.shape[-2]) != n or not _lazy("lu", a, b):
        return _numpy(np.linalg.solve, (a, b), {})
    batch = _batch(a, b if not vector else a)
    hb = _in(b, t)
    if vector:
        hb = core.apply("reshape", hb, shape=(n, 1))
    rhs = hb.shape[-1]
    factor, _, perm, info = fz.lu(core.broadcast_to(_in(a, t), batch + (n, n)))
    x = fz.lu_solve(factor, perm, core.broadcast_to(hb, batch + (n, rhs)))
    if vector:
        x = core.apply("reshape", x, shape=batch + (n,))
    return _out(_checked(x, info, _SINGULAR), rt)


@implements(np.linalg.inv)
def inv(a):
    a = asarray_like(a)
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a)
    if not _lazy("lu", a):
        return _numpy(np.linalg.inv, (a,), {})
    x, info = _inverse(a, t)
    return _out(_checked(x, info, _SINGULAR), rt)


def _inverse(a: ndarray, t: np.dtype):
    """The inverse by LU in ``t`` and LAPACK's info (the inverse of a singular matrix
    is not checked here)."""
    factor, _, perm, info = _lu(a, t)
    batch, n = a.shape[:-2], a.shape[-1]
    return fz.lu_solve(factor, perm, fz.identity(dtypes.lazy_dtype(t), factor.device, batch, n)), info


@implements(np.linalg.slogdet)
def slogdet(a):
    a = asarray_like(a)
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a)
    if not _lazy("lu", a):
        return _numpy(np.linalg.slogdet, (a,), {})
    factor, pivots, _, _ = _lu(a, t)
    sign, logabs = fz.slogdet(factor, pivots)
    real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
    return np.linalg._linalg.SlogdetResult(_scalar(_out(sign, rt)), _scalar(_out(logabs, real)))


@implements(np.linalg.det)
def det(a):
    a = asarray_like(a)
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a)
    if not _lazy("lu", a):
        return _numpy(np.linalg.det, (a,), {})
    factor, pivots, _, _ = _lu(a, t)
    return _scalar(_out(fz.det(factor, pivots), rt))


def _scalar(r: ndarray):
    from .scalars import result

    return result(r)


@implements(np.linalg.eigh)
def eigh(a, UPLO="L"):
    a = asarray_like(a)
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a)
    if not _lazy("eigh", a):
        return _numpy(np.linalg.eigh, (a,), dict(UPLO=UPLO))
    vectors, values, info = core.apply("eigh", _in(a, t), lower=UPLO == "L")
    real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
    message = "Eigenvalues did not converge"
    return np.linalg._linalg.EighResult(_out(_checked(values, info, message), real),
                                        _out(_checked(vectors, info, message), rt))


@implements(np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    a = asarray_like(a)
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    _stacked_2d(a)
    _stacked_square(a)
    t, rt = _types(a)
    if not _lazy("eigh", a):
        return _numpy(np.linalg.eigvalsh, (a,), dict(UPLO=UPLO))
    _, values, info = core.apply("eigh", _in(a, t), lower=UPLO == "L")
    real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
    return _out(_checked(values, info, "Eigenvalues did not converge"), real)


def _svd(a: ndarray, t, full_matrices: bool):
    s, u, vt, info = core.apply("svd", _in(a, t), full_matrices=full_matrices)
    message = "SVD did not converge"
    return _checked(s, info, message), _checked(u, info, message), _checked(vt, info, message)


@implements(np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    a = asarray_like(a)
    _stacked_2d(a)
    t, rt = _types(a)
    if hermitian or not _lazy("svd", a):
        return _numpy(np.linalg.svd, (a,), dict(full_matrices=full_matrices, compute_uv=compute_uv,
                                                hermitian=hermitian))
    real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
    s, u, vt = _svd(a, t, bool(full_matrices) and bool(compute_uv))
    if not compute_uv:
        return _out(s, real)
    return np.linalg._linalg.SVDResult(_out(u, rt), _out(s, real), _out(vt, rt))


@implements(np.linalg.svdvals)
def svdvals(x, /):
    return svd(x, compute_uv=False, hermitian=False)


@implements(np.linalg.qr)
def qr(a, mode="reduced"):
    a = asarray_like(a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    _stacked_2d(a)
    t, rt = _types(a)
    if mode == "raw" or not _lazy("geqrf", a):
        return _numpy(np.linalg.qr, (a,), dict(mode=mode))
    q, r = fz.qr(_in(a, t), mode)
    if mode == "r":
        return _out(r, rt)
    return np.linalg._linalg.QRResult(_out(q, rt), _out(r, rt))


def _cutoff(s, rcond: float):
    """rcond * the largest singular value, per matrix (batch + (1,))."""
    top = core.apply("reduce_max", s, dims=(len(s.shape) - 1,))
    top = core.apply("reshape", top, shape=tuple(top.shape) + (1,))
    return core.apply("mul", top, core.broadcast_to(
        core.apply("constant", value=np.asarray(rcond, dtype=dtypes.TO_NUMPY[top.dtype]), device=s.device), top.shape))


_NO_VALUE = np._NoValue


@implements(np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=_NO_VALUE):
    a = asarray_like(a)
    _stacked_2d(a)
    t, rt = _types(a)
    m, n = a.shape[-2:]
    if rcond is None:
        rcond = 1e-15 if rtol is _NO_VALUE else (max(m, n) * np.finfo(t).eps if rtol is None else rtol)
    if hermitian or np.ndim(rcond) or isinstance(rcond, ndarray) or not _lazy("svd", a):
        kw = dict(rcond=rcond, hermitian=hermitian)
        return _numpy(np.linalg.pinv, (a,), kw)
    # (NumPy takes the SVD of conj(a) and transposes without conjugating: V S^+ U^H of a itself)
    s, u, vt = _svd(a, t, False)
    return _out(fz.pinv(u, s, vt, _cutoff(s, float(rcond))), rt)


@implements(np.linalg.matrix_rank)
def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    A = asarray_like(A)
    if A.ndim < 2 or hermitian or (tol is not None and np.ndim(tol)) or np.ndim(rtol) or not _lazy("svd", A):
        return _numpy(np.linalg.matrix_rank, (A,), dict(tol=tol, hermitian=hermitian, rtol=rtol))
    t, rt = _types(A)
    s, _, _ = _svd(A, t, False)
    real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
    s = cast(s, real)  # NumPy compares in the result's precision
    if tol is None:
        cutoff = _cutoff(s, max(A.shape[-2:]) * float(np.finfo(real).eps) if rtol is None else float(rtol))
    else:
        tol = core.apply("constant", value=np.asarray(tol, dtype=real), device=s.device)
        cutoff = core.broadcast_to(tol, tuple(s.shape[:-1]) + (1,))
    above = core.apply("compare", s, core.broadcast_to(cutoff, s.shape), direction="GT")
    count = core.apply("reduce_sum", core.convert_to(above, "i64"), dims=(len(s.shape) - 1,))
    return _scalar(wrap(count))


@implements(np.linalg.lstsq)
def lstsq(a, b, rcond=None):
    """NumPy's ``lstsq`` (LAPACK's ``gelsd``): the minimum-norm solution from the SVD of
    ``a`` in double precision, singular values at most ``rcond`` times the largest
    dropped. The rank is a value read (NumPy returns it as an integer, and gives the
    residuals only when the rank is full). Empty operands and array-valued ``rcond``
    run NumPy (counted)."""
    a, b = asarray_like(a), asarray_like(b)
    vector = b.ndim == 1
    if a.ndim != 2 or b.ndim not in (1, 2):
        dims = a.ndim if a.ndim != 2 else b.ndim
        raise LinAlgError(f"{dims}-dimensional array given. Array must be two-dimensional")
    m, n = a.shape
    if m != b.shape[0]:
        raise LinAlgError("Incompatible dimensions")
    t, rt = _types(a, b)
    if rcond is None:
        rcond = float(np.finfo(t).eps) * max(n, m)
    if np.ndim(rcond) or isinstance(rcond, ndarray) or not _lazy("svd", a, b):
        return _numpy(np.linalg.lstsq, (a, b), dict(rcond=rcond))
    real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
    rhs = _in(b, t)
    if vector:
        rhs = core.apply("reshape", rhs, shape=(m, 1))
    s, u, vt = _svd(a, t, False)
    cutoff = _cutoff(s, float(rcond))
    x = fz.matmul(fz.pinv(u, s, vt, cutoff), rhs)
    above = core.apply("compare", s, core.broadcast_to(cutoff, s.shape), direction="GT")
    rank = np.int32(int(wrap(core.apply("reduce_sum", core.convert_to(above, "i32"), dims=(0,)))))
    if rank != n or m <= n:
        resids = wrap(core.apply("constant", value=np.array([], real), device=s.device))
    else:
        r = core.apply("sub", fz.matmul(_in(a, t), x), rhs)
        if t.kind == "c":
            r = core.apply("abs", r)
        resids = _out(core.apply("reduce_sum", core.apply("mul", r, r), dims=(0,)), real)
    if vector:
        x = core.apply("reshape", x, shape=(n,))
    return _out(x, rt), resids, rank, _out(s, real)


@implements(np.linalg.cond)
def cond(x, p=None):
    """NumPy's ``cond``: the ratio of the extreme singular values (``p`` None, 2, -2),
    else ``norm(x, p) * norm(inv(x), p)``; a NaN that no NaN of ``x`` explains
    (a singular matrix) is infinity."""
    from .manipulation import where
    from .ufuncs import UFUNCS

    x = asarray_like(x)
    _stacked_2d(x)
    if x.size == 0:
        raise LinAlgError("cond is not defined on empty arrays")
    if p is None or p in (2, -2):
        s = svd(x, compute_uv=False)
        with np.errstate(all="ignore"):
            r = s[..., -1] / s[..., 0] if p == -2 else s[..., 0] / s[..., -1]
    else:
        _stacked_square(x)
        _, rt = _types(x)
        real = np.dtype(rt.char.lower()) if rt.kind == "c" else rt
        t, _ = _types(x)
        if not _lazy("lu", x):
            return _numpy(np.linalg.cond, (x,), dict(p=p))
        # NumPy's inverse of a singular matrix is NaNs (under errstate), hence cond's infinity
        h, info = _inverse(x, t)
        fail = core.apply("reshape", fz.failed(info), shape=tuple(info.shape) + (1, 1))
        h = core.apply("select", core.broadcast_to(fail, h.shape),
                       core.broadcast_to(core.apply("constant", value=np.asarray(np.nan, dtypes.TO_NUMPY[h.dtype]),
                                                    device=h.device), h.shape), h)
        with np.errstate(all="ignore"):
            # np.linalg.norm's lazy form, through NumPy's protocol: linalg imports this module
            r = (np.linalg.norm(x, p, axis=(-2, -1)) * np.linalg.norm(_out(h, rt), p, axis=(-2, -1))).astype(
                real, copy=False)
    isnan = UFUNCS["isnan"]
    unexplained = isnan(r) & ~isnan(x).any(axis=(-2, -1))
    r = where(unexplained, np.asarray(np.inf, r.dtype), r)
    return _scalar(r) if r.ndim == 0 else r


__all__ = ["cholesky", "cond", "det", "eigh", "eigvalsh", "inv", "lazy_svd", "lstsq", "matrix_rank", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals"]
