"""NumPy's ``linalg.matrix_power`` and ``linalg.multi_dot`` on the lazy device
(issues 39/43: they ran NumPy on the host, a counted fallback, though they
are products alone): NumPy's products in NumPy's order, its result types and
its errors, with no fallback; a negative power is the lazy inverse's power, as NumPy's."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
import npcheck


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()


def _same(got, want):
    npcheck.same(got, want, rtol=1e-5 if want.dtype == numpy.float32 else 1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "complex128"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 12])
def test_matrix_power(rng, n, dtype):
    x = npcheck.sample(rng, (2, 3, 3), dtype, -2, 2)
    got = np.linalg.matrix_power(np.asarray(x), n)
    want = numpy.linalg.matrix_power(x, n)
    assert got.dtype == want.dtype and got.shape == want.shape
    _same(got, want)
    assert metrics.fallbacks() == {}


def test_matrix_power_of_a_negative_exponent_is_the_inverses_power(rng):
    x = npcheck.sample(rng, (3, 3), "float64", -2, 2) + 4 * numpy.eye(3)
    _same(np.linalg.matrix_power(np.asarray(x), -3), numpy.linalg.matrix_power(x, -3))
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("args,error", [
    ((numpy.ones(3), 2), numpy.linalg.LinAlgError),
    ((numpy.ones((2, 3)), 2), numpy.linalg.LinAlgError),
    ((numpy.ones((3, 3)), 1.5), TypeError),
])
def test_matrix_power_errors_are_numpys(args, error):
    with pytest.raises(error) as want:
        numpy.linalg.matrix_power(*args)
    with pytest.raises(error) as got:
        np.linalg.matrix_power(np.asarray(args[0]), args[1])
    assert str(got.value) == str(want.value)


CHAINS = [
    [(4, 6), (6, 2), (2, 5)],
    [(10, 2), (2, 9), (9, 3)],
    [(3, 8), (8, 2), (2, 7), (7, 4)],
    [(6, 1), (1, 9), (9, 2), (2, 8), (8, 3)],
    [(5,), (5, 3), (3, 4)],
    [(4, 3), (3, 6), (6,)],
    [(5,), (5, 3), (3, 2), (2,)],
    [(3, 4), (4, 2)],
]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32"])
@pytest.mark.parametrize("shapes", CHAINS, ids=str)
def test_multi_dot(rng, shapes, dtype):
    xs = [npcheck.sample(rng, s, dtype, -3, 3) for s in shapes]
    got = np.linalg.multi_dot([np.asarray(x) for x in xs])
    want = numpy.linalg.multi_dot(xs)
    if numpy.ndim(want) == 0:  # two 1-d ends: NumPy's scalar
        assert numpy.shape(got) == () and numpy.asarray(got).dtype == want.dtype
        numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-5)
    else:
        _same(got, want)
    assert metrics.fallbacks() == {}


def test_multi_dot_errors_are_numpys():
    for arrays, error in (([numpy.ones((2, 2))], ValueError),
                          ([numpy.ones((2, 2)), numpy.ones((2, 2, 2)), numpy.ones((2, 2))],
                           numpy.linalg.LinAlgError)):
        with pytest.raises(error) as want:
            numpy.linalg.multi_dot(arrays)
        with pytest.raises(error) as got:
            np.linalg.multi_dot([np.asarray(a) for a in arrays])
        assert str(got.value) == str(want.value)
