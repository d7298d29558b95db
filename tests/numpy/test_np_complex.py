"""Complex arrays and numpy.fft in lazycore.numpy against NumPy on the same inputs:
every fft function in every norm mode, odd and even n, axes in any order, the
result dtypes NumPy gives (single precision stays single), the parts as views."""

import warnings

import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.observe import metrics

from _bits import BY_HAND  # (tests/ is on the path)

F32 = (numpy.complex64, numpy.float32)


def close(got, want):
    want = numpy.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    tol = 2e-5 if want.dtype in F32 else 2e-3 if want.dtype == numpy.float16 else 1e-11  # float32 FFT sums round more
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=tol, atol=tol, equal_nan=True)


def cx(shape, dtype=numpy.complex128, seed=0):
    rng = numpy.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def both(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(np, np.asarray(x)), fn(numpy, x)


@pytest.fixture
def no_fallback():
    before = metrics.fallbacks()
    yield
    assert metrics.fallbacks() == before


@pytest.mark.parametrize("dtype", [numpy.complex64, numpy.complex128])
@pytest.mark.parametrize("fn", [
    lambda m, a: a + a[::-1], lambda m, a: a * (2 - 1j), lambda m, a: 1j / (a + 3), lambda m, a: a ** 2,
    lambda m, a: m.abs(a), lambda m, a: m.absolute(a), lambda m, a: m.conj(a), lambda m, a: m.conjugate(a),
    lambda m, a: m.angle(a), lambda m, a: m.angle(a, deg=True), lambda m, a: m.real(a), lambda m, a: m.imag(a),
    lambda m, a: a.real, lambda m, a: a.imag, lambda m, a: a.real[1:] * 2, lambda m, a: m.exp(a),
    lambda m, a: m.log(a), lambda m, a: m.sqrt(a), lambda m, a: m.sign(a), lambda m, a: a == a[::-1],
    lambda m, a: a < a[::-1], lambda m, a: m.maximum(a, a[::-1]), lambda m, a: a.sum(axis=0),
    lambda m, a: a.prod(axis=1), lambda m, a: a.mean(), lambda m, a: m.var(a, axis=0), lambda m, a: m.std(a),
    lambda m, a: a @ a.T, lambda m, a: m.vdot(a, a), lambda m, a: m.linalg.norm(a), lambda m, a: m.isnan(a),
    lambda m, a: a.astype(m.complex128), lambda m, a: m.iscomplexobj(a) and a,
], ids=lambda f: None)
def test_ops_match_numpy(fn, dtype, no_fallback):
    got, want = both(fn, cx((4, 4), dtype).round(1))
    close(got, want)


def test_real_arrays_parts_and_angle(no_fallback):
    x = numpy.array([-1.5, 0.0, -0.0, 2.0, numpy.nan])
    for fn in (lambda m, a: a.real, lambda m, a: a.imag, lambda m, a: m.angle(a), lambda m, a: m.conj(a),
               lambda m, a: m.angle(numpy.arange(3) - 1)):
        close(*both(fn, x))
    for t in (x, np.asarray(x)):  # the zeros of a real array's .imag are read-only
        with pytest.raises(ValueError, match="read-only"):
            t.imag[0] = 1


def test_parts_are_writable_views():
    a = cx((3, 4))
    x = np.asarray(a)
    for t in (a, x):
        t.real[0] = 5
        t.imag[:, 1] += 1
        t.real = t.real * 2
        r = t.imag
        r *= -1
    close(x, a)


def test_complex_literals_and_creation(no_fallback):
    close(np.asarray([1 + 2j, 3]), numpy.asarray([1 + 2j, 3]))
    close(np.zeros(3, dtype=np.complex64) + 1j, numpy.zeros(3, dtype=numpy.complex64) + 1j)
    close(np.asarray(numpy.arange(3.0)) * (1 - 1j), numpy.arange(3.0) * (1 - 1j))
    assert complex(np.asarray(2 + 3j)) == 2 + 3j
    assert np.asarray([1j]).sum().item() == 1j


def test_lexicographic_reductions_run_numpy():
    """max/argmax of complex numbers: NumPy's lexicographic order, by NumPy itself (counted)."""
    a = cx((5,)).round(0)
    before = sum(sum(v.values()) for v in metrics.fallbacks().values())
    assert np.max(np.asarray(a)).item() == numpy.max(a)
    assert int(np.argmax(np.asarray(a))) == int(numpy.argmax(a))
    assert sum(sum(v.values()) for v in metrics.fallbacks().values()) == before + 2


# --- numpy.fft ------------------------------------------------------------------------------

NORMS = [None, "backward", "ortho", "forward"]
ONE = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
REAL_IN = {"rfft", "ihfft", "rfft2", "rfftn"}


@pytest.fixture(scope="module")
def every_norm():
    """The norms' tests of one function, n and dtype share one program: the first of them computes
    every norm's lazy results by one barrier (one compile, not four; None's is backward's) and each
    test compares its own norm's with NumPy's."""
    done = {}

    def results(key, lazy_results):
        if key not in done:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pending = {norm: lazy_results(norm) for norm in NORMS}
            lazycore.mark_step()
            done[key] = pending  # (computed: reading one later runs nothing)
        return done[key]

    return results


def _input(name, dtype, shape=(4, 6, 5)):
    x = cx(shape, dtype)
    return x.real.copy() if name in REAL_IN else x


@pytest.mark.parametrize("dtype", [numpy.complex128, numpy.complex64])
@pytest.mark.parametrize("norm", NORMS)
# CI: n=None (no resize), 3 (a crop, odd: c2r's odd output) and 10 (a pad, even; c2r's only pad) take every
# _resize branch of every function and dtype; 4 (a crop) and 7 (a pad, or c2r's crop) repeat them
@pytest.mark.parametrize("n", [None, 3, pytest.param(4, marks=BY_HAND), pytest.param(7, marks=BY_HAND), 10])
@pytest.mark.parametrize("name", ONE)
def test_fft_1d(name, n, norm, dtype, no_fallback, every_norm):
    x = _input(name, dtype)
    axes = (-1, 0, 1)
    gots = every_norm((name, n, dtype), lambda nm: [getattr(np.fft, name)(np.asarray(x), n=n, axis=axis, norm=nm)
                                                    for axis in axes])[norm]
    assert len(gots) == len(axes)
    for got, axis in zip(gots, axes):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(numpy.fft, name)(x, n=n, axis=axis, norm=norm)
        close(got, want)


@pytest.mark.parametrize("dtype", [numpy.float64, numpy.float32, numpy.int32, numpy.float16])
def test_fft_result_dtypes_are_numpys(dtype, no_fallback):
    x = numpy.arange(8).astype(dtype)
    for name in ("fft", "rfft", "ihfft", "hfft", "irfft"):
        close(*both(lambda m, a: getattr(m.fft, name)(a), x))


@pytest.mark.parametrize("dtype", [numpy.complex128, numpy.complex64])
# CI: None (backward's program: no scale, norm_scale's 1/n for the inverse) and "ortho" (the scale's multiply,
# norm_scale's ortho branch) take every branch; "backward" is None's program, "forward" None's branches with ortho's
# multiply (test_fft_1d's shared program still checks every norm in CI)
@pytest.mark.parametrize("norm", [None, pytest.param("backward", marks=BY_HAND), "ortho",
                                  pytest.param("forward", marks=BY_HAND)])
# CI: ((7, 2), (1, 0)) takes the axes in reversed order (the halved axis not last) and (None, (1, -1)) axes without s:
# (None, (2, 0)) repeats both
@pytest.mark.parametrize("s, axes", [(None, None), ((3, 4), None), ((5, 8), (0, 2)),
                                     pytest.param(None, (2, 0), marks=BY_HAND), ((7, 2), (1, 0)), (None, (1, -1))])
@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn", "irfftn"])
def test_fft_nd(name, s, axes, norm, dtype, no_fallback):
    x = _input(name, dtype)
    kwargs = dict(s=s, norm=norm) if axes is None else dict(s=s, axes=axes, norm=norm)
    close(*both(lambda m, a: getattr(m.fft, name)(a, **kwargs), x))


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_fft_more_than_three_axes(name, no_fallback):
    x = _input(name, numpy.complex128, (2, 3, 2, 4, 3))
    close(*both(lambda m, a: getattr(m.fft, name)(a), x))
    close(*both(lambda m, a: getattr(m.fft, name)(a, axes=(4, 0, 2, 1)), x))


def test_numpy_fft_functions_stay_lazy(no_fallback):
    x = cx((4, 8))
    close(numpy.fft.fft(np.asarray(x)), numpy.fft.fft(x))
    close(numpy.fft.irfft2(np.asarray(x)), numpy.fft.irfft2(x))


def test_fft_errors_are_numpys():
    x = cx((4,))
    for fn in (lambda m, a: m.fft.fft(a, n=0), lambda m, a: m.fft.fft(a, axis=2), lambda m, a: m.fft.fft(a, norm="x"),
               lambda m, a: m.fft.fftn(a, s=(2, 3), axes=(0,)), lambda m, a: m.fft.irfft(a, n=-2)):
        with pytest.raises(Exception) as eager:
            fn(numpy, x)
        with pytest.raises(type(eager.value)):
            fn(np, np.asarray(x))


def test_fft_helpers_run_numpy():
    close(np.fft.fftfreq(8, 0.5), numpy.fft.fftfreq(8, 0.5))


@pytest.mark.parametrize("name", ["arctan", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh",
                                  "rint", "fmax", "fmin"])
def test_ufuncs_written_for_reals_run_numpy_on_complex(name):
    """NumPy's values (its own loop, counted), never the real formula's (sinh and cosh: lazy,
    tests/numpy/test_np_complex_trig_power.py)."""
    uf = getattr(numpy, name)
    x, y = cx((5,), seed=3), cx((5,), seed=4)
    args = (x, y)[:uf.nin]
    before = sum(sum(v.values()) for v in metrics.fallbacks().values())
    close(getattr(np, name)(*(np.asarray(a) for a in args)), uf(*args))
    assert sum(sum(v.values()) for v in metrics.fallbacks().values()) == before + 1


def test_array_api_namespace_lists_the_complex_types():
    info = np.__array_namespace_info__()
    assert set(info.dtypes(kind="complex floating")) == {"complex64", "complex128"}
    assert {"complex64", "complex128"} <= set(info.dtypes(kind="numeric"))
    assert np.complex64 is numpy.complex64 and np.complex128 is numpy.complex128
