"""Ufunc results keep their operands' memory order as NumPy's default order="K"
does: a ufunc of a Fortran-ordered array (or a transpose) gives a
Fortran-ordered result (strides, flags, ravel("K"), tobytes("A") as NumPy's);
row-major operands, ties and broadcasting as NumPy decides."""

import numpy
import pytest

import lazycore.numpy as np
from lazycore.observe import metrics

C = numpy.arange(12.0).reshape(3, 4)
F = numpy.asfortranarray(C * 0.5 - 1)


@pytest.fixture(autouse=True)
def lazy_only():
    metrics.reset()
    yield
    assert metrics.fallbacks() == {}


CASES = [
    ("F + C", lambda m, f, c: m.add(f, c)), ("C + F", lambda m, f, c: m.add(c, f)), ("F + 1", lambda m, f, c: f + 1),
    ("sqrt |F|", lambda m, f, c: m.sqrt(m.abs(f))), ("F.T * C.T", lambda m, f, c: f.T * c.T), ("sin F.T", lambda m, f, c: m.sin(f.T)),
    ("F * row", lambda m, f, c: f * m.ones(4)), ("F < 0", lambda m, f, c: f < 0), ("maximum F, 0", lambda m, f, c: m.maximum(f, 0)),
    ("F, dtype", lambda m, f, c: m.multiply(f, 2, dtype=m.float32)),
]


@pytest.mark.parametrize("name", [n for n, _ in CASES])
def test_results_are_laid_out_as_numpy_lays_them_out(name):
    fn = dict(CASES)[name]
    for _ in range(2):  # the recorded signature's replay too
        got = fn(np, np.asarray(F), np.asarray(C))
        want = fn(numpy, F, C)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.strides == w.strides, (g.strides, w.strides)
            assert (g.flags.c_contiguous, g.flags.f_contiguous) == (w.flags.c_contiguous, w.flags.f_contiguous)
            numpy.testing.assert_array_equal(numpy.asarray(g).ravel("K"), w.ravel("K"))
            assert numpy.asarray(g).tobytes("A") == w.tobytes("A")
