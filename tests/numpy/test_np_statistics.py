"""np.median, np.percentile, np.quantile and their nan variants on lazy arrays:
recorded (no fallback), NumPy's dtypes, shapes, NaN rules and errors, for every
``method=`` NumPy documents, against NumPy on random inputs with NaN, Inf,
empty and 0-d arrays. Values agree to a few units in the last place of the
data: XLA fuses the interpolation's ``a + d * t`` into one rounding where NumPy
rounds twice."""

import warnings

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

from _bits import BY_HAND  # (tests/ is on the path)

METHODS = list(numpy.lib._function_base_impl._QuantileMethods)


@pytest.fixture(autouse=True)
def lazy_only():
    metrics.reset()
    yield
    assert metrics.fallbacks() == {}


def _both(fn, a, *args, **kwargs):
    """(lazy result or exception, NumPy's result or exception)."""
    out = []
    for mod, arr in ((np, np.asarray(a)), (numpy, a)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out.append(getattr(mod, fn)(arr, *args, **kwargs))
        except Exception as e:  # noqa: BLE001  (compared below)
            out.append(e)
    return out


def _check(fn, a, *args, **kwargs):
    got, want = _both(fn, a, *args, **kwargs)
    if isinstance(want, Exception):
        assert type(got) is type(want), (got, want)
        return
    assert not isinstance(got, Exception), got
    host = numpy.asarray(got)
    want = numpy.asarray(want)
    assert (host.dtype, host.shape) == (want.dtype, want.shape), (fn, args, kwargs, host, want)
    eps = numpy.finfo(want.dtype).eps if want.dtype.kind == "f" else 0
    finite = numpy.abs(numpy.asarray(a, numpy.float64)[numpy.isfinite(a)]) if numpy.size(a) else numpy.zeros(0)
    scale = finite.max() if finite.size else 1.0  # one rounding of the interpolation's operands
    numpy.testing.assert_allclose(host, want, rtol=4 * eps, atol=4 * eps * scale, equal_nan=True)


def _data(rng, shape, dtype):
    x = rng.standard_normal(shape) * (1 if numpy.dtype(dtype).kind == "f" else 10)
    x = numpy.asarray(x).astype(dtype)
    if x.dtype.kind == "f" and x.ndim:  # (an all-NaN 0-d array: see test_an_all_nan_slice)
        x[numpy.asarray(rng.random(shape) < 0.2)] = numpy.nan
        x[numpy.asarray(rng.random(shape) < 0.05)] = numpy.inf
    return x


SHAPES = [((7,), None), ((4, 6), 1), ((3, 4, 5), (0, 2)), ((2, 0), 1), ((), None)]
QS = [0.5, [0.1, 0.5, 0.9], numpy.float32(0.3), numpy.array([0.0, 1.0]), 1]


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
# CI: the f4 variants take the same path (the lowering is the same for either float type)
@pytest.mark.parametrize("dtype", [pytest.param("f8", marks=BY_HAND), "f4", "i4"])
def test_quantiles_match_numpy_for_every_method(fn, dtype):
    rng = numpy.random.default_rng(1)
    for i, method in enumerate(METHODS):
        for j, (shape, axis) in enumerate(SHAPES):
            q = QS[(i + j) % len(QS)]  # each method meets each kind of q
            _check(fn, _data(rng, shape, dtype), q, axis=axis, method=method, keepdims=(i + j) % 2 == 1)


@pytest.mark.parametrize("fn", ["percentile", "nanpercentile"])
def test_percentiles_match_numpy(fn):
    rng = numpy.random.default_rng(3)
    x = _data(rng, (5, 6), "f4")
    for method in ("linear", "lower", "nearest", "midpoint"):
        _check(fn, x, 30, axis=0, method=method)
        _check(fn, x, [25, 50, 75.5], axis=1, method=method, keepdims=True)


@pytest.mark.parametrize("fn", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", ["f8", "f4", "f2", "i4"])
def test_medians_match_numpy(fn, dtype):
    rng = numpy.random.default_rng(2)
    for shape, axis in SHAPES + [((2, 0), 0), ((6,), None), ((3, 8), -1), ((4, 6), 0)]:
        x = _data(rng, shape, dtype)
        for keepdims in (False, True):
            _check(fn, x, axis=axis, keepdims=keepdims)
    if numpy.dtype(dtype).kind == "f":
        all_nan = numpy.array([[numpy.nan, numpy.nan], [1, 2]], dtype)
        _check(fn, all_nan, axis=1)
        _check(fn, all_nan[0])


def test_an_all_nan_slice():
    """NumPy's nanquantile gives an all-NaN 1-d slice the array's dtype, other slices
    the interpolation's (float64 for a float32 array and a list of quantiles): a
    dtype that depends on the values. Here every slice has the interpolation's."""
    x = numpy.array([numpy.nan, numpy.nan], numpy.float32)
    got = np.nanquantile(np.asarray(x), [0.1, 0.5])
    assert got.dtype == numpy.nanquantile(numpy.array([numpy.nan, 1], numpy.float32), [0.1, 0.5]).dtype
    assert numpy.isnan(numpy.asarray(got)).all()
    _check("nanquantile", x, 0.5)  # a Python number: the array's dtype either way


def test_scalar_results_are_scalars_and_one_program():
    x = numpy.array([3.0, 1.0, numpy.nan, 2.0, 5.0])
    got = np.nanmedian(np.asarray(x))
    assert got.shape == () and float(got) == numpy.nanmedian(x)
    assert float(np.percentile(np.asarray(x[[0, 1, 3, 4]]), 25)) == numpy.percentile(x[[0, 1, 3, 4]], 25)


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_numpy_errors(fn):
    x = numpy.array([1.0, 2.0, 3.0])
    for args, kwargs in [((1.5,), {}), ((-0.1,), {}), ((0.5,), {"method": "nope"}),
                         ((numpy.zeros((2, 2, 2)),), {}), ((0.5,), {"axis": 1})]:
        _check(fn, x, *args, **kwargs)
    _check(fn, x.astype(complex), 0.5)
    _check(fn, numpy.array([True, False]), 0.5)
    _check(fn, numpy.zeros(0), 0.5)


def test_out_and_numpy_functions_dispatch():
    x = numpy.arange(12.0).reshape(3, 4)
    out = np.zeros(4)
    r = numpy.percentile(np.asarray(x), 50, axis=0, out=out)
    assert r is out
    numpy.testing.assert_array_equal(numpy.asarray(out), numpy.percentile(x, 50, axis=0))
    numpy.testing.assert_array_equal(numpy.asarray(numpy.median(np.asarray(x), axis=1)), numpy.median(x, axis=1))
