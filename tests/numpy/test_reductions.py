"""lazycore.numpy reductions and scans against NumPy: values, result dtypes, NaN rules, where/initial/out, errors."""

import warnings

import numpy
import pytest
from numpy.exceptions import AxisError

import lazycore.numpy as np
from lazycore.observe import metrics
import npcheck
from _bits import BY_HAND  # (tests/ is on the path)


def sample(rng, shape, dtype, nan=False):
    return npcheck.sample(rng, shape, dtype, -5, 6, nan)


def same(got, want, rtol=1e-5, atol=1e-6):
    npcheck.same(got, want, rtol=rtol, atol=atol)


@pytest.fixture(autouse=True)
def lowered(request):
    """Every lowered function stays lazy: no NumPy fallback recorded."""
    metrics.reset()
    yield
    assert metrics.fallbacks() == {}


def numpy_quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


AXES = [(None, False), (0, True), (-1, False), ((0, 2), True)]

REDUCTIONS = ["sum", "prod", "mean", "std", "var", "max", "min", "ptp", "any", "all"]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool"])
def test_reductions(rng, name, dtype):
    x = sample(rng, (2, 3, 4), dtype)
    a = np.asarray(x)
    for axis, keepdims in AXES:
        try:
            want = getattr(numpy, name)(x, axis=axis, keepdims=keepdims)
        except TypeError:  # NumPy has no ptp for bools
            with pytest.raises(TypeError):
                getattr(np, name)(a, axis=axis, keepdims=keepdims)
            continue
        same(getattr(np, name)(a, axis=axis, keepdims=keepdims), want)
    # NumPy's own function on a lazy array stays lazy
    if name != "ptp" or dtype != "bool":
        same(getattr(numpy, name)(a, axis=1), getattr(numpy, name)(x, axis=1))


@pytest.mark.parametrize("name", ["sum", "mean", "std", "max", "prod", "var"])
def test_float64_and_float16(rng, name):
    x = sample(rng, (5, 7), "float64")
    same(getattr(np, name)(np.asarray(x), axis=0), getattr(numpy, name)(x, axis=0), rtol=1e-12)
    h = (x / 2).astype(numpy.float16)
    same(getattr(np, name)(np.asarray(h), axis=1), getattr(numpy, name)(h, axis=1), rtol=5e-3, atol=5e-3)


def test_sum_dtypes(rng):
    x = sample(rng, (4, 6), "int8")
    a = np.asarray(x)
    for dtype in [None, "int16", "float32", "uint64", "bool"]:
        same(np.sum(a, axis=1, dtype=dtype), numpy.sum(x, axis=1, dtype=dtype))
        same(np.prod(a, axis=0, dtype=dtype), numpy.prod(x, axis=0, dtype=dtype))
    same(np.mean(a, dtype="float32"), numpy.mean(x, dtype="float32"))
    same(np.mean(a, axis=0, dtype="int64"), numpy.mean(x, axis=0, dtype="int64"))
    f = sample(rng, (4, 6), "float64") * 3
    same(np.sum(np.asarray(f), axis=0, dtype=int), numpy.sum(f, axis=0, dtype=int))
    big = numpy.array([2**62, 2**62, 2**62], numpy.int64)  # wraps as in NumPy
    same(np.sum(np.asarray(big)), numpy.sum(big))


def test_nan_propagation(rng):
    x = sample(rng, (4, 5), "float32", nan=True)
    x[1] = numpy.nan
    a = np.asarray(x)
    for name in ["sum", "mean", "max", "min", "std", "ptp", "argmax", "argmin"]:
        for axis in [None, 0, 1]:
            same(getattr(np, name)(a, axis=axis), numpy_quiet(getattr(numpy, name), x, axis=axis))


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd"])
def test_nan_functions(rng, name):
    x = sample(rng, (4, 5), "float32", nan=True)
    x[1] = numpy.nan  # an all-NaN row
    a = np.asarray(x)
    fn = getattr(numpy, name)
    for axis, keepdims in [(None, False), (0, True), (1, False)]:
        same(getattr(np, name)(a, axis=axis, keepdims=keepdims), numpy_quiet(fn, x, axis=axis, keepdims=keepdims))
    same(numpy_quiet(fn, a, axis=1), numpy_quiet(fn, x, axis=1))
    i = sample(rng, (3, 4), "int32")  # integers have no NaN
    same(getattr(np, name)(np.asarray(i), axis=0), fn(i, axis=0))


def test_var_std_options(rng):
    x = sample(rng, (3, 6), "float64")
    a = np.asarray(x)
    for ddof in [0, 1, 2.5, 7]:
        same(np.var(a, axis=1, ddof=ddof), numpy_quiet(numpy.var, x, axis=1, ddof=ddof))
        same(a.std(ddof=ddof), numpy_quiet(x.std, ddof=ddof))
    same(np.std(a, axis=0, correction=1), numpy.std(x, axis=0, correction=1))
    m = x.mean(axis=1, keepdims=True)
    same(np.var(a, axis=1, mean=m), numpy.var(x, axis=1, mean=m))
    same(np.var(a, axis=0, dtype="float32"), numpy.var(x, axis=0, dtype="float32"))
    with pytest.raises(ValueError):
        np.var(a, ddof=1, correction=1)


