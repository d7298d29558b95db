"""Matrix factorizations: Cholesky, LU, Householder QR, symmetric eigenvalues, SVD, triangular solves.

Each op factors the innermost two dimensions of its operand; the dimensions
before them are a batch, factored matrix by matrix. They take the element
types LAPACK does (f32, f64, complex<f32>, complex<f64>) and matrices of at least one row and
column (a frontend answers an empty matrix itself). An ``info`` result holds
LAPACK's status per matrix (i32, the batch's shape): 0 when the
factorization went through, else LAPACK's positive code (which leading minor
is not positive definite, which pivot is exactly zero, how many eigenvalues
or singular values did not converge); a frontend turns it into eager's error
with ``lazy.check``. The factors of a matrix whose ``info`` is not 0 are
unspecified.

On the CPU they lower to LAPACK through XLA's registered FFI handlers, as
jax lowers them; ``cholesky`` and ``triangular_solve`` lower to StableHLO's
own ops on any other platform (``pivots_to_permutation`` is a loop of
StableHLO everywhere), the others only on :data:`LAPACK_PLATFORMS`
(frontends answer them on the host elsewhere).
"""

from __future__ import annotations

from .spec import op
from .types import ShapeError, TensorType, is_complex, real_dtype

LAPACK_DTYPES = ("f32", "f64", "complex<f32>", "complex<f64>")

LAPACK_PLATFORMS = ("cpu",)
"""Platforms where every op here has a lowering (LAPACK's); elsewhere only
``cholesky`` and ``triangular_solve`` do."""

TRANSPOSES = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def _matrices(x: TensorType, what: str = "operand", square: bool = False) -> tuple[tuple[int, ...], int, int]:
    if x.dtype not in LAPACK_DTYPES:
        raise ShapeError(f"{what} must have element type {', '.join(LAPACK_DTYPES)}, got {x.dtype}")
    if x.rank < 2:
        raise ShapeError(f"{what} must have rank >= 2 (a batch of matrices), got {x}")
    *batch, m, n = x.shape
    if m < 1 or n < 1:
        raise ShapeError(f"{what} matrices must have at least one row and column, got {x}")
    if square and m != n:
        raise ShapeError(f"{what} matrices must be square, got {x}")
    return tuple(batch), m, n


def _info(batch) -> TensorType:
    return TensorType(tuple(batch), "i32")


# (each result mixes every position of its matrix: padding cannot pad a factorization)
@op("cholesky", ("operand",), results=("factor", "info"), padding="refused")
def _cholesky(x: TensorType):
    """The Cholesky factor L (A = L L^H) of each Hermitian positive-definite
    matrix, read from its lower triangle; the factor's strict upper triangle
    is zero. info: k > 0 when the leading minor of order k is not positive definite."""
    batch, _, _ = _matrices(x, square=True)
    return x, _info(batch)


@op("lu", ("operand",), results=("factor", "pivots", "info"), padding="refused")
def _lu(x: TensorType):
    """LU factorization with partial pivoting (LAPACK's getrf), P A = L U:
    the factor holds L's strict lower part (unit diagonal implied) and U;
    pivots (i32, min(m, n) per matrix) are 0-based: row i was swapped with
    row pivots[i], in order. info: k > 0 when U[k-1, k-1] is exactly zero."""
    batch, m, n = _matrices(x)
    return x, TensorType(batch + (min(m, n),), "i32"), _info(batch)


@op("pivots_to_permutation", ("pivots",), attrs={"size": "i64"}, padding="refused")
def _pivots_to_permutation(pivots: TensorType, *, size):
    """The rows of A that LU's row swaps (0-based pivots: row i with row
    pivots[i], i = 0, 1, ...) bring to each of the size rows of P A (i32)."""
    if pivots.dtype != "i32" or pivots.rank < 1:
        raise ShapeError(f"pivots must be i32 of rank >= 1, got {pivots}")
    if size < pivots.shape[-1]:
        raise ShapeError(f"size must be at least the number of pivots ({pivots.shape[-1]}), got {size}")
    return TensorType(pivots.shape[:-1] + (size,), "i32")


