"""Array API consumers on ``lazycore.numpy`` arrays against the same calls on
NumPy's (issue 39, NumPy side): what test_consumers.py and
test_array_api_wide.py do not hold. The cases are in ``cases_hunt26.py``
(``cases.py``'s protocol and comparison, one child process): scikit-learn's
PCA solvers (randomized with QR normalization, covariance_eigh, whitening,
a variance fraction, Minka's MLE), Ridge and RidgeCV (sample weights, several
targets and alphas, GCV modes, an alpha per target), LDA's transform and
priors, partial_fit of GaussianNB and the scalers, weighted metrics; SciPy's
elementwise root finding and minimization, scipy.differentiate, tanh-sinh
quadrature, IIR filtering (sosfilt, filtfilt), polyphase resampling, STFT,
Welch-family spectra, stats with confidence intervals, scipy.linalg,
spatial.transform.Rotation, ndimage's affine transform and labeled
statistics.

CI runs :data:`CI` and the bug this hunt found: a counted fallback of a 0-d
lazy value (SciPy's special functions without a lazy loop, through
``lazycore.numpy.special``) gave back NumPy's scalar (``numpy.float64``), a
second namespace beside the lazy one, so ``scipy.stats.pearsonr`` on lazy
arrays raised ``TypeError: Multiple namespaces for array inputs`` (its
p-value is ``betaincc`` of the 0-d statistic). ``LAZYCORE_TEST_FULL=1`` runs
every case (minutes).

Three float32 rows are judged by a float64 referee (``cases.Referee``), not by
NumPy's float32 result: scipy.differentiate's jacobian and hessian (finite
differences amplify the last bit of a dot's order and of float32 power, where
NumPy 2.4's AVX512 power is 1 ulp off in 10.6% of elements) and scikit-learn's
laplacian Nystroem (float64 SciPy cdist for NumPy arrays, a float32 loop for
other namespaces: the peer is that loop on torch CPU tensors). The lazy result
passes when it is no further from the same call on float64 copies of the inputs
than the peer's float32 result; the figures are in ``cases_hunt26.py``.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy
import pytest

HERE = pathlib.Path(__file__).resolve().parent

sys.path.insert(0, str(HERE.parent))
from _bits import FULL, cpu_has_avx512  # noqa: E402

CI = ["confusion_matrix(labels,sw)", "signal.sosfilt", "stats.pearsonr(greater)",
      "differentiate.jacobian", "Nystroem(laplacian)"]  # (two float32 rows a float64 referee judges)

for _m in ("sklearn", "scipy", "array_api_extra"):
    pytest.importorskip(_m)


def _child(*args, timeout):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=HERE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


NAMES = json.loads(_child(str(HERE / "cases_hunt26.py"), "--list", timeout=300).strip().splitlines()[-1]) \
    if FULL else CI


@pytest.fixture(scope="module")
def results():
    out = _child(str(HERE / "cases_hunt26.py"), *NAMES, timeout=3600 if FULL else 600)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {(r["case"], r["dtype"]): r for r in rows}


KNOWN = {} if cpu_has_avx512() else {
    ("differentiate.jacobian", "float32"):
        "on a CPU without AVX-512 (an AMD Zen 3, 2026-12-04) NumPy's float32 differences part from lazycore's "
        "elsewhere: lazycore 1.5e-6 from the float64 truth, NumPy 1.19e-6 (over all 30 columns in one call "
        "4.9e-4 against 2.4e-4); on AVX-512 NumPy's is the one far off (2.4e-4 against 1.4e-6). Not found why",
}
"""(case, dtype) -> reason: failures known on this CPU, strict xfails."""


@pytest.mark.parametrize("name, dtype", [
    pytest.param(name, dtype, id=f"{name}-{dtype}",
                 marks=[pytest.mark.xfail(reason=KNOWN[name, dtype], strict=True)] if (name, dtype) in KNOWN else [])
    for name in NAMES for dtype in ("float32", "float64")])
def test_consumer_matches_numpy(results, name, dtype):
    r = results[(name, dtype)]
    if r["status"] == "reference-error":  # NumPy's own run refuses it (an older SciPy)
        pytest.skip(r["error"])
    assert r["status"] == "ok", json.dumps(r, indent=1)
    assert r["noise"] == {}, r["fallbacks"]


_ZERO_D = textwrap.dedent("""
    import json
    import numpy
    import scipy.special as sp
    import lazycore.numpy as lnp
    from lazycore.frontends.numpy.array import ndarray
    from lazycore.observe import metrics

    x = numpy.array([0.25, 0.5])
    a = lnp.asarray(x)
    got = sp.betaincc(a[0] * 0 + 14.0, a[0] * 0 + 14.0, a[1])  # 0-d lazy inputs, no lazy loop
    out = dict(lazy=isinstance(got, ndarray), ns=got.__array_namespace__() is lnp if hasattr(got, "__array_namespace__")
               else False, equal=float(got) == float(sp.betaincc(14.0, 14.0, 0.5)),
               fallbacks=sorted(metrics.fallbacks()))
    import scipy.stats as st
    rng = numpy.random.default_rng(3)
    u = rng.normal(size=30)
    v = u + rng.normal(size=30)
    try:
        r = st.pearsonr(lnp.asarray(u), lnp.asarray(v))
        w = st.pearsonr(u, v)
        out["pearsonr"] = [abs(float(r.statistic) - float(w.statistic)) < 1e-12,
                           abs(float(r.pvalue) - float(w.pvalue)) < 1e-12 * max(1.0, float(w.pvalue))]
    except TypeError as e:
        out["pearsonr"] = str(e)
    print(json.dumps(out))