def test_where_initial_out(rng):
    x = sample(rng, (3, 5), "float32")
    mask = rng.random((3, 5)) > 0.4
    row = rng.random(5) > 0.5
    a = np.asarray(x)
    for name in ["sum", "prod", "mean", "var", "std", "nansum", "any", "all"]:
        same(getattr(np, name)(a, axis=1, where=mask), numpy_quiet(getattr(numpy, name), x, axis=1, where=mask))
        same(getattr(np, name)(a, where=row), numpy_quiet(getattr(numpy, name), x, where=row))
    for name in ["max", "min", "nanmax"]:
        same(getattr(np, name)(a, axis=0, where=mask, initial=0.5),
             getattr(numpy, name)(x, axis=0, where=mask, initial=0.5))
        with pytest.raises(ValueError):
            getattr(np, name)(a, where=mask)
    same(np.sum(a, axis=0, initial=10), numpy.sum(x, axis=0, initial=10))
    same(np.max(np.asarray(numpy.zeros((0, 3))), axis=0, initial=-1.0), numpy.max(numpy.zeros((0, 3)), 0, initial=-1.0))

    out = np.zeros(3, dtype="int64")
    res = np.sum(a * 10, axis=1, out=out)
    assert res is out
    same(out, numpy.sum(x * 10, axis=1, out=numpy.zeros(3, "int64")))
    out = np.zeros((1, 5))
    np.mean(a, axis=0, keepdims=True, out=out)
    same(out, x.mean(axis=0, keepdims=True).astype("float64"))
    with pytest.raises(ValueError):
        np.sum(a, axis=0, out=np.zeros(3))


# CI: float16 takes bfloat16's path (a half type with infinities: the same identities and reductions)
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", pytest.param("bfloat16", marks=BY_HAND), "float16",
                                   "int8", "uint16", "bool"])
def test_where_masks_with_the_identity_of_every_dtype(rng, dtype):
    """Left-out elements take the op table's identity: the lowest or highest
    finite value where the type has no infinity (float8 E4M3FN)."""
    import ml_dtypes

    dt = numpy.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    x = rng.uniform(-5, 6, (3, 5)).astype(dt)
    mask = rng.random((3, 5)) > 0.4
    mask[0] = False  # a slice with nothing kept: the result is ``initial`` alone
    a = np.asarray(x)
    for name, initial in (("max", 0), ("min", 1), ("max", 2), ("min", 4)):
        got = getattr(np, name)(a, axis=1, where=mask, initial=initial)
        want = getattr(numpy, name)(x, axis=1, where=mask, initial=initial)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        numpy.testing.assert_array_equal(numpy.asarray(got).astype("float64"), want.astype("float64"), err_msg=name)
    for name in ("sum", "prod", "any", "all"):
        got, want = getattr(np, name)(a, axis=1, where=mask), getattr(numpy, name)(x, axis=1, where=mask)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        # float8 sums round at every step, in NumPy's order and in XLA's
        tol = {"float8_e4m3fn": 0.15, "float8_e5m2": 0.3, "bfloat16": 0.02, "float16": 2e-3}.get(dtype, 0)
        numpy.testing.assert_allclose(numpy.asarray(got).astype("float64"), want.astype("float64"), rtol=tol,
                                      err_msg=name)


def test_argmax_argmin(rng):
    x = sample(rng, (4, 6), "int32")  # few distinct values: ties pick the first
    a = np.asarray(x)
    for name in ["argmax", "argmin"]:
        for axis in [None, 0, 1, -1]:
            for keepdims in [False, True]:
                same(getattr(np, name)(a, axis=axis, keepdims=keepdims),
                     getattr(numpy, name)(x, axis=axis, keepdims=keepdims))
        same(getattr(a, name)(axis=0), getattr(x, name)(axis=0))
        b = sample(rng, (7,), "bool")
        same(getattr(np, name)(np.asarray(b)), getattr(numpy, name)(b))
        same(getattr(np, name)(np.asarray(numpy.float64(3.0))), getattr(numpy, name)(numpy.float64(3.0)))
        out = np.zeros(6, dtype="int64")
        assert getattr(np, name)(a, axis=0, out=out) is out
        same(out, getattr(numpy, name)(x, axis=0))
        with pytest.raises(ValueError):
            getattr(np, name)(np.zeros((0, 3)), axis=0)
        with pytest.raises(AxisError):
            getattr(np, name)(a, axis=2)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "float32"])
def test_cumsum_cumprod(rng, dtype):
    x = sample(rng, (3, 37), dtype)
    a = np.asarray(x)
    for axis in [None, 0, 1, -1]:
        same(np.cumsum(a, axis=axis), numpy.cumsum(x, axis=axis), rtol=1e-4)
        same(a.cumprod(axis=axis), x.cumprod(axis=axis), rtol=1e-4)
    same(numpy.cumsum(a, axis=1), numpy.cumsum(x, axis=1), rtol=1e-4)
    for dt in ["float64", "int16", "bool"]:
        same(np.cumsum(a, axis=1, dtype=dt), numpy.cumsum(x, axis=1, dtype=dt), rtol=1e-4)


