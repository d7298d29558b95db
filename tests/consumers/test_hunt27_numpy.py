"""Issue 39's hunt, session 27, NumPy side: scikit-learn under ``array_api_dispatch`` with
the options the earlier hunts left out (multilabel, binary and weighted averages, tweedie
powers, every ``pairwise_kernels`` kernel, cross-validation and search tools, float32 beside
float64, LogisticRegression/PoissonRegressor options, FrozenEstimator, move_estimator_to),
SciPy's Array API paths in stats, special, signal, fft, cluster.vq and spatial.distance,
and users' plain NumPy scripts (k-means with ``bincount``, logistic regression and a
two-layer net by hand, Mandelbrot, Game of Life, Monte Carlo with ``default_rng``,
stride-trick convolution, ``einsum``, ``linalg``, ``fft``, sorting and histograms, masked
writes, ``np.ix_``, scalar loops, dtype corners, ``np.errstate``), each against NumPy's run.
The cases are in ``cases_hunt27_numpy.py`` (``cases.py``'s protocol and comparison, plus
the lazy run's host reads).

What the hunt found falling back, now lazy (each test below fails before): ``np.errstate``
and NumPy's other state functions through ``lazycore.numpy`` (counted fallbacks),
``np.ix_``, ``np.lexsort``, ``np.digitize``, ``np.copyto``, ``np.einsum_path`` (it read
every operand for their shapes), ``np.isposinf``/``np.isneginf`` (SciPy's ``stats.Normal``),
``np.linalg.matrix_power`` of a negative power.

CI runs :data:`CI_SCRIPTS` in this process (float64) and the tests of the fixes;
``LAZYCORE_TEST_FULL=1`` runs every case (both dtypes) in one child process (scikit-learn's
dispatch is process-wide; about 15 minutes at load 20).
"""

import json
import os
import pathlib
import subprocess
import sys
import warnings

import numpy
import pytest

import lazycore.numpy as lnp
from lazycore.observe import metrics
from _bits import FULL  # (tests/ is on the path)

HERE = pathlib.Path(__file__).resolve().parent

# plain NumPy scripts run here, each with the fallbacks it may still record (documented ones:
# ``add.at``, ``partition``'s NumPy order, ``histogram`` with edges from the values)
CI_SCRIPTS = {"script.errstate": set(), "script.ix_,add.at": {"numpy.add.at"}, "script.einsum_path": set(),
              "script.digitize,lexsort,partition": {"numpy.partition", "numpy.argpartition", "numpy.histogram"}}


def _child(*args, timeout):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, str(HERE / "cases_hunt27_numpy.py"), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=HERE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


NAMES = json.loads(_child("--list", timeout=300).strip().splitlines()[-1]) if FULL else []


@pytest.fixture(scope="module")
def results():
    for m in ("sklearn", "scipy"):
        pytest.importorskip(m)
    out = _child(*NAMES, timeout=3600)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {(r["case"], r["dtype"]): r for r in rows}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_case_matches_numpy(results, name, dtype):
    r = results[(name, dtype)]
    if r["status"] == "reference-error":  # NumPy's own run refuses it
        pytest.skip(r["error"])
    assert r["status"] == "ok", json.dumps(r, indent=1)
    assert r["noise"] == {}, r["fallbacks"]
    assert r["reads"]["unannounced"] == 0, r["reads"]


@pytest.fixture(scope="module")
def scripts():
    import cases
    import cases_hunt27_numpy

    if not any(n.startswith("script.") for n in cases.CASES):
        cases_hunt27_numpy.scripts()
    return cases


@pytest.mark.parametrize("name", sorted(CI_SCRIPTS))
def test_script_matches_numpy_without_new_fallbacks(scripts, name, clean_runtime):
    r = scripts.run_case(name, "float64")
    assert r["status"] == "ok", json.dumps(r, indent=1)
    assert set(r["fallbacks"]) <= CI_SCRIPTS[name], r["fallbacks"]


