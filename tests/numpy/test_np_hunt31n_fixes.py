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


_VIEWS = {
    "row": lambda m, a: (a, a[1]),
    "disjoint halves": lambda m, a: (a[:2], a[2:]),
    "interleaved columns": lambda m, a: (a[:, ::2], a[:, 1::2]),
    "copy": lambda m, a: (a, a.copy()),
    "transpose, reversed column": lambda m, a: (a.T, a[::-1, 3]),
    "reversed steps apart": lambda m, a: (a[::-1, ::-2], a[0, :1]),
    "scalar (a copy)": lambda m, a: (a, a[1, 1]),
    "0-d view": lambda m, a: (a, a[1, 1, ...]),
    "empty": lambda m, a: (a[:0], a),
    "reshaped view": lambda m, a: (a.reshape(6, 4)[5], a[3:, 4:]),
    "broadcast": lambda m, a: (m.broadcast_to(a[0], (3, 6)), a[0, 5:]),
    "complex parts": lambda m, a: (lambda c: (c.real, c.imag))(a + 1j),
    "complex part and element": lambda m, a: (lambda c: (c.real, c[1:2]))(a + 1j),
}


@pytest.mark.parametrize("question", ["shares_memory", "may_share_memory"])
@pytest.mark.parametrize("name", list(_VIEWS))
def test_memory_overlap_of_views_is_numpys(name, question, clean_runtime):
    """``np.shares_memory(a, a[1])`` was False: the fallback asked NumPy about two fresh
    host copies. Views of one storage are now answered on their layouts, without a read."""
    host = numpy.arange(24.0).reshape(4, 6)
    want = getattr(numpy, question)(*_VIEWS[name](numpy, host))
    got = getattr(lnp, question)(*_VIEWS[name](lnp, lnp.asarray(host.copy())))
    assert type(got) is type(want) and got == want
    assert metrics.fallbacks() == {}
