"""Plain NumPy programs nobody here wrote the way they are written here (a k-means loop,
power and QR iteration, Newton's method, a Jacobi solve to a tolerance, a wave
equation, least squares in a loop, Monte Carlo with ``default_rng``) run with
``lazycore.numpy`` as a drop-in ``np``: NumPy's values, no fallback, and a bounded
number of compiles however many iterations run. Plus the pieces they found missing:
``np.linalg.lstsq`` and ``np.linalg.cond`` on the device, ``X[labels == k]`` that
leaves ``X`` on the device, and ``np.array([...lazy arrays...])`` stacked there."""

import warnings

import numpy
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.observe import metrics

_RNG = numpy.random.default_rng(0)
_X = _RNG.normal(size=(60, 2))
_X[:20] += 3
_X[20:40] -= 3
_A = _RNG.normal(size=(8, 8))
_A = _A @ _A.T + 8 * numpy.eye(8)
_B = _RNG.normal(size=8)
_XL = _RNG.normal(size=(30, 5))
_YL = _XL @ numpy.arange(5.0) + _RNG.normal(size=30) * 0.1


def kmeans_masks(np, K=3, iters=6):
    X = np.asarray(_X)
    C = X[:K].copy()
    for _ in range(iters):
        d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
        lab = np.argmin(d, axis=1)
        C = np.array([X[lab == k].mean(axis=0) for k in range(K)])
    return C, lab


def kmeans_onehot(np, K=3, iters=8, dtype=numpy.float64):
    X = np.asarray(_X.astype(dtype))
    C = X[:K].copy()
    for _ in range(iters):
        lab = np.linalg.norm(X[:, None, :] - C[None], axis=-1).argmin(axis=1)
        oh = (lab[:, None] == np.arange(K)).astype(X.dtype)
        C = (oh.T @ X) / oh.sum(axis=0)[:, None]
    return C, lab


def power_iteration(np, iters=30):
    A = np.asarray(_A)
    v = np.ones(A.shape[0]) / np.sqrt(A.shape[0])
    for _ in range(iters):
        w = A @ v
        v = w / np.linalg.norm(w)
    return v, v @ A @ v


def qr_iteration(np, iters=15):
    A = np.asarray(_A)
    for _ in range(iters):
        Q, R = np.linalg.qr(A)
        A = R @ Q
    return np.sort(np.diag(A))


def newton(np, iters=6):
    A, b = np.asarray(_A), np.asarray(_B)
    x = np.zeros_like(b)
    for _ in range(iters):
        F = A @ x + np.tanh(x) - b
        J = A + np.diag(1 - np.tanh(x) ** 2)
        x = x - np.linalg.solve(J, F)
    return x, np.linalg.det(J), np.linalg.inv(J)[0], np.linalg.eigh(J)[0], np.linalg.cond(J)


def jacobi(np, n=16, tol=1e-6):
    u, f, h = np.zeros((n, n)), np.ones((n, n)), 1.0 / (n - 1)
    for it in range(2000):
        un = u.copy()
        u[1:-1, 1:-1] = 0.25 * (un[2:, 1:-1] + un[:-2, 1:-1] + un[1:-1, 2:] + un[1:-1, :-2] + h * h * f[1:-1, 1:-1])
        if np.max(np.abs(u - un)) < tol:
            break
    return u, it


def wave(np, n=64, steps=12):
    x = np.linspace(0, 1, n, endpoint=False)
    u = np.exp(-100 * (x - 0.5) ** 2)
    up = u.copy()
    for _ in range(steps):
        up, u = u, 2 * u - up + 0.25 * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
    return u


def ridge_path(np):
    X, y = np.asarray(_XL), np.asarray(_YL)
    out = [np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y) for lam in (0.0, 0.1, 1.0)]
    coef, resid, rank, sv = np.linalg.lstsq(X, y, rcond=None)
    return out, coef, resid, rank, sv, np.linalg.pinv(X)[:, :3], np.linalg.cond(X)


PROGRAMS = {  # program -> (compiles at most, however many iterations)
    kmeans_masks: 8, kmeans_onehot: 1, power_iteration: 1, qr_iteration: 1, newton: 2, jacobi: 2, wave: 1,
    ridge_path: 3,
}