def test_scans_exact_for_integers():
    x = numpy.arange(1, 300, dtype=numpy.int64) * (2**55 + 12345)  # wraps many times
    same(np.cumsum(np.asarray(x)), numpy.cumsum(x))
    y = numpy.arange(1, 80, dtype=numpy.int64)
    same(np.cumprod(np.asarray(y)), numpy.cumprod(y))
    same(np.cumsum(np.asarray(numpy.int32(7))), numpy.cumsum(numpy.int32(7)))
    same(np.cumsum(np.zeros((2, 0))), numpy.cumsum(numpy.zeros((2, 0))))


def test_nan_scans_and_cumulative(rng):
    x = sample(rng, (3, 9), "float64", nan=True)
    a = np.asarray(x)
    same(np.nancumsum(a, axis=1), numpy.nancumsum(x, axis=1))
    same(np.nancumprod(a), numpy.nancumprod(x))
    y = sample(rng, (4, 5), "int16")
    b = np.asarray(y)
    for fn in ["cumulative_sum", "cumulative_prod"]:
        for include_initial in [False, True]:
            same(getattr(np, fn)(b, axis=1, include_initial=include_initial),
                 getattr(numpy, fn)(y, axis=1, include_initial=include_initial))
        same(getattr(np, fn)(b[0]), getattr(numpy, fn)(y[0]))
        with pytest.raises(ValueError):
            getattr(np, fn)(b)
    out = np.zeros(9)
    assert np.cumsum(a[0], out=out) is out
    same(out, numpy.cumsum(x[0]))


def test_ptp_and_average(rng):
    x = sample(rng, (3, 4, 5), "float32")
    a = np.asarray(x)
    same(np.ptp(a, axis=(0, 2), keepdims=True), numpy.ptp(x, axis=(0, 2), keepdims=True))
    same(a.ptp(1), numpy.ptp(x, 1))
    i = sample(rng, (6,), "int8")
    same(np.ptp(np.asarray(i)), numpy.ptp(i))
    w = rng.random((3, 4, 5)) + 0.1
    same(np.average(a), numpy.average(x))
    same(np.average(a, axis=1, keepdims=True), numpy.average(x, axis=1, keepdims=True))
    same(np.average(a, weights=w), numpy.average(x, weights=w), rtol=1e-10)
    same(np.average(a, axis=(0, 2), weights=w[:, 0, :]), numpy.average(x, axis=(0, 2), weights=w[:, 0, :]))
    wi = rng.integers(1, 4, 4)
    ints = sample(rng, (3, 4), "int32")
    avg, scl = np.average(np.asarray(ints), axis=1, weights=wi, returned=True)
    want_avg, want_scl = numpy.average(ints, axis=1, weights=wi, returned=True)
    same(avg, want_avg)
    same(scl, want_scl)
    avg, scl = np.average(a, axis=0, returned=True)
    want_avg, want_scl = numpy.average(x, axis=0, returned=True)
    same(avg, want_avg)
    same(scl, want_scl)
    with pytest.raises(TypeError):
        np.average(a, weights=w[0])
    with pytest.raises(ValueError):
        np.average(a, axis=0, weights=w[0])


def test_methods(rng):
    x = sample(rng, (4, 3), "float64")
    a = np.asarray(x)
    same(a.std(axis=0), x.std(axis=0))
    same(a.var(ddof=1), x.var(ddof=1))
    same(a.argmax(), x.argmax())
    same(a.argmin(axis=1, keepdims=True), x.argmin(axis=1, keepdims=True))
    same(a.cumsum(), x.cumsum())
    same(a.cumprod(axis=0), x.cumprod(axis=0))
    same(a.ptp(axis=0), numpy.ptp(x, axis=0))
    same(a.T.sum(axis=0), x.T.sum(axis=0))  # reductions read through views
    same(a[::2, ::-1].cumsum(axis=1), x[::2, ::-1].cumsum(axis=1))


def test_reduction_errors(rng):
    a = np.asarray(sample(rng, (2, 3), "float32"))
    for name in ["sum", "mean", "std", "max", "any", "cumsum", "nanmean", "ptp"]:
        with pytest.raises(AxisError):
            getattr(np, name)(a, axis=2)
    with pytest.raises(AxisError):
        np.sum(a, axis=(0, -3))
    with pytest.raises(ValueError):
        np.sum(a, axis=(0, 0))
    empty = np.zeros((0, 3))
    with pytest.raises(ValueError):
        np.max(empty, axis=0)
    with pytest.raises(ValueError):
        np.nanmin(empty)
    same(np.max(empty, axis=1), numpy.max(numpy.zeros((0, 3)), axis=1))
    same(np.sum(empty, axis=0), numpy.sum(numpy.zeros((0, 3)), axis=0))
    with pytest.raises(TypeError):
        np.nanmean(a, dtype="int32")
    with pytest.raises(ValueError):
        np.sum(a, where=numpy.ones(4, bool))
