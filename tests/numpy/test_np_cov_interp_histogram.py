"""np.cov, np.corrcoef, np.polyval, np.interp and np.histogram (edges known on the
host) on lazy arrays: recorded, no fallback, NumPy's dtypes, shapes, NaN/Inf rules
and errors. Sums (cov's product, weighted bins) are in XLA's order and the
interpolations' ``a * b + c`` may be fused: values to a few units in the last place."""

import warnings

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics


@pytest.fixture(autouse=True)
def lazy_only():
    metrics.reset()
    yield
    assert metrics.fallbacks() == {}


def _lazy(v):
    return np.asarray(v) if isinstance(v, numpy.ndarray) else v


# on the host, as users pass them: cov's weights and histogram's edges (their checks read them)
_HOST = {"cov": {"fweights", "aweights"}, "histogram": {1}}


def _check(fn, *args, rtol=1e-12, **kwargs):
    """The lazy call (arrays uploaded) against NumPy's: results, or the exception type."""
    host = _HOST.get(fn, set())
    largs = [a if i in host else _lazy(a) for i, a in enumerate(args)]
    lkwargs = {k: v if k in host else _lazy(v) for k, v in kwargs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = getattr(numpy, fn)(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  (compared below)
            with pytest.raises(type(e)):
                getattr(np, fn)(*largs, **lkwargs)
            return
        got = getattr(np, fn)(*largs, **lkwargs)
    pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
    for g, w in pairs:
        h, w = numpy.asarray(g), numpy.asarray(w)
        assert (h.dtype, h.shape) == (w.dtype, w.shape), (fn, h, w)
        if w.dtype.kind in "fc":
            tol = max(rtol, 8 * numpy.finfo(w.dtype).eps)
            numpy.testing.assert_allclose(h, w, rtol=tol, atol=tol, equal_nan=True)
        else:
            numpy.testing.assert_array_equal(h, w)


RNG = numpy.random.default_rng(0)
X = RNG.standard_normal((3, 10))
Y = RNG.standard_normal((2, 10))


@pytest.mark.parametrize("case", [
    ((X,), {}), ((X, Y), {}), ((X.T,), {"rowvar": False}), ((X[0],), {}), ((X,), {"bias": True}),
    ((X,), {"ddof": 3}), ((X,), {"fweights": numpy.arange(10)}), ((X,), {"aweights": numpy.linspace(0.1, 1, 10)}),
    ((X,), {"fweights": numpy.arange(1, 11), "aweights": numpy.linspace(0.1, 1, 10), "ddof": 2}),
    ((X.astype(numpy.float32),), {}), ((X,), {"dtype": numpy.float32}), ((numpy.round(X * 5).astype(int),), {}),
    ((X + 1j * Y[:1],), {}), ((numpy.zeros((0, 3)),), {}), ((X[:, :1],), {}), ((numpy.zeros((2, 2, 2)),), {}),
    ((X,), {"ddof": 1.5}), ((X,), {"fweights": numpy.arange(10) + 0.5}), ((X,), {"aweights": -numpy.ones(10)}),
])
def test_cov(case):
    args, kwargs = case
    _check("cov", *args, **kwargs)


@pytest.mark.parametrize("args", [(X,), (X, Y), (X[0],), (X.astype(numpy.float32),), (X + 1j * Y[:1],),
                                  (numpy.zeros((2, 5)),), (numpy.array([[1.0, numpy.nan, 2.0], [1, 2, 4]]),)])
def test_corrcoef(args):
    _check("corrcoef", *args)


def test_polyval():
    _check("polyval", [1, 2, 3], X)
    _check("polyval", numpy.array([1.5, -2.0]), 3)
    _check("polyval", [3, 0, 1], numpy.arange(5))
    _check("polyval", numpy.array([1.0, 2.0], numpy.float32), numpy.arange(4.0, dtype=numpy.float32))
    _check("polyval", numpy.array([1.0, numpy.inf]), numpy.array([0.0, numpy.nan, -1.0]))


XP = numpy.sort(RNG.standard_normal(8))
FP = RNG.standard_normal(8)
XS = numpy.concatenate([RNG.standard_normal(40) * 2, XP, [numpy.nan, numpy.inf, -numpy.inf]])


@pytest.mark.parametrize("case", [
    ((XS, XP, FP), {}), ((XS, XP, FP), {"left": -5, "right": 7.5}), ((0.3, XP, FP), {}), ((XS, XP[:1], FP[:1]), {}),
    ((XS, [0, 1, 1, 2], [0, numpy.inf, 3, 4]), {}), ((XS, [0.0, 1, 2], [numpy.inf, numpy.inf, 1]), {}),
    ((numpy.arange(5), [1, 3], [10, 30]), {}), ((XS.reshape(3, -1), XP, FP.astype(numpy.float32)), {}),
    ((XS, XP, FP[:3]), {}), ((XS, [], []), {}), ((XS, XP.reshape(2, 4), FP.reshape(2, 4)), {}),
])
def test_interp(case):
    args, kwargs = case
    _check("interp", *args, **kwargs)


H = RNG.standard_normal(1000)
H[::37] = numpy.nan
H[::91] = numpy.inf
U = RNG.random(777) * 3


@pytest.mark.parametrize("case", [
    ((H, 10), {"range": (-2, 2)}), ((H, 7), {"range": (-1.5, 3)}), ((H.astype(numpy.float32), 13), {"range": (-2, 2.5)}),
    ((RNG.integers(-40, 40, 500).astype(numpy.int32), 20), {"range": (-30, 30)}),
    ((H, [-3, -1, 0, 0.5, 2, 10]), {}), ((H, numpy.linspace(-2, 2, 9)), {}), ((H, 10), {"range": (-2, 2), "density": True}),
    ((H, 10), {"range": (-2, 2), "weights": RNG.random(1000)}), ((H, [-3, -1, 0, 0.5, 2]), {"weights": RNG.random(1000)}),
    ((numpy.array([0.0, 1.0, 1.0, 2.0, 3.0]), 3), {"range": (0, 3)}), ((numpy.zeros(0), 5), {}),
    ((U, 3), {"range": (0, 3)}), ((U, 30), {"range": (0.1, 2.9)}), ((U.astype(numpy.float32), 9), {"range": (0.1, 2.9)}),
    ((H.reshape(10, 100), 4), {"range": (-1, 1)}), ((RNG.random(100) > 0.5, 2), {"range": (0, 1)}),
    ((H, 0), {"range": (0, 1)}), ((H, 5), {"range": (1, 0)}), ((H, [3, 1, 2]), {}), ((H, 5), {"range": (0, numpy.inf)}),
    ((H, 2.5), {"range": (0, 1)}), ((H, 5), {"range": (-2, 2), "weights": numpy.ones(3)}),
])
def test_histogram_with_known_edges(case):
    args, kwargs = case
    _check("histogram", *args, **kwargs)


def test_histogram_edges_from_the_values_run_numpy_counted():
    """Edges from the data (no range, or a rule's name) need the values: NumPy's, one counted fallback."""
    counts, edges = np.histogram(np.asarray(U), 5)
    want = numpy.histogram(U, 5)
    numpy.testing.assert_array_equal(numpy.asarray(counts), want[0])
    assert metrics.counters()["fallbacks"] == 1
    metrics.reset()


def test_vander():
    x = numpy.linspace(-2, 3, 5)
    for args, kwargs in [((x,), {}), ((x, 3), {}), ((x, 3), {"increasing": True}), ((numpy.arange(4), 6), {}),
                         ((x, 0), {}), ((x.reshape(5, 1),), {})]:
        _check("vander", *args, **kwargs)


PX = numpy.linspace(-2, 3, 30)
PY = 1 + 2 * PX - 0.5 * PX ** 3 + RNG.standard_normal(30) * 0.1


@pytest.mark.parametrize("case", [
    ((PX, PY, 3), {}), ((PX, PY, 1), {}), ((PX, numpy.stack([PY, 2 * PY + 1], 1), 2), {}),
    ((PX, PY, 3), {"w": RNG.random(30)}), ((PX.astype(numpy.float32), PY.astype(numpy.float32), 2), {}),
    ((PX, PY, -1), {}), ((PX, PY[:5], 1), {}), ((PX.reshape(5, 6), PY, 1), {}),
])
def test_polyfit(case):
    """The SVD's solution, not LAPACK gelsd's: the same to ~1e-9 on these systems."""
    args, kwargs = case
    _check("polyfit", *args, rtol=1e-9, **kwargs)


def test_polyfit_warns_as_numpy_on_a_rank_deficient_fit():
    with pytest.warns(numpy.exceptions.RankWarning):
        want = numpy.polyfit(PX[:3], PY[:3], 5)
    with pytest.warns(numpy.exceptions.RankWarning):
        got = np.polyfit(np.asarray(PX[:3]), np.asarray(PY[:3]), 5)
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-9, atol=1e-12)