def _leaves(r):
    if isinstance(r, (tuple, list)):
        for v in r:
            yield from _leaves(v)
    else:
        yield r


@pytest.mark.parametrize("program", list(PROGRAMS), ids=lambda f: f.__name__)
def test_program_matches_numpy_without_fallbacks(program, clean_runtime):
    want = program(numpy)
    lc.mark_step(wait=True)
    metrics.reset()
    got = program(lnp)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert type(g) is type(w) or isinstance(g, lnp.ndarray), (type(g), type(w))
        g, w = numpy.asarray(g), numpy.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        tol = 1e-5 if w.dtype == numpy.float32 else 1e-9
        numpy.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    assert metrics.fallbacks() == {}
    assert metrics.counters()["compiles"] <= PROGRAMS[program]


def test_kmeans_in_float32_matches_numpy(clean_runtime):
    want = kmeans_onehot(numpy, dtype=numpy.float32)
    got = kmeans_onehot(lnp, dtype=numpy.float32)
    numpy.testing.assert_allclose(numpy.asarray(got[0]), want[0], rtol=1e-5)
    numpy.testing.assert_array_equal(numpy.asarray(got[1]), want[1])
    assert metrics.fallbacks() == {}


def _monte_carlo(steps):
    rng = lnp.random.default_rng(0)
    n = 100_000
    est = [4 * lnp.mean((rng.random((n, 2)) ** 2).sum(axis=1) < 1) for _ in range(4)]
    walk = lnp.zeros(2000)
    for _ in range(steps):
        walk += rng.standard_normal(2000)
    return numpy.asarray(lnp.array(est)), float(walk.mean()), float(walk.var())


def test_monte_carlo_with_default_rng_is_lazy_and_its_compiles_do_not_grow_with_the_steps(clean_runtime):
    # the device generator's numbers are not NumPy's PCG64 stream (random.py says so): the
    # estimates are checked against what they estimate, within 5 standard errors
    n = 100_000
    est, mean, var = _monte_carlo(30)
    assert numpy.all(numpy.abs(est - numpy.pi) < 5 * numpy.sqrt(numpy.pi * (4 - numpy.pi) / n))
    assert abs(mean) < 5 * numpy.sqrt(30 / 2000) and abs(var - 30) < 5 * 30 * numpy.sqrt(2 / 2000)
    assert metrics.fallbacks() == {}
    compiles = metrics.counters()["compiles"]
    lc.cache.clear()
    metrics.reset()
    _monte_carlo(60)
    assert metrics.counters()["compiles"] == compiles


# --- np.linalg.lstsq and np.linalg.cond ---------------------------------------------------------------


def _lstsq_cases():
    rng = numpy.random.default_rng(1)
    out = []
    for dt in (numpy.float32, numpy.float64, numpy.complex128):
        a = rng.normal(size=(7, 4)).astype(dt)
        b = rng.normal(size=(7, 2)).astype(dt)
        if dt == numpy.complex128:
            a = a + 1j * rng.normal(size=a.shape)
        out += [(a, b[:, 0], None), (a, b, None), (a[:3], b[:3], None), (numpy.c_[a, a[:, :1]], b, None),
                (a, b, 0.5)]
    out.append((numpy.arange(12).reshape(6, 2), numpy.arange(6), None))
    return out


@pytest.mark.parametrize("a,b,rcond", _lstsq_cases(), ids=lambda v: getattr(v, "shape", v))
def test_lstsq_is_numpys_on_the_device(a, b, rcond, clean_runtime):
    want = numpy.linalg.lstsq(a, b, rcond=rcond)
    got = lnp.linalg.lstsq(lnp.asarray(a), lnp.asarray(b), rcond=rcond)
    assert type(got[2]) is type(want[2]) and got[2] == want[2]  # the rank
    for g, w in zip(got, want):
        g, w = numpy.asarray(g), numpy.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        numpy.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert metrics.fallbacks() == {}


