"""SciPy's special-function ufuncs on lazycore.numpy arrays (they reach ``__array_ufunc__``
as NumPy's do): lazy where they compose from lazycore's loops as SciPy computes them
(``log_expit``), SciPy itself (counted) where SciPy has its own approximations."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

sp = pytest.importorskip("scipy.special")

EDGES = numpy.array([-800.0, -40.0, -1.0, -0.0, 0.0, 1e-300, 2.0, 40.0, 800.0, numpy.inf, -numpy.inf, numpy.nan])


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int32"])
def test_log_expit_is_lazy_with_scipys_answers(dtype):
    rng = numpy.random.default_rng(0)
    x = numpy.concatenate([EDGES, rng.normal(scale=20, size=500)]) if dtype[0] == "f" else rng.integers(-50, 50, 64)
    x = x.astype(dtype)
    with numpy.errstate(all="ignore"):
        want = sp.log_expit(x)
    got = sp.log_expit(np.asarray(x) * 1)
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
    host = numpy.asarray(got)
    tol = 1e-6 if want.dtype == numpy.float32 else 1e-15  # exp and log1p: an ulp or two from SciPy's libm
    numpy.testing.assert_allclose(host, want, rtol=tol, atol=0, equal_nan=True)
    assert (numpy.signbit(host) == numpy.signbit(want)).all()  # log_expit(inf) is -0.0
    assert metrics.fallbacks() == {}


def test_scipy_ufuncs_without_a_lazy_loop_run_scipy_counted():
    x = numpy.array([0.25, 1.0, 1.75])
    got = sp.dawsn(np.asarray(x))
    numpy.testing.assert_array_equal(numpy.asarray(got), sp.dawsn(x))
    assert set(metrics.fallbacks()) == {"numpy.dawsn"}
