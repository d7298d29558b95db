"""What issue 39's hunt 31n (tests/consumers/test_hunt31n_numpy.py) found wrong in the NumPy
frontend, each against NumPy's own answer."""

import numpy
import pytest

import lazycore.numpy as lnp
from lazycore.observe import metrics


@pytest.mark.parametrize("args,kw", [
    ((0, 1, 7), {}), ((1, 0.5, 3), {}), ((0, 1, 5), {"dtype": int}), ((0, 1, 4), {"endpoint": False}),
    ((numpy.float32(0), numpy.float32(1), 5), {}), ((0, 1, 1), {}), ((0, 1, 0), {}),
], ids=["ints", "down", "int dtype", "no endpoint", "float32", "one", "none"])
def test_linspace_step_is_numpys_scalar(args, kw, clean_runtime):
    """``retstep=True`` gave a Python float where NumPy gives a scalar of the computation
    type (``np.float64``, ``np.float32``): ``step.dtype`` raised AttributeError."""
    want_v, want_s = numpy.linspace(*args, retstep=True, **kw)
    got_v, got_s = lnp.linspace(*args, retstep=True, **kw)
    assert type(got_s) is type(want_s)
    numpy.testing.assert_array_equal(got_s, want_s)
    got = numpy.asarray(got_v)
    assert got.dtype == want_v.dtype and got.shape == want_v.shape
    numpy.testing.assert_array_equal(got, want_v)
    assert metrics.fallbacks() == {}
