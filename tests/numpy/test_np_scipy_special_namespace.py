"""SciPy's special functions on lazycore.numpy arrays under ``SCIPY_ARRAY_API=1``.

SciPy then dispatches through the array's namespace: with no ``xp.special`` its last
resort called ``np.asarray`` on every argument, a host read no fallback recorded
(``erfinv``, ``ndtri``, ``erf``: 0 fallbacks, 1 transfer to the host each). With
``lazycore.numpy.special`` SciPy's ufunc reaches the frontend: lazy where the frontend
has the loop (``log_expit``), SciPy itself where not, counted at the user's line.
SciPy reads the variable when imported, so the calls run in one child process."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("scipy")

CHILD = textwrap.dedent("""
    import json
    import numpy
    import scipy.special as sp
    import lazycore.numpy as lnp
    from lazycore.observe import metrics

    x = numpy.linspace(-0.9, 0.9, 7)
    out = {}
    for name in ("erfi", "spence", "dawsn", "log_expit", "erfinv", "ndtri", "erf", "erfcinv", "erfcx"):
        metrics.reset()
        got = getattr(sp, name)(lnp.asarray(x) * 1)  # a lazy value: not yet on the host
        before = metrics.counters()
        host = numpy.asarray(got)
        want = getattr(sp, name)(x)
        out[name] = dict(type=type(got).__name__, fallbacks=sorted(metrics.fallbacks()),
                         host_before_read=before["transfers_to_host"] + before["host_reads"],
                         equal=bool(numpy.array_equal(host, want, equal_nan=True)) if name in ("erfi", "spence", "dawsn")
                         else bool(numpy.allclose(host, want, rtol=1e-15, atol=0, equal_nan=True)))
    metrics.reset()
    p = sp.polygamma(1, lnp.asarray(numpy.array([1.0, 2.5])))  # not a ufunc: SciPy, counted
    out["polygamma"] = dict(fallbacks=sorted(metrics.fallbacks()),
                            equal=bool(numpy.array_equal(numpy.asarray(p), sp.polygamma(1, numpy.array([1.0, 2.5])))))
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["erfi", "spence", "dawsn"])
def test_scipy_special_without_a_lazy_loop_is_a_counted_fallback(results, name):
    r = results[name]
    assert r["type"] == "ndarray" and r["equal"], r
    assert r["fallbacks"] == [f"numpy.{name}"], r


@pytest.mark.parametrize("name", ["log_expit", "erfinv", "ndtri", "erf", "erfcinv", "erfcx"])
def test_scipy_special_with_a_lazy_loop_stays_lazy(results, name):
    r = results[name]
    assert r["type"] == "ndarray" and r["equal"], r
    assert r["fallbacks"] == [] and r["host_before_read"] == 0, r


def test_scipy_special_that_is_not_a_ufunc_is_counted(results):
    r = results["polygamma"]
    assert r["equal"] and r["fallbacks"], r
