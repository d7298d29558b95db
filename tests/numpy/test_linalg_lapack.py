"""numpy.linalg's factorizations and solvers on lazy arrays, lowered to the
dialect's factorization ops (LAPACK on the CPU) instead of running NumPy on
the host (issues 39/43): NumPy's values (NumPy computes in double precision
whatever the input's, and so do these), NumPy's result types and named
tuples, its shape errors at the call and its value errors at the barrier,
with no fallback."""

import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.observe import metrics

from _bits import BY_HAND  # (tests/ is on the path)


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()
    yield
    assert metrics.fallbacks() == {}


def general(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if numpy.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def spd(rng, shape, dtype):
    """Hermitian positive-definite matrices."""
    x = general(rng, shape, dtype)
    n = shape[-1]
    return (x @ numpy.conj(numpy.swapaxes(x, -1, -2)) + n * numpy.eye(n)).astype(dtype)


def tol(dtype):
    return 2e-4 if numpy.dtype(dtype) in (numpy.float32, numpy.complex64) else 1e-10


def close(got, want, dtype=None):
    want = numpy.asarray(want)
    assert isinstance(got, (np.ndarray, numpy.generic, float, complex)) or hasattr(got, "__array__"), type(got)
    host = numpy.asarray(got)
    assert host.dtype == want.dtype and host.shape == want.shape, (host.dtype, host.shape, want.dtype, want.shape)
    t = tol(dtype or want.dtype)
    numpy.testing.assert_allclose(host, want, rtol=t, atol=t)


def close_all(pairs):
    """close() for each (lazy, NumPy's) pair, the lazy results computed by one barrier first: one
    program and one compile for a test's calls, not one per read (each op lowers as it would alone)."""
    lazycore.mark_step()
    for got, want in pairs:
        close(got, want)


DTYPES = ["float32", "float64", "complex64", "complex128"]
SHAPES = [(4, 4), (3, 5, 5), (2, 1, 8, 8)]
# CI: (4, 4) (one matrix) and (2, 1, 8, 8) (a batch of two dims) take every path: the batch is the LAPACK call's
# num_batch_dims and layouts, by rank, with no branch on the sizes; (3, 5, 5), a third shape of that kind, repeats them
SHAPES_CI = [pytest.param(s, marks=BY_HAND) if s == (3, 5, 5) else s for s in SHAPES]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_CI, ids=str)
def test_cholesky(rng, dtype, shape):
    x = spd(rng, shape, dtype)
    close(np.linalg.cholesky(np.asarray(x)), numpy.linalg.cholesky(x))
    close(np.linalg.cholesky(np.asarray(x), upper=True), numpy.linalg.cholesky(x, upper=True))


def test_cholesky_of_integers_is_float64(rng):
    x = numpy.array([[4, 2], [2, 3]])
    close(np.linalg.cholesky(np.asarray(x)), numpy.linalg.cholesky(x))


def test_cholesky_raises_at_the_barrier_not_a_nan(rng):
    x = spd(rng, (3, 4, 4), "float64")
    x[1, 2, 2] = -50.0  # the second matrix is not positive definite
    with pytest.raises(numpy.linalg.LinAlgError, match="not positive definite"):
        numpy.linalg.cholesky(x)
    got = np.linalg.cholesky(np.asarray(x))  # no error yet: the values are not known
    with pytest.raises(ValueError, match="Matrix is not positive definite") as info:
        numpy.asarray(got)
    assert isinstance(info.value, lazycore.BarrierError)
    assert "test_linalg_lapack.py" in str(info.value)  # the user's line


@pytest.mark.parametrize("fn", ["cholesky", "inv", "det", "slogdet", "eigh", "eigvalsh"])
def test_shape_errors_at_the_call(fn):
    for bad, message in ((numpy.ones(3), "1-dimensional array given"),
                         (numpy.ones((2, 3)), "Last 2 dimensions of the array must be square")):
        with pytest.raises(numpy.linalg.LinAlgError, match=message):
            getattr(numpy.linalg, fn)(bad)
        with pytest.raises(numpy.linalg.LinAlgError, match=message):
            getattr(np.linalg, fn)(np.asarray(bad))


