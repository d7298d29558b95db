"""Linear algebra both frontends build from the factorization ops, written once.

The ``lazy`` dialect has the factorizations (``cholesky``, ``lu``,
``geqrf``/``householder_product``, ``eigh``, ``svd``), ``pivots_to_permutation`` and
``triangular_solve`` (:mod:`lazycore.dialect.factorizations`); solving,
inverting, determinants and pseudo-inverses are formulas over them, the
formulas LAPACK's drivers use (getrs after getrf, det from U's diagonal and
the swaps' parity). Handles hold batches of matrices in their last two
dimensions, of a type the ops take (f32, f64, complex); frontends promote,
broadcast batches and check shapes first, and turn ``info`` into their
library's error with ``core.check``.
"""

from __future__ import annotations

from lazycore.dialect.factorizations import LAPACK_DTYPES, LAPACK_PLATFORMS
from lazycore.dialect.types import is_complex
from lazycore.trace.composites import conj, constant, full_like
from lazycore.trace.core import apply, broadcast_to, convert_to

ANYWHERE = ("cholesky", "triangular_solve", "pivots_to_permutation")
"""The ops every platform lowers; the others lower on :data:`LAPACK_PLATFORMS` only."""


def lowered(op: str, device, dtype: str) -> bool:
    """Whether ``lazy.<op>`` on ``dtype`` has a lowering for ``device``'s
    platform (else a frontend answers on the host)."""
    return dtype in LAPACK_DTYPES and (op in ANYWHERE or device.platform in LAPACK_PLATFORMS)


def failed(info):
    """Where LAPACK's ``info`` says the factorization did not go through (i1, info's shape)."""
    return apply("compare", info, full_like(info, 0), direction="NE")


def lu(a):
    """``lazy.lu`` of ``a`` and the permutation its pivots make: (factor, pivots, permutation, info)."""
    factor, pivots, info = apply("lu", a)
    return factor, pivots, apply("pivots_to_permutation", pivots, size=a.shape[-2]), info


def transpose(h, conjugate: bool = False):
    """The matrices transposed (conjugated too: the adjoint)."""
    rank = len(h.shape)
    t = apply("permute", h, dims=tuple(range(rank - 2)) + (rank - 1, rank - 2))
    return conj(t) if conjugate else t


def diagonal(h):
    """The matrices' main diagonals (batch + (min(m, n),))."""
    *batch, m, n = h.shape
    k = min(m, n)
    square = apply("slice", h, start=(0,) * len(h.shape), limit=tuple(batch) + (k, k), strides=(1,) * len(h.shape))
    rows = apply("iota", dim=len(h.shape) - 2, shape=square.shape, dtype="i32", device=h.device)
    cols = apply("iota", dim=len(h.shape) - 1, shape=square.shape, dtype="i32", device=h.device)
    on = apply("compare", rows, cols, direction="EQ")
    return apply("reduce_sum", apply("select", on, square, full_like(square, 0)), dims=(len(h.shape) - 1,))


def matmul(a, b):
    """Batched matrix products (both of one batch)."""
    rank = len(a.shape)
    batch = tuple(range(rank - 2))
    return apply("dot_general", a, b, lhs_batch=batch, rhs_batch=batch, lhs_contract=(rank - 1,),
                 rhs_contract=(rank - 2,))


def permute_rows(perm, b):
    """``b``'s rows in the order ``perm`` (i32, batch + (m,)) gives: row r of
    the result is row perm[r] of ``b``, as a product with the permutation
    matrix (exact: one 1 a row)."""
    m = perm.shape[-1]
    shape = tuple(perm.shape) + (m,)
    rows = broadcast_to(apply("reshape", perm, shape=tuple(perm.shape) + (1,)), shape)
    cols = apply("iota", dim=len(shape) - 1, shape=shape, dtype="i32", device=perm.device)
    p = convert_to(apply("compare", rows, cols, direction="EQ"), b.dtype)
    return matmul(p, b)


def lu_solve(factor, perm, b, adjoint: bool = False):
    """X with A X = B (A^H X = B with ``adjoint``), from A's ``lu``: P A = L U."""
    if not adjoint:
        y = _solve(factor, permute_rows(perm, b), lower=True, unit=True)
        return _solve(factor, y, lower=False)
    # A^H = U^H L^H P: solve U^H y = b, L^H z = y, then x = P^T z
    y = _solve(factor, b, lower=False, transpose="ADJOINT" if is_complex(b.dtype) else "TRANSPOSE")
    z = _solve(factor, y, lower=True, unit=True, transpose="ADJOINT" if is_complex(b.dtype) else "TRANSPOSE")
    return matmul(transpose(_permutation_matrix(perm, b.dtype)), z)


def _permutation_matrix(perm, dtype):
    m = perm.shape[-1]
    shape = tuple(perm.shape) + (m,)
    rows = broadcast_to(apply("reshape", perm, shape=tuple(perm.shape) + (1,)), shape)
    cols = apply("iota", dim=len(shape) - 1, shape=shape, dtype="i32", device=perm.device)
    return convert_to(apply("compare", rows, cols, direction="EQ"), dtype)