def test_lstsq_keeps_numpys_errors():
    for a, b in ((numpy.ones((3, 2)), numpy.ones(4)), (numpy.ones(3), numpy.ones(3))):
        with pytest.raises(numpy.linalg.LinAlgError) as want:
            numpy.linalg.lstsq(a, b)
        with pytest.raises(numpy.linalg.LinAlgError) as got:
            lnp.linalg.lstsq(lnp.asarray(a), lnp.asarray(b))
        assert str(got.value) == str(want.value)


_COND = [numpy.random.default_rng(2).normal(size=(4, 4)), numpy.ones((3, 3)), numpy.zeros((2, 2)),
         numpy.random.default_rng(3).normal(size=(2, 3, 3)).astype(numpy.float32),
         numpy.random.default_rng(4).normal(size=(5, 3)), numpy.array([[1.0, numpy.nan], [0.0, 1.0]])]


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, "fro", numpy.inf, -numpy.inf])
@pytest.mark.parametrize("m", range(len(_COND)))
def test_cond_is_numpys_on_the_device(m, p, clean_runtime):
    x = _COND[m]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = numpy.linalg.cond(x, p)
        except numpy.linalg.LinAlgError as e:
            with pytest.raises(numpy.linalg.LinAlgError, match=str(e)):  # (at the read: a value check)
                numpy.asarray(lnp.linalg.cond(lnp.asarray(x), p))
            return
        got = lnp.linalg.cond(lnp.asarray(x), p)
        assert type(got) is type(want) or isinstance(got, lnp.ndarray)
        got = numpy.asarray(got)
    assert got.dtype == numpy.asarray(want).dtype and got.shape == numpy.shape(want)
    numpy.testing.assert_allclose(got, want, rtol=1e-4)
    assert metrics.fallbacks() == {}


# --- X[labels == k] and np.array([...]) -------------------------------------------------------------------


def test_a_lazy_mask_moves_the_mask_not_the_array(clean_runtime):
    x = numpy.random.default_rng(5).normal(size=(500, 8))
    lx = lnp.asarray(x)
    lc.mark_step(wait=True)
    metrics.reset()
    mask = lx[:, 0] > 0  # lazy
    got = lx[mask]
    sub = lx[mask, 1:3]
    y = lx.copy()
    y[mask] = -lx[mask]
    moved = metrics.counters()["bytes_to_host"]
    want = x[x[:, 0] > 0]
    numpy.testing.assert_array_equal(numpy.asarray(got), want)
    numpy.testing.assert_array_equal(numpy.asarray(sub), x[x[:, 0] > 0, 1:3])
    z = x.copy()
    z[x[:, 0] > 0] = -x[x[:, 0] > 0]
    numpy.testing.assert_array_equal(numpy.asarray(y), z)
    assert metrics.fallbacks() == {}
    assert moved < x.nbytes / 4  # the masks (500 bytes each), never x's 32000
    with pytest.raises(IndexError):
        lx[mask[:10]]


def test_array_of_lazy_arrays_stacks_on_the_device(clean_runtime):
    f32, i8 = numpy.arange(3, dtype=numpy.float32), numpy.arange(3, dtype=numpy.int8)
    builds = [lambda L: [L(f32), L(f32)], lambda L: [L(f32), [1.0, 2.0, 3.0]], lambda L: [[L(i8)], [L(i8)]],
              lambda L: [L(i8), [1, 2, 3]], lambda L: (L(f32).sum(), L(f32).max(), numpy.float32(2)),
              lambda L: [[L(f32)[0], 0.0], [0.0, L(f32)[2]]], lambda L: [L(i8), L(f32) > 1]]
    for build in builds:
        want = numpy.array(build(lambda a: a))
        lc.mark_step(wait=True)
        metrics.reset()
        got = lnp.array(build(lnp.asarray))
        assert metrics.counters()["transfers_to_host"] == 0
        got = numpy.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        numpy.testing.assert_array_equal(got, want)
    for dt in ("float32", "int64"):
        got = numpy.asarray(lnp.array([lnp.asarray(f32)] * 2, dtype=dt))
        assert got.dtype == dt and numpy.array_equal(got, numpy.array([f32] * 2, dtype=dt))
    with pytest.raises(ValueError):
        lnp.array([lnp.ones(2), lnp.ones(3)])


# --- np.bincount (scikit-learn's confusion matrix, precision/recall/F1) ---------------------------------

