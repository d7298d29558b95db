"""``np.select`` is lazy with NumPy's result type, broadcasting and errors (issue
39's hunt: a piecewise definition by ``np.select`` ran NumPy, a fallback)."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

_X = numpy.linspace(-3, 3, 13)
_I = numpy.arange(-6, 7)


@pytest.mark.parametrize("case", [
    lambda m, x, i: m.select([x < -1, x > 1], [x ** 2, -x], default=0.5),
    lambda m, x, i: m.select([x < 0], [i]),  # int choice, int default: int64
    lambda m, x, i: m.select([x < 0, x > 2], [i.astype(numpy.int8), 2.5]),  # a Python float among arrays
    lambda m, x, i: m.select([x < 0, i > 3], [x.astype(numpy.float32), i.astype(numpy.int16)], default=numpy.float32(9)),
    lambda m, x, i: m.select([(x > 0)[:, None], (x < -1)[None, :]], [x[:, None], x[None, :] * 2], default=-1.0),
    lambda m, x, i: m.select([x > 0, x > 1], [x, 2 * x]),  # the first condition wins
    lambda m, x, i: m.select([x > 0], [1 + 2j * x], default=0),
])
def test_select_is_lazy_and_numpys(case, clean_runtime):
    want = case(numpy, _X, _I)
    got = case(np, np.asarray(_X), np.asarray(_I))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert numpy.array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}


def test_select_keeps_numpys_errors():
    x = np.asarray(_X)
    with pytest.raises(ValueError, match="same length"):
        np.select([x > 0], [x, x])
    with pytest.raises(ValueError, match="empty condition list"):
        np.select([], [])
    with pytest.raises(TypeError, match="invalid entry 1 in condlist: should be boolean ndarray"):
        np.select([x > 0, x], [x, x])
    with pytest.raises(ValueError):
        np.select([x > 0], [np.ones(4)])