def _solve(a, b, lower: bool, unit: bool = False, transpose: str = "NO_TRANSPOSE", left: bool = True):
    return apply("triangular_solve", a, b, left_side=left, lower=lower, transpose_a=transpose, unit_diagonal=unit)


def solve_triangular(a, b, lower: bool, unit: bool = False, transpose: str = "NO_TRANSPOSE", left: bool = True):
    return _solve(a, b, lower, unit, transpose, left)


def swaps_parity(pivots):
    """Per matrix, whether its row swaps (0-based ``pivots``) number odd (i1)."""
    steps = apply("iota", dim=len(pivots.shape) - 1, shape=pivots.shape, dtype="i32", device=pivots.device)
    moved = convert_to(apply("compare", pivots, steps, direction="NE"), "i32")
    count = apply("reduce_sum", moved, dims=(len(pivots.shape) - 1,))
    return apply("compare", apply("rem", count, full_like(count, 2)), full_like(count, 1), direction="EQ")


def slogdet(factor, pivots):
    """(sign, log|det|) of A from its ``lu``: sign is 0 and log|det| -inf for
    a singular A; sign is a unit complex number for complex A."""
    d = diagonal(factor)
    magnitude = apply("abs", d)  # real
    logabs = apply("reduce_sum", apply("log", magnitude), dims=(len(d.shape) - 1,))
    zero = apply("compare", magnitude, full_like(magnitude, 0), direction="EQ")
    if is_complex(d.dtype):
        unit = apply("div", d, apply("complex", magnitude, full_like(magnitude, 0)))
    else:
        unit = apply("sign", d)
    unit = apply("select", zero, full_like(unit, 0), unit)
    sign = apply("reduce_prod", unit, dims=(len(d.shape) - 1,))
    odd = swaps_parity(pivots)
    sign = apply("select", odd, apply("neg", sign), sign)
    return sign, logabs


def det(factor, pivots):
    """det A = sign * exp(log|det|), as NumPy's det computes it."""
    sign, logabs = slogdet(factor, pivots)
    scale = apply("exp", logabs)
    if is_complex(sign.dtype):
        scale = apply("complex", scale, full_like(scale, 0))
    return apply("mul", sign, scale)


def identity(dtype: str, device, batch, n: int):
    """Identity matrices of ``batch``."""
    shape = tuple(batch) + (n, n)
    rows = apply("iota", dim=len(shape) - 2, shape=shape, dtype="i32", device=device)
    cols = apply("iota", dim=len(shape) - 1, shape=shape, dtype="i32", device=device)
    return convert_to(apply("compare", rows, cols, direction="EQ"), dtype)


def triangle(h, upper: bool, diagonal_offset: int = 0):
    """``h`` with the entries outside its upper (lower) triangle zeroed."""
    shape = h.shape
    rows = apply("iota", dim=len(shape) - 2, shape=shape, dtype="i32", device=h.device)
    cols = apply("iota", dim=len(shape) - 1, shape=shape, dtype="i32", device=h.device)
    if diagonal_offset:
        rows = apply("add", rows, full_like(rows, diagonal_offset))
    keep = apply("compare", cols, rows, direction="GE" if upper else "LE")
    return apply("select", keep, h, full_like(h, 0))


def qr(a, mode: str):
    """Q and R (``mode``: ``reduced``, ``complete`` or ``r``: R alone, Q None)
    from Householder QR, as LAPACK's geqrf + orgqr."""
    *batch, m, n = a.shape
    k = min(m, n)
    factor, taus = apply("geqrf", a)
    rank = len(a.shape)
    rows = k if mode in ("reduced", "r") else m
    r = triangle(_slice_last(factor, rows, n), upper=True) if rows <= m else None
    if mode == "r":
        return None, r
    cols = k if mode == "reduced" else m
    if cols <= n:
        q_in = _slice_last(factor, m, cols)
    else:  # complete Q of a tall matrix: the reflectors and zero columns after them
        pad = constant(0, a.dtype, a.device, tuple(batch) + (m, cols - n))
        q_in = apply("concatenate", factor, pad, dim=rank - 1)
    return apply("householder_product", q_in, taus), r


def _slice_last(h, rows: int, cols: int):
    rank = len(h.shape)
    return apply("slice", h, start=(0,) * rank, limit=tuple(h.shape[:-2]) + (rows, cols), strides=(1,) * rank)


def pinv(u, s, vt, cutoff):
    """V diag(1/s where s > cutoff, else 0) U^H from a reduced SVD (``cutoff``:
    real, batch + (1,))."""
    large = apply("compare", s, broadcast_to(cutoff, s.shape), direction="GT")
    inv = apply("select", large, apply("div", full_like(s, 1), s), full_like(s, 0))
    if is_complex(u.dtype):
        inv = apply("complex", inv, full_like(inv, 0))
    scaled = apply("mul", transpose(u, conjugate=True),
                   broadcast_to(apply("reshape", inv, shape=tuple(inv.shape) + (1,)), tuple(inv.shape) + (u.shape[-2],)))
    return matmul(transpose(vt, conjugate=True), scaled)


__all__ = ["ANYWHERE", "det", "diagonal", "failed", "identity", "lowered", "lu", "lu_solve", "matmul", "permute_rows",
           "pinv", "qr", "slogdet", "solve_triangular", "swaps_parity", "transpose", "triangle"]