@op("geqrf", ("operand",), results=("factor", "taus"), padding="refused")
def _geqrf(x: TensorType):
    """Householder QR (LAPACK's geqrf): R in the factor's upper triangle,
    the reflectors' vectors below it, and their scales taus (min(m, n) per matrix)."""
    batch, m, n = _matrices(x)
    return x, TensorType(batch + (min(m, n),), x.dtype)


@op("householder_product", ("factor", "taus"), padding="refused")
def _householder_product(a: TensorType, taus: TensorType):
    """The m x n matrix Q with orthonormal columns that the reflectors of
    geqrf's factor a (m >= n) and their scales taus (k <= n per matrix) make
    (LAPACK's orgqr/ungqr): the first n columns of H_1 ... H_k."""
    batch, m, n = _matrices(a, "factor")
    if m < n:
        raise ShapeError(f"factor matrices must have m >= n, got {a}")
    if taus.dtype != a.dtype or taus.shape[:-1] != batch or taus.rank != a.rank - 1 or taus.shape[-1] > n:
        raise ShapeError(f"taus must be {a.dtype} of shape {list(batch)} + [k <= {n}], got {taus}")
    return a


@op("eigh", ("operand",), attrs={"lower": "bool"}, results=("vectors", "values", "info"), padding="refused")
def _eigh(x: TensorType, *, lower):
    """Eigenvalues (ascending, real) and orthonormal eigenvectors (columns)
    of each Hermitian matrix, read from its lower (or upper) triangle. info:
    k > 0 when k eigenvalues did not converge."""
    batch, n, _ = _matrices(x, square=True)
    return x, TensorType(batch + (n,), real_dtype(x.dtype) if is_complex(x.dtype) else x.dtype), _info(batch)


@op("svd", ("operand",), attrs={"full_matrices": "bool"}, results=("s", "u", "vt", "info"), padding="refused")
def _svd(x: TensorType, *, full_matrices):
    """Singular values (descending, real) and vectors, A = U diag(s) V^H
    (LAPACK's divide-and-conquer gesdd): u is m x m and vt n x n with
    full_matrices, else m x k and k x n (k = min(m, n)). info: k > 0 when
    the iteration did not converge."""
    batch, m, n = _matrices(x)
    k = min(m, n)
    s = TensorType(batch + (k,), real_dtype(x.dtype) if is_complex(x.dtype) else x.dtype)
    u = TensorType(batch + ((m, m) if full_matrices else (m, k)), x.dtype)
    vt = TensorType(batch + ((n, n) if full_matrices else (k, n)), x.dtype)
    return s, u, vt, _info(batch)


@op("triangular_solve", ("a", "b"),
    attrs={"left_side": "bool", "lower": "bool", "transpose_a": "str", "unit_diagonal": "bool"},
    padding="refused")
def _triangular_solve(a: TensorType, b: TensorType, *, left_side, lower, transpose_a, unit_diagonal):
    """X with op(A) X = B (left_side) or X op(A) = B, A triangular (its lower
    or upper triangle is read; a unit diagonal is implied with
    unit_diagonal), op(A) A, its transpose or its conjugate transpose
    (transpose_a), with StableHLO's semantics; a and b have one batch."""
    batch, n, _ = _matrices(a, "a", square=True)
    if transpose_a not in TRANSPOSES:
        raise ShapeError(f"transpose_a must be one of {', '.join(TRANSPOSES)}, got '{transpose_a}'")
    if b.dtype != a.dtype or b.rank != a.rank or b.shape[:-2] != batch:
        raise ShapeError(f"b must be {a.dtype} with a's batch {list(batch)}, got {b}")
    if b.shape[-2 if left_side else -1] != n:
        raise ShapeError(f"b's {'rows' if left_side else 'columns'} must number {n} (a is {a}), got {b}")
    return b


__all__ = ["LAPACK_DTYPES", "LAPACK_PLATFORMS", "TRANSPOSES"]