""")


def test_fallback_of_0d_lazy_values_stays_in_the_lazy_namespace():
    """A counted fallback's NumPy scalar comes back as a lazy scalar (what a lazy ufunc
    gives for 0-d operands), so SciPy's pearsonr sees one namespace."""
    r = json.loads(_child("-c", _ZERO_D, timeout=300).strip().splitlines()[-1])
    assert r["lazy"] and r["ns"] and r["equal"], r
    assert r["fallbacks"] == ["numpy.betaincc"], r
    assert r["pearsonr"] == [True, True], r


@pytest.mark.parametrize("func,args,kw", [
    ("cross", ((4, 3), (2, 1, 3)), {}),
    ("linalg.cross", ((4, 3), (2, 1, 3)), {}),
    ("cross", ((3, 4), (3, 4)), dict(axis=0)),
    ("cross", ((4, 3), (3, 4)), dict(axisb=0, axisc=0)),
], ids=["broadcast", "linalg", "axis", "axisb-axisc"])
def test_cross_product_is_lazy(func, args, kw):
    """``np.cross``/``np.linalg.cross`` of 3-vectors (SciPy's ``Rotation.apply``
    takes two per call) on the device: were counted fallbacks."""
    import numpy

    import lazycore.numpy as lnp
    from lazycore.observe import metrics

    f = numpy.cross if func == "cross" else numpy.linalg.cross
    rng = numpy.random.default_rng(0)
    xs = [rng.normal(size=s) for s in args]
    want = f(*xs, **kw)
    metrics.reset()
    got = f(*[lnp.asarray(x) for x in xs], **kw)
    assert metrics.fallbacks() == {}
    # (NumPy's order of products and differences; XLA may contract one into a fused multiply-add)
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-14, atol=1e-15)


_STRIDED = textwrap.dedent("""
    import json
    import numpy
    from numpy.lib.stride_tricks import as_strided
    import lazycore.numpy as lnp

    v = numpy.arange(7.0)
    n = v.strides[0]
    want = as_strided(v[3:], shape=(4, 4), strides=(-n, n)).copy()  # scipy.linalg.toeplitz's own lines
    got = as_strided(lnp.asarray(v)[3:], shape=(4, 4), strides=(-n, n)).copy()
    print(json.dumps(dict(equal=bool(numpy.array_equal(numpy.asarray(got), want)))))
""")


def test_as_strided_over_a_views_base_as_numpy():
    """``as_strided`` (not dispatched: NumPy calls ``np.asarray``) walks the base's
    memory around a view, as SciPy's toeplitz/hankel/circulant do; the lazy view's
    host copy spans the view only. Run in a child: it reads outside a buffer."""
    r = json.loads(_child("-c", _STRIDED, timeout=300).strip().splitlines()[-1])
    assert r["equal"], r


def test_referee_judges_float32_by_distance_from_float64():
    """``cases.refereed``: the lazy float32 result against the float64 truth, no further
    than the factor times the peer's; the peer's dtypes, integers and NaN places."""
    sys.path.insert(0, str(HERE))
    from cases import refereed

    truth = {"a": numpy.array([1.0, 2.0, 3.0]), "n": numpy.array([1, 2])}
    peer = {"a": numpy.array([1.0, 2.0, 3.25], numpy.float32), "n": numpy.array([1, 2])}

    def judge(a, n=(1, 2), factor=1.0):
        return refereed({"a": a, "n": numpy.array(n)}, peer, truth, factor)

    bad, dist = judge(numpy.array([1.25, 2.0, 3.0], numpy.float32))
    assert bad == [] and dist == {"a": [0.25, 0.25]}, (bad, dist)
    assert judge(numpy.array([1.0, 2.0, 2.5], numpy.float32))[0]  # 0.5 from the truth, the peer 0.25
    assert judge(numpy.array([1.0, 2.0, 2.5], numpy.float32), factor=2.0)[0] == []
    assert judge(numpy.array([1.0, 2.0, 3.0]))[0]  # float64 where the peer gives float32
    assert judge(numpy.array([1.0, 2.0, 3.0], numpy.float32), n=(1, 3))[0]  # integers as the peer's
    assert judge(numpy.array([1.0, numpy.nan, 3.0], numpy.float32))[0]  # NaN where the peer has none
    assert judge(numpy.array([1.0, 2.0], numpy.float32))[0]  # shape