def test_float16_is_refused_as_numpy_refuses_it():
    x = numpy.eye(2, dtype=numpy.float16)
    with pytest.raises(TypeError, match="unsupported in linalg"):
        numpy.linalg.inv(x)
    with pytest.raises(TypeError, match="unsupported in linalg"):
        np.linalg.inv(np.asarray(x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_CI, ids=str)
def test_inv_det_slogdet(rng, dtype, shape):
    x = general(rng, shape, dtype)
    a = np.asarray(x)
    sign, logabs = np.linalg.slogdet(a)
    want = numpy.linalg.slogdet(x)
    close_all([(np.linalg.inv(a), numpy.linalg.inv(x)), (np.linalg.det(a), numpy.linalg.det(x)),
               (sign, want.sign), (logabs, want.logabsdet)])


def test_det_and_slogdet_of_a_singular_matrix():
    x = numpy.array([[1.0, 2.0], [2.0, 4.0]])
    close(np.linalg.det(np.asarray(x)), numpy.linalg.det(x))
    got, want = np.linalg.slogdet(np.asarray(x)), numpy.linalg.slogdet(x)
    assert numpy.asarray(got.sign) == want.sign == 0 and numpy.asarray(got.logabsdet) == want.logabsdet == -numpy.inf


def test_det_counts_the_row_swaps(rng):
    for perm in ([1, 0, 2], [2, 0, 1], [2, 1, 0], [0, 1, 2]):
        x = numpy.eye(3)[perm] * numpy.array([2.0, 3.0, 5.0])
        close(np.linalg.det(np.asarray(x)), numpy.linalg.det(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve(rng, dtype):
    x = general(rng, (2, 5, 5), dtype)
    bs = (general(rng, (5,), dtype), general(rng, (2, 5, 3), dtype), general(rng, (5, 1), dtype),
          general(rng, (3, 1, 5, 2), dtype))
    close_all([(np.linalg.solve(np.asarray(x), np.asarray(b)), numpy.linalg.solve(x, b)) for b in bs])


def test_solve_of_a_singular_matrix_raises_at_the_barrier():
    x = numpy.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(numpy.linalg.LinAlgError, match="Singular matrix"):
        numpy.linalg.solve(x, numpy.ones(2))
    got = np.linalg.solve(np.asarray(x), np.asarray(numpy.ones(2)))
    with pytest.raises(ValueError, match="Singular matrix"):
        numpy.asarray(got)
    with pytest.raises(ValueError, match="Singular matrix"):
        numpy.asarray(np.linalg.inv(np.asarray(x)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES_CI, ids=str)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(rng, dtype, shape, uplo):
    x = general(rng, shape, dtype)
    x = x + numpy.conj(numpy.swapaxes(x, -1, -2))
    got, want = np.linalg.eigh(np.asarray(x), UPLO=uplo), numpy.linalg.eigh(x, UPLO=uplo)
    assert type(got) is type(want)
    close(got.eigenvalues, want.eigenvalues)
    close(np.linalg.eigvalsh(np.asarray(x), UPLO=uplo), want.eigenvalues)
    v = numpy.asarray(got.eigenvectors)
    assert v.dtype == want.eigenvectors.dtype
    # eigenvectors are defined up to a unit factor: compare |<v_numpy, v_ours>| = 1 and A v = v w
    overlap = numpy.abs(numpy.sum(numpy.conj(want.eigenvectors) * v, axis=-2))
    numpy.testing.assert_allclose(overlap, 1, rtol=tol(dtype) * 10)
    numpy.testing.assert_allclose(x @ v, v * numpy.asarray(got.eigenvalues)[..., None, :], atol=tol(dtype) * 100)


@pytest.mark.parametrize("dtype", DTYPES)
# CI: (2, 1, 4, 7) takes (3, 5)'s wide matrix (k = m), batched; (4, 4) the unbatched call
@pytest.mark.parametrize("shape", [(4, 4), pytest.param((3, 5), marks=BY_HAND), (2, 6, 3), (2, 1, 4, 7)], ids=str)
@pytest.mark.parametrize("full", [True, False])
def test_svd(rng, dtype, shape, full):
    x = general(rng, shape, dtype)
    got, want = np.linalg.svd(np.asarray(x), full_matrices=full), numpy.linalg.svd(x, full_matrices=full)
    assert type(got) is type(want)
    close(got.S, want.S)
    u, vh = numpy.asarray(got.U), numpy.asarray(got.Vh)
    assert u.shape == want.U.shape and vh.shape == want.Vh.shape and u.dtype == want.U.dtype
    k = min(shape[-2:])
    # singular vectors are defined up to a unit factor per pair: the product is not
    numpy.testing.assert_allclose((u[..., :k] * numpy.asarray(got.S)[..., None, :]) @ vh[..., :k, :], x,
                                  atol=tol(dtype) * 100)
    eye = numpy.eye(u.shape[-1])
    numpy.testing.assert_allclose(numpy.conj(numpy.swapaxes(u, -1, -2)) @ u, numpy.broadcast_to(eye, u.shape[:-2] + eye.shape), atol=tol(dtype) * 100)
    close(np.linalg.svd(np.asarray(x), compute_uv=False), numpy.linalg.svd(x, compute_uv=False))
    close(np.linalg.svdvals(np.asarray(x)), numpy.linalg.svdvals(x))


@pytest.mark.parametrize("dtype", DTYPES)
# CI: (2, 6, 4) takes (5, 3)'s tall matrix (complete Q's zero columns after the reflectors), batched; (4, 4) and
# (3, 5) the unbatched call
@pytest.mark.parametrize("shape", [(4, 4), pytest.param((5, 3), marks=BY_HAND), (3, 5), (2, 6, 4)], ids=str)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(rng, dtype, shape, mode):
    x = general(rng, shape, dtype)
    got, want = np.linalg.qr(np.asarray(x), mode=mode), numpy.linalg.qr(x, mode=mode)
    if mode == "r":
        close(got, want)  # LAPACK's geqrf in double precision, as NumPy calls it: the same signs
        return
    assert type(got) is type(want)
    close(got.Q, want.Q)
    close(got.R, want.R)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 6)], ids=str)
def test_pinv_matrix_rank_and_norms(rng, dtype, shape):
    x = general(rng, shape, dtype)
    a = np.asarray(x)
    low = x[..., :1] * numpy.ones(shape[-1], dtype)  # rank 1
    pairs = [(np.linalg.pinv(a), numpy.linalg.pinv(x)),
             (np.linalg.matrix_rank(np.asarray(low)), numpy.linalg.matrix_rank(low)),
             (np.linalg.matrix_rank(a), numpy.linalg.matrix_rank(x))]
    for ord in (2, -2, "nuc"):
        pairs += [(np.linalg.norm(a, ord=ord, axis=(-2, -1)), numpy.linalg.norm(x, ord=ord, axis=(-2, -1))),
                  (np.linalg.norm(a, ord=ord, axis=(-1, -2), keepdims=True),
                   numpy.linalg.norm(x, ord=ord, axis=(-1, -2), keepdims=True))]
    close_all(pairs)


def test_one_program_holds_the_factorizations(rng):
    x = spd(rng, (6, 6), "float64")
    a = np.asarray(x)
    before = metrics.counters().get("programs", 0)
    total = np.linalg.cholesky(a).sum() + np.linalg.inv(a).sum() + np.linalg.eigvalsh(a).sum() + np.linalg.det(a)
    want = (numpy.linalg.cholesky(x).sum() + numpy.linalg.inv(x).sum() + numpy.linalg.eigvalsh(x).sum()
            + numpy.linalg.det(x))
    numpy.testing.assert_allclose(float(total), want, rtol=1e-10)
    del before


def test_a_program_from_the_disk_cache_initializes_lapack(tmp_path):
    # A fresh process that loads a LAPACK-calling program from the disk cache
    # compiles nothing: runtime/pjrt.py initializes jaxlib's LAPACK table as it
    # loads it (without that, the launch crashes the process).
    import os
    import subprocess
    import sys

    code = ("import numpy, lazycore.numpy as np; from lazycore.observe import metrics; "
            "x = numpy.array([[4.0, 2.0], [2.0, 3.0]]); "
            "print(numpy.asarray(np.linalg.cholesky(np.asarray(x)))[1, 1], metrics.counters()['compiles'])")
    env = {**os.environ, "LAZYCORE_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr[-2000:] for r in runs]
    (first, compiled), (second, loaded) = (r.stdout.split() for r in runs)
    assert float(first) == float(second) == numpy.sqrt(2.0)
    assert int(compiled) >= 1 and int(loaded) == 0
