"""Complex infinities and NaNs as NumPy classifies them (issue 39: SciPy's
``logsumexp`` of complex infinities gave NaN where NumPy gives -inf).

``isnan``, ``isinf`` and ``isfinite`` of a complex array answered as if every
element were finite and a number (the shared classification took complex types
for integers); ``sign`` of a complex infinity was NaN where NumPy gives the
infinite part's sign, and ``abs`` NaN where C's ``hypot`` gives inf."""

import os
import subprocess
import sys

import numpy
import pytest

import lazycore.numpy as np

_INF, _NAN = numpy.inf, numpy.nan
_Z = numpy.array([complex(r, i) for r in (-_INF, _INF, 0.0, -0.0, 3.0, _NAN) for i in (0.0, -0.0, _INF, -_INF, 4.0, _NAN)])


def _same(got, want):
    got = numpy.asarray(got)
    assert got.dtype == want.dtype
    for part in ((lambda v: v.real, lambda v: v.imag) if want.dtype.kind == "c" else (lambda v: v,)):
        g, w = part(got), part(want)
        # infinities, NaNs and zeros exactly; a finite log2/log10 within an ulp (NumPy
        # scales by 1/ln 10, this divides by ln 10)
        numpy.testing.assert_allclose(g, w, rtol=2 * numpy.finfo(w.dtype).eps if w.dtype.kind == "f" else 0,
                                      atol=0, equal_nan=True)
        signed = ~numpy.isnan(w)  # (a NaN's sign bit is no part of its value)
        assert numpy.array_equal(numpy.isfinite(g), numpy.isfinite(w))
        assert numpy.array_equal(numpy.signbit(g[signed]), numpy.signbit(w[signed]))


@pytest.mark.parametrize("name", ["isnan", "isinf", "isfinite", "sign", "absolute", "log2", "log10"])
@pytest.mark.parametrize("dtype", [numpy.complex64, numpy.complex128])
def test_classification_sign_and_abs_of_complex_specials(name, dtype):
    z = _Z.astype(dtype)
    with numpy.errstate(all="ignore"):
        _same(getattr(np, name)(np.asarray(z)), getattr(numpy, name)(z))


_LSE = """
import itertools, json, numpy, warnings
import lazycore.numpy as np
from scipy.special import logsumexp
warnings.simplefilter("ignore")
inf = numpy.inf
vals = [complex(-inf, 0.0), complex(-inf, inf), complex(inf, 0.0), complex(inf, -inf), complex(-inf, 0.7533), complex(inf, 2.3562)]
bad = []
for x, y in itertools.product(vals, repeat=2):
    got, want = numpy.asarray(logsumexp(np.asarray([x, y]))), logsumexp(numpy.asarray([x, y]))
    if not numpy.array_equal(got, want, equal_nan=True):
        bad.append(repr((x, y, got, want)))
print(json.dumps(bad))
"""


def test_scipy_logsumexp_of_complex_infinities():
    pytest.importorskip("scipy")
    proc = subprocess.run([sys.executable, "-c", _LSE], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, SCIPY_ARRAY_API="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