_BX = numpy.random.default_rng(6).integers(0, 7, 50)
_BW = numpy.random.default_rng(7).normal(size=50)


@pytest.mark.parametrize("args,kw", [
    ((_BX,), {}), ((_BX,), dict(minlength=10)), ((_BX,), dict(weights=_BW)), ((_BX.astype(numpy.uint8),), {}),
    ((_BX > 3,), {}), ((numpy.array([], numpy.int64),), dict(minlength=3)),
    ((_BX,), dict(weights=_BW.astype(numpy.float32))),
], ids=["counts", "minlength", "weights", "uint8", "bool", "empty", "float32-weights"])
def test_bincount_is_a_scatter_add_on_the_device(args, kw, clean_runtime):
    want = numpy.bincount(*args, **kw)
    lazy = {k: lnp.asarray(v) if isinstance(v, numpy.ndarray) else v for k, v in kw.items()}
    got = numpy.asarray(lnp.bincount(*(lnp.asarray(a) for a in args), **lazy))
    assert got.dtype == want.dtype and got.shape == want.shape
    numpy.testing.assert_allclose(got, want, rtol=1e-12)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("args,kw", [
    ((numpy.array([-1, 2]),), {}), ((_BX.astype(float),), {}), ((_BX.reshape(5, 10),), {}),
    ((_BX,), dict(minlength=-1)), ((_BX,), dict(weights=_BW[:3])), ((numpy.array(3),), {}),
], ids=["negative", "float", "2-d", "negative-minlength", "weights-length", "0-d"])
def test_bincount_keeps_numpys_errors(args, kw):
    with pytest.raises((ValueError, TypeError)) as want:
        numpy.bincount(*args, **kw)
    lazy = {k: lnp.asarray(v) if isinstance(v, numpy.ndarray) else v for k, v in kw.items()}
    with pytest.raises(want.type, match=want.value.args[0].replace("(", r"\(").replace(")", r"\)")):
        lnp.bincount(*(lnp.asarray(a) for a in args), **lazy)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_repeat_by_lazy_counts_reads_the_counts_and_copies_on_the_device(axis, clean_runtime):
    # scipy.stats.rankdata (mannwhitneyu, wilcoxon, brunnermunzel ...) repeats each tie's rank
    x = numpy.arange(12.0).reshape(3, 4)
    counts = numpy.array([2, 0, 3, 1]) if axis == 1 else numpy.array([1, 0, 2]) if axis == 0 else numpy.arange(12) % 3
    want = numpy.repeat(x, counts, axis=axis)
    got = lnp.repeat(lnp.asarray(x), lnp.asarray(counts), axis=axis)
    numpy.testing.assert_array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}
    with pytest.raises(ValueError):
        lnp.repeat(lnp.asarray(x), lnp.asarray(-counts - 1), axis=axis)


@pytest.mark.parametrize("shape", [(2, 3), ()])
@pytest.mark.parametrize("chosen", [True, False])
def test_a_0d_mask_is_read_as_a_new_dim_of_one_or_none(shape, chosen, clean_runtime):
    # array-api-extra's apply_where / at(x, cond) on a reduction's 0-d result (scipy.stats.pearsonr)
    x = numpy.arange(float(numpy.prod(shape))).reshape(shape)
    for m in (lnp.asarray(numpy.array(chosen)), chosen):
        got = lnp.asarray(x)[m]
        want = x[numpy.array(chosen)]
        assert numpy.asarray(got).shape == want.shape
        numpy.testing.assert_array_equal(numpy.asarray(got), want)
        for val in (7.0, numpy.full(shape, 9.0), numpy.ones((1,) + shape) * 4):
            w = x.copy()
            w[numpy.array(chosen)] = val
            g = lnp.asarray(x.copy())
            g[m] = lnp.asarray(val)
            numpy.testing.assert_array_equal(numpy.asarray(g), w)
    assert metrics.fallbacks() == {}
    if shape:
        with pytest.raises(ValueError, match=r"shape mismatch: value array of shape \(5,\) could not be broadcast"):
            lnp.asarray(x)[lnp.asarray(numpy.array(chosen))] = lnp.ones(5)
