"""NumPy users' own code run unchanged with ``import lazycore.numpy as np`` (issue 39's
hunt): calls that ran NumPy on the host (counted fallbacks) for work that needs no host,
now lazy with NumPy's values and dtypes."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import same


def _lazy(x):
    return np.asarray(x) if isinstance(x, numpy.ndarray) else x


# --- count_nonzero: a Monte Carlo estimate's count -------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 1), "keepdims": True}])
@pytest.mark.parametrize("kind", ["float64", "bool", "complex128", "int8"])
def test_count_nonzero_is_lazy(kind, kw, clean_runtime):
    x = numpy.array([[0, 1.5, numpy.nan], [0, 0, -2]])
    if kind == "complex128":
        x = x.astype(complex)
        x[0, 0] = 1j
    elif kind == "bool":
        x = x > 0
    elif kind == "int8":
        x = numpy.nan_to_num(x).astype(numpy.int8)
    got, want = np.count_nonzero(np.asarray(x), **kw), numpy.asarray(numpy.count_nonzero(x, **kw))
    assert numpy.asarray(got).dtype == want.dtype and numpy.array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}