def test_errstate_and_numpys_other_state_are_numpys_own(clean_runtime):
    """``with np.errstate(...)`` under ``import lazycore.numpy as np`` was a counted fallback
    a call; the lazy ufuncs read NumPy's state, so it is NumPy's own object."""
    for name in ("errstate", "seterr", "geterr", "seterrcall", "geterrcall", "printoptions", "set_printoptions",
                 "get_printoptions"):
        assert getattr(lnp, name) is getattr(numpy, name), name
    a = lnp.asarray(numpy.array([1.0, 0.0]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lnp.errstate(divide="warn"):
            numpy.asarray(a / lnp.asarray(numpy.array([0.0, 1.0])))
    assert [str(w.message) for w in caught] == ["divide by zero encountered in divide"]
    with lnp.errstate(divide="ignore"):
        assert lnp.geterr()["divide"] == "ignore"
    assert metrics.fallbacks() == {}


_A = numpy.arange(30.0).reshape(5, 6)


@pytest.mark.parametrize("args", [
    ([0, 2, 4], [1, 3]), ([True, False, True, False, True], numpy.array([4, 0])), ([1, 0, 2],), ([], [1]),
], ids=["lists", "bool", "one", "empty"])
@pytest.mark.parametrize("lazy_args", [False, True])
def test_ix_is_lazy(args, lazy_args, clean_runtime):
    want = numpy.ix_(*args)
    got = lnp.ix_(*[lnp.asarray(numpy.asarray(x)) if lazy_args and len(x) else x for x in args])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert isinstance(g, lnp.ndarray) and g.shape == w.shape and numpy.array_equal(numpy.asarray(g), w)
    if len(args) == 2:
        A = lnp.asarray(_A)
        assert numpy.array_equal(numpy.asarray(A[got]), _A[want])
        A[got] = -1.0
        B = _A.copy()
        B[want] = -1.0
        assert numpy.array_equal(numpy.asarray(A), B)
    assert metrics.fallbacks() == {}


def test_ix_keeps_numpys_error():
    with pytest.raises(ValueError, match="Cross index must be 1 dimensional"):
        lnp.ix_(lnp.asarray(numpy.zeros((2, 2), int)), [1])


@pytest.mark.parametrize("shape,axis", [((3, 12), -1), ((2, 4, 5), 1)])
def test_lexsort_is_lazy(shape, axis, clean_runtime):
    keys = numpy.random.default_rng(1).integers(0, 3, shape).astype(numpy.float64)
    keys[0].flat[::5] = numpy.nan  # NaN last, as NumPy's sort
    want = numpy.lexsort(keys, axis=axis)
    assert numpy.array_equal(numpy.asarray(numpy.lexsort(lnp.asarray(keys), axis=axis)), want)
    assert numpy.array_equal(numpy.asarray(lnp.lexsort([lnp.asarray(k) for k in keys], axis=axis)), want)
    assert metrics.fallbacks() == {}


def test_lexsort_keeps_numpys_errors():
    with pytest.raises(ValueError):
        lnp.lexsort((lnp.asarray(numpy.zeros(3)), lnp.asarray(numpy.zeros(4))))
    with pytest.raises(TypeError):
        lnp.lexsort([])


@pytest.mark.parametrize("edges", [[-1.0, 0.0, 1.0, 2.0], [2.0, 1.0, 0.0, -1.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0],
                                   [5.0]], ids=["up", "down", "repeats", "flat", "one"])
@pytest.mark.parametrize("right", [False, True])
def test_digitize_is_lazy(edges, right, clean_runtime):
    x = numpy.random.default_rng(2).normal(size=40)
    x[:4] = [numpy.nan, 1.0, 0.0, -1.0]
    want = numpy.digitize(x, edges, right=right)
    for e in (edges, lnp.asarray(numpy.array(edges))):
        got = numpy.digitize(lnp.asarray(x), e, right=right)
        assert numpy.asarray(got).dtype == want.dtype and numpy.array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}


def test_digitize_keeps_numpys_errors():
    for edges in ([1.0, 0.0, 2.0], [[1.0, 2.0]]):
        with pytest.raises(ValueError) as lazy:
            lnp.digitize(lnp.asarray(numpy.zeros(3)), edges)
        with pytest.raises(ValueError) as eager:
            numpy.digitize(numpy.zeros(3), edges)
        assert str(lazy.value) == str(eager.value)
    with pytest.raises(TypeError, match="x may not be complex"):
        lnp.digitize(lnp.asarray(numpy.zeros(3, complex)), [0.0, 1.0])


_X = numpy.random.default_rng(3).normal(size=(4, 5))


@pytest.mark.parametrize("dst,src,kw", [
    (_X, _X * 2, dict(where=_X > 0)), (_X, 3.5, {}), (numpy.arange(20).reshape(4, 5), _X,
                                                      dict(casting="unsafe", where=_X > 0)),
    (_X, _X[0], dict(where=(_X > 0)[:, :1])), (numpy.zeros(5, numpy.float32), _X[0], {}),
    (numpy.zeros(3, numpy.int32), 2.5, dict(casting="unsafe", where=[True, False, True])),
    (numpy.zeros(3, numpy.int32), True, {}), (_X, _X, dict(where=False)),
], ids=["where", "number", "unsafe", "broadcast", "narrowing", "list-where", "bool", "where-false"])
def test_copyto_is_a_lazy_select(dst, src, kw, clean_runtime):
    want = dst.copy()
    numpy.copyto(want, src, **kw)
    got = lnp.asarray(dst.copy())
    lazy = lambda v: lnp.asarray(v) if isinstance(v, numpy.ndarray) else v  # noqa: E731
    assert numpy.copyto(got, lazy(src), **{k: lazy(v) for k, v in kw.items()}) is None
    assert numpy.asarray(got).dtype == want.dtype and numpy.array_equal(numpy.asarray(got), want)
    assert metrics.fallbacks() == {}


def test_copyto_writes_through_a_view(clean_runtime):
    a = lnp.asarray(_X.copy())
    lnp.copyto(a[:, 1], 7.0, where=lnp.asarray(_X[:, 1] > 0))
    want = _X.copy()
    want[:, 1][_X[:, 1] > 0] = 7.0
    assert numpy.array_equal(numpy.asarray(a), want)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("dst,src,kw", [
    (numpy.zeros(3, numpy.int32), 2.5, {}), (numpy.zeros((4, 5)), _X[:3], {}), (numpy.zeros(3, numpy.uint8), 300, {}),
    (_X, _X, dict(where=numpy.ones((4, 5), int))), (numpy.arange(4), _X[0, :4], {}),
], ids=["number-cast", "shape", "overflow", "int-where", "array-cast"])
def test_copyto_keeps_numpys_errors(dst, src, kw):
    with pytest.raises(Exception) as eager:
        numpy.copyto(dst.copy(), src, **kw)
    lazy = lambda v: lnp.asarray(v) if isinstance(v, numpy.ndarray) else v  # noqa: E731
    with pytest.raises(eager.type) as got:
        numpy.copyto(lnp.asarray(dst.copy()), lazy(src), **{k: lazy(v) for k, v in kw.items()})
    assert str(got.value) == str(eager.value)
    with pytest.raises(ValueError, match="read-only"):
        lnp.copyto(lnp.broadcast_to(lnp.asarray(_X[0]), (4, 5)), 1.0)


def test_einsum_path_reads_no_value(clean_runtime):
    """NumPy's planner needs the shapes only: it read every lazy operand (a counted fallback)."""
    ops = [numpy.ones(s) for s in ((3, 4), (4, 5), (5, 2))]
    lazy = [lnp.asarray(o) * 2 for o in ops]  # pending: reading them would run a program
    metrics.reset()
    for opt in ("greedy", "optimal"):
        assert numpy.einsum_path("ij,jk,kl->il", *lazy, optimize=opt) == numpy.einsum_path("ij,jk,kl->il", *ops,
                                                                                           optimize=opt)
    assert lnp.einsum_path(lazy[0], [0, 1], lazy[1], [1, 2], [0, 2])[0] == ["einsum_path", (0, 1)]
    assert metrics.fallbacks() == {}
    assert metrics.counters().get("transfers_to_host", 0) == 0


def test_isposinf_isneginf_are_lazy(clean_runtime):
    x = numpy.array([-numpy.inf, -0.0, 0.0, numpy.inf, numpy.nan, 1.0])
    for f in ("isposinf", "isneginf"):
        want = getattr(numpy, f)(x)
        got = getattr(numpy, f)(lnp.asarray(x))
        assert isinstance(got, lnp.ndarray) and numpy.array_equal(numpy.asarray(got), want)
        assert numpy.array_equal(numpy.asarray(getattr(lnp, f)(lnp.asarray(x))), want)
    assert metrics.fallbacks() == {}
    with pytest.raises(TypeError, match="not supported for complex128"):
        lnp.isposinf(lnp.asarray(numpy.array([1j])))


def test_matrix_power_of_a_negative_power_is_lazy(clean_runtime):
    n = -5
    S = numpy.array([[4.0, 1.0, 0.5], [2.0, 3.0, 0.0], [0.0, 1.0, 2.0]])
    got = numpy.linalg.matrix_power(lnp.asarray(S), n)
    numpy.testing.assert_allclose(numpy.asarray(got), numpy.linalg.matrix_power(S, n), rtol=1e-13)
    assert metrics.fallbacks() == {}
