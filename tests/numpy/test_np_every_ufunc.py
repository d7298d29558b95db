"""Every ufunc NumPy has is a ufunc object in lazycore.numpy, with NumPy's
methods and attributes (issue 43: "every NumPy method and ufunc method NumPy
documents should exist, lazily or as a counted fallback"). A ufunc with no lazy
loop (cbrt, gcd, logaddexp, ...) was a plain function: ``lnp.logaddexp.reduce``
raised AttributeError, and ``lnp.mod``, NumPy's other name of ``remainder``,
ran on the host though ``remainder`` is lazy."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics
from npcheck import same

METHODS = ("reduce", "accumulate", "outer", "at", "reduceat", "resolve_dtypes")
ATTRIBUTES = ("nin", "nout", "nargs", "identity", "ntypes", "types", "signature", "__name__")
NUMPY_UFUNCS = sorted(n for n, f in vars(numpy).items() if isinstance(f, numpy.ufunc) and f.signature is None)


@pytest.mark.parametrize("name", NUMPY_UFUNCS)
def test_every_ufunc_has_numpys_methods_and_attributes(name):
    ours, theirs = getattr(np, name), getattr(numpy, name)
    for attr in METHODS:
        assert callable(getattr(ours, attr)), (name, attr)
    for attr in ATTRIBUTES:
        assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)


def test_another_name_of_a_lazy_ufunc_is_that_ufunc(clean_runtime):
    assert np.mod is np.remainder
    x = numpy.arange(-5.0, 6.0)
    same(np.mod(np.asarray(x), 3.0), numpy.mod(x, 3.0))
    assert metrics.fallbacks() == {}


def test_methods_of_a_ufunc_without_a_lazy_loop_run_numpy_counted(clean_runtime):
    x = numpy.array([0.5, -1.0, 3.0, 2.0])
    i = numpy.array([[12, 18], [30, 45]])
    same(np.logaddexp.reduce(np.asarray(x.reshape(2, 2))), numpy.logaddexp.reduce(x.reshape(2, 2)))
    same(np.logaddexp.accumulate(np.asarray(x)), numpy.logaddexp.accumulate(x))
    same(np.gcd.reduce(np.asarray(i)), numpy.gcd.reduce(i))
    e = numpy.array([1, -2, 3])
    same(np.ldexp.outer(np.asarray(x), np.asarray(e)), numpy.ldexp.outer(x, e))
    same(np.cbrt(np.asarray(x)), numpy.cbrt(x))
    assert set(metrics.fallbacks()) == {"numpy.logaddexp.reduce", "numpy.logaddexp.accumulate", "numpy.gcd.reduce",
                                        "numpy.ldexp", "numpy.cbrt"}  # (outer: a lazy broadcast, then the call)
