"""torch.linalg's factorizations and solvers on the lazy device.

Each ATen op is the factorization op it stands on
(:mod:`lazycore.trace.factorizations`), in the input's precision as eager's
CPU kernels compute (LAPACK in float32 for float32). Pivots are LAPACK's,
1-based int32, as eager returns them. The ``_ex`` ops return ``info`` and
raise nothing, as eager's do; the ops that raise on their own (``cholesky``,
``cholesky_inverse``'s factor aside) fail at the barrier with eager's
message, as a ``RuntimeError`` (``torch.linalg.LinAlgError``'s base). The
check ``torch.linalg.cholesky``, ``inv`` and ``solve`` make after their
``_ex`` op (``aten._linalg_check_errors``) returns no tensor to attach a
value check to: it is a step check (:mod:`lazycore.trace.stepchecks`;
``lazycore.frontends.torch.step_checks.linalg_check_errors``), so
the step is not cut: where ``info`` is not 0 the barrier raises what eager's
kernel raises for that ``info`` (``torch.linalg.LinAlgError``, its message
naming the minor or the diagonal element) and the step's state stays as it
was at the call.

Other element types, platforms without the op, and the arguments not
covered here (``pivot=False``, ``left=False`` solves, ``driver=`` choices
other than the default) go to eager's kernel (counted fallbacks). Eigenvectors and singular vectors
are LAPACK's, whose signs are left to the implementation (``_eigh`` says how
they compare with eager's).
"""

from __future__ import annotations

import torch

from lazycore.dialect.types import is_complex
from lazycore.trace import core
from lazycore.trace import factorizations as fz

from ..lowering import apply, const, convert, lowers
from ..step_checks import info_check

aten = torch.ops.aten


def _ok(op: str, ctx, *hs) -> bool:
    return all(fz.lowered(op, ctx.device, h.dtype) for h in hs) and all(min(h.shape[-2:]) > 0 for h in hs)


def _pivots(p):
    """0-based pivots as LAPACK's 1-based ones."""
    return apply("add", p, const(1, "i32", p.device, p.shape))


def _empty(ctx, i):
    out = ctx.out[i]
    from ..dtypes import lazy_dtype

    return const(0, lazy_dtype(out.dtype), ctx.device, tuple(out.shape))


_NOT_PD = ("linalg.cholesky: The factorization could not be completed because the input is not "
           "positive-definite.")


@lowers(aten.linalg_cholesky_ex.default)
def _cholesky_ex(ctx, a, upper=False, check_errors=False):
    if not _ok("cholesky", ctx, a):
        return NotImplemented
    factor, info = apply("cholesky", a)
    if upper:
        factor = fz.transpose(factor, conjugate=True)
    if check_errors:
        factor = core.check(factor, fz.failed(info), _NOT_PD, "RuntimeError")
    return factor, info


@lowers(aten.cholesky.default)
def _cholesky(ctx, a, upper=False):
    if not _ok("cholesky", ctx, a):
        return NotImplemented
    factor, info = apply("cholesky", a)
    if upper:
        factor = fz.transpose(factor, conjugate=True)
    return core.check(factor, fz.failed(info), _NOT_PD.replace("linalg.cholesky", "cholesky"), "RuntimeError")


def _factors_transpose(ctx) -> bool:
    """Whether eager factors A^T rather than A (det and slogdet do for a
    contiguous real A: it needs no copy into LAPACK's column order). The LU
    and pivots those ops return are the transpose's, and their backward
    formulas solve with them accordingly."""
    a = ctx.margs[0]
    return a.is_contiguous() and not a.is_complex()


def _broadcast_pair(a, b, b_core: int):
    """``a`` and ``b`` broadcast to one batch (``b_core``: b's matrix dims, 1 or 2)."""
    batch = tuple(torch.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:len(b.shape) - b_core])))
    return core.broadcast_to(a, batch + tuple(a.shape[-2:])), core.broadcast_to(b, batch + tuple(b.shape[-b_core:]))


@lowers(aten._linalg_solve_ex.default)
def _solve_ex(ctx, a, b, left=True, check_errors=False):
    if not left or not _ok("lu", ctx, a) or b.dtype != a.dtype:
        return NotImplemented
    n = a.shape[-1]
    # eager's rule: b is a batch of vectors when it is one, or has a's batch dims less one
    vector = len(b.shape) == 1 or (len(b.shape) == len(a.shape) - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    lu_out = ctx.out[1]
    factor, pivots, perm, info = fz.lu(core.broadcast_to(a, tuple(lu_out.shape)))
    batch = tuple(lu_out.shape[:-2])
    rhs = core.apply("reshape", b, shape=tuple(b.shape) + (1,)) if vector else b
    rhs = core.broadcast_to(rhs, batch + (n, rhs.shape[-1]))
    x = fz.lu_solve(factor, perm, rhs)
    x = core.apply("reshape", x, shape=tuple(ctx.out[0].shape))
    if check_errors:
        x = core.check(x, fz.failed(info), "torch.linalg.solve: The solver failed because the input matrix is "
                       "singular.", "RuntimeError")
    return x, factor, _pivots(pivots), info


@lowers(aten.linalg_solve_triangular.default)
def _solve_triangular(ctx, a, b, *, upper, left=True, unitriangular=False):
    if not _ok("triangular_solve", ctx, a) or b.dtype != a.dtype:
        return NotImplemented
    a, b = _broadcast_pair(a, b, 2)
    return fz.solve_triangular(a, b, lower=not upper, unit=unitriangular, left=left)


@lowers(aten.linalg_inv_ex.default)
def _inv_ex(ctx, a, check_errors=False):
    if not _ok("lu", ctx, a):
        return NotImplemented
    factor, _, perm, info = fz.lu(a)
    x = fz.lu_solve(factor, perm, fz.identity(a.dtype, a.device, a.shape[:-2], a.shape[-1]))
    if check_errors:
        x = core.check(x, fz.failed(info), "linalg.inv: The diagonal element 1 is zero, the inversion could not "
                       "be completed because the input matrix is singular.", "RuntimeError")
    return x, info


@lowers(aten.linalg_lu_factor_ex.default)
def _lu_factor_ex(ctx, a, pivot=True, check_errors=False):
    if not pivot or check_errors or not _ok("lu", ctx, a):
        return NotImplemented
    factor, pivots, _, info = fz.lu(a)
    return factor, _pivots(pivots), info


@lowers(aten.linalg_lu_solve.default)
def _lu_solve(ctx, factor, pivots, b, left=True, adjoint=False):
    if not left or not _ok("lu", ctx, factor) or b.dtype != factor.dtype:
        return NotImplemented
    factor, b = _broadcast_pair(factor, b, 2)
    batch = tuple(factor.shape[:-2])
    pivots = core.broadcast_to(pivots, batch + tuple(pivots.shape[-1:]))
    zero_based = apply("sub", pivots, const(1, "i32", pivots.device, pivots.shape))
    perm = apply("pivots_to_permutation", zero_based, size=factor.shape[-1])
    return fz.lu_solve(factor, perm, b, adjoint=adjoint)


@lowers(aten.linalg_pinv.atol_rtol_tensor, aten.linalg_pinv.atol_rtol_float)
def _pinv(ctx, a, *, atol=None, rtol=None, hermitian=False):
    if hermitian or atol is not None or (rtol is not None and not isinstance(rtol, float)) or not _ok("svd", ctx, a):
        return NotImplemented
    s, u, vt, _ = apply("svd", a, full_matrices=False)
    m, n = a.shape[-2:]
    if rtol is None:
        rtol = max(m, n) * torch.finfo(ctx.out.dtype).eps
    top = apply("reduce_max", s, dims=(len(s.shape) - 1,))
    top = core.apply("reshape", top, shape=tuple(top.shape) + (1,))
    cutoff = apply("mul", top, const(rtol, top.dtype, top.device, top.shape))
    return fz.pinv(u, s, vt, cutoff)


@lowers(aten.linalg_lu.default)
def _lu(ctx, a, pivot=True):
    if not pivot or not _ok("lu", ctx, a):
        return NotImplemented
    *batch, m, n = a.shape
    k = min(m, n)
    factor, _, perm, _ = fz.lu(a)
    below = _slice(factor, m, k)
    lower = apply("add", fz.triangle(below, upper=False, diagonal_offset=-1), _unit(below))
    upper = fz.triangle(_slice(factor, k, n), upper=True)
    # A = P L U with eager's P, the transpose of the one taking A's rows to P A's
    p = fz.transpose(fz.permute_rows(perm, fz.identity(a.dtype, a.device, batch, m)))
    return p, lower, upper


def _slice(h, rows, cols):
    rank = len(h.shape)
    return apply("slice", h, start=(0,) * rank, limit=tuple(h.shape[:-2]) + (rows, cols), strides=(1,) * rank)


def _unit(h):
    """Ones on the main diagonal of ``h``'s shape, zeros elsewhere."""
    shape = tuple(h.shape)
    rows = apply("iota", dim=len(shape) - 2, shape=shape, dtype="i32", device=h.device)
    cols = apply("iota", dim=len(shape) - 1, shape=shape, dtype="i32", device=h.device)
    return convert(apply("compare", rows, cols, direction="EQ"), h.dtype)


@lowers(aten._linalg_det.default)
def _det(ctx, a):
    if not _ok("lu", ctx, a):
        return NotImplemented
    factor, pivots, _, _ = fz.lu(fz.transpose(a) if _factors_transpose(ctx) else a)
    return _det_value(factor, pivots), factor, _pivots(pivots)


def _det_value(factor, pivots):
    """The product of U's diagonal, its sign flipped for an odd number of swaps (eager's det)."""
    d = fz.diagonal(factor)
    prod = apply("reduce_prod", d, dims=(len(d.shape) - 1,))
    return apply("select", fz.swaps_parity(pivots), apply("neg", prod), prod)


@lowers(aten._linalg_slogdet.default)
def _slogdet(ctx, a):
    if not _ok("lu", ctx, a):
        return NotImplemented
    factor, pivots, _, _ = fz.lu(fz.transpose(a) if _factors_transpose(ctx) else a)
    sign, logabs = fz.slogdet(factor, pivots)
    return sign, logabs, factor, _pivots(pivots)


@lowers(aten.linalg_qr.default)
def _qr(ctx, a, mode="reduced"):
    if not _ok("geqrf", ctx, a):
        return NotImplemented
    q, r = fz.qr(a, mode)
    return (_empty(ctx, 0) if q is None else q), r


@lowers(aten.geqrf.default)
def _geqrf(ctx, a):
    if not _ok("geqrf", ctx, a):
        return NotImplemented
    return apply("geqrf", a)


@lowers(aten.linalg_householder_product.default)
def _householder_product(ctx, a, taus):
    if not _ok("householder_product", ctx, a) or taus.dtype != a.dtype:
        return NotImplemented
    return apply("householder_product", a, taus)


@lowers(aten._linalg_eigh.default)
def _eigh(ctx, a, UPLO="L", compute_v=True):
    # Eigenvectors are LAPACK's syevd/heevd's as jaxlib's handler computes
    # them (SciPy's OpenBLAS, as NumPy's eigh): the same vectors as eager's
    # MKL up to each one's sign (phase), which LAPACK leaves to the
    # implementation. MKL's signs are the reference's where both divide and
    # conquer, n >= 26 (random symmetric matrices, 20 a size: float64 20 of
    # 20 at n = 26, 40; float32 20 and 16), and differ for most matrices of
    # 3 <= n <= 25 (n = 4: 5-7 of 20 differ, 8 to 25: 18-20), where the
    # reference's QL/QR iteration (and syev, syevr, syevx) is not MKL's; as
    # the singular vectors of _svd differ for some shapes. Sign-free uses
    # (eigvalsh and its gradient, scikit-learn's PCA after svd_flip, RidgeCV's
    # Q diag Q^T) give eager's answers.
    if fz.lowered("eigh", ctx.device, a.dtype) and 0 in a.shape:  # (nothing to factor: eager's empty results)
        return _empty(ctx, 0), _empty(ctx, 1)
    if not _ok("eigh", ctx, a):
        return NotImplemented
    vectors, values, info = apply("eigh", a, lower=UPLO == "L")
    info_check(info, "linalg.eigh", len(a.shape) == 2)  # (a NaN input: LAPACK did not converge)
    return values, (vectors if compute_v else _empty(ctx, 1))


@lowers(aten._linalg_svd.default)
def _svd(ctx, a, full_matrices=False, compute_uv=True, driver=None):
    # Singular vectors are jaxlib's LAPACK gesdd's. Eager's MKL gesdd gives
    # the same signs for some shapes and not others, by no rule the available
    # handlers reproduce (20 random m x n matrices a shape, float32 and
    # float64 alike; every singular vector's sign against eager's): the
    # reference gesdd agrees for tall m >= 11n/6 (LAPACK's QR-first path:
    # 5x3, 7x2, 12x6, 50x5, 200x30), square (4, 8, 40) and wide n < 11m/6
    # (6x10, 6x9, 20x30, 60x100); for tall m < 11n/6 (10x6, 9x6, 30x20) it
    # is the reference gesvd that agrees at 10x6 and 9x6, neither at 30x20,
    # gesdd in part at 100x60 (12 of 20 float64, 5 float32); for wide
    # n >= 11m/6 (LQ-first: 3x5, 2x7, 6x12, 5x50: scikit-learn LDA's
    # scalings) neither gesdd nor gesvd, of the matrix or of its transpose
    # (0-7 of 20; MKL flips mostly the first vector, not always), and gesdd
    # in part at 30x200 (12 and 17 of 20). The values and sign-free uses are
    # eager's.
    if driver not in (None, "gesdd") or not _ok("svd", ctx, a):
        return NotImplemented
    s, u, vt, _ = apply("svd", a, full_matrices=bool(full_matrices and compute_uv))
    if not compute_uv:
        return _empty(ctx, 0), s, _empty(ctx, 2)
    return u, s, vt


@lowers(aten.cholesky_solve.default)
def _cholesky_solve(ctx, b, factor, upper=False):
    if not _ok("triangular_solve", ctx, factor) or b.dtype != factor.dtype:
        return NotImplemented
    factor, b = _broadcast_pair(factor, b, 2)
    adjoint = "ADJOINT" if is_complex(b.dtype) else "TRANSPOSE"
    if upper:  # A = U^H U
        y = fz.solve_triangular(factor, b, lower=False, transpose=adjoint)
        return fz.solve_triangular(factor, y, lower=False)
    y = fz.solve_triangular(factor, b, lower=True)
    return fz.solve_triangular(factor, y, lower=True, transpose=adjoint)

