"""SciPy's special functions on lazycore.numpy arrays, computed on the device as SciPy's xsf
library computes them (frontends/numpy/scipy_loops.py): expit, logit, xlogy, xlog1py, entr,
rel_entr, kl_div, erf, erfc, erfcx, ndtr, log_ndtr, ndtri, ndtri_exp, erfinv, erfcinv, gammaln, loggamma,
digamma, i0, i0e, i1 and i1e (before: each a counted fallback, SciPy on a host copy).

Answers: against mpmath (40 digits) on grids that hold each function's branch points, tails
and special values, in float64 and float32: a float32 result is at most an ulp farther from
the true value than SciPy's (both round an f64 value once), a float64 one at most 4 ulps
or twice SciPy's own error (XLA's log, exp, sin, cos: an ulp, glibc's: half of one);
where SciPy's answer is NaN, an infinity or a zero, the lazy one is the same, sign included. The dtype, broadcasting, ``out=`` and 0-d rules are NumPy's
resolution of SciPy's ufunc. CI checks each grid in one program per dtype; with
``LAZYCORE_TEST_FULL=1`` the random part of each grid is larger.
"""

import numpy
import pytest

import lazycore
import lazycore.numpy as np
from lazycore.observe import metrics
from _bits import FULL  # (tests/ is on the path)

sp = pytest.importorskip("scipy.special")
mpmath = pytest.importorskip("mpmath")
N = 2000 if FULL else 40

inf, nan = numpy.inf, numpy.nan
rng = numpy.random.default_rng(7)


def _grid(points, random):
    return numpy.concatenate([numpy.array(points, dtype=numpy.float64), random])


def _pairs(xs, ys, random_x, random_y):
    x, y = numpy.meshgrid(numpy.array(xs, dtype=numpy.float64), numpy.array(ys, dtype=numpy.float64))
    return (numpy.concatenate([x.ravel(), random_x]), numpy.concatenate([y.ravel(), random_y]))


SPECIAL = [inf, -inf, nan, 0.0, -0.0]
GRIDS = {
    "expit": (_grid(SPECIAL + [-800, -745, -40, -20, -5, -1, -1e-10, 1e-300, 0.5, 3, 20, 37, 40, 89, 710, 800],
                    rng.normal(scale=30, size=N)),),
    "logit": (_grid(SPECIAL + [1e-300, 1e-10, 0.1, 0.29999, 0.3, 0.31, 0.5, 0.6, 0.65, 0.66, 0.9, 1 - 1e-10, 1,
                               -0.1, 1.1], rng.uniform(size=N)),),
    "xlogy": _pairs([0, -0.0, 1, -2.5, 1e-300, 3e5, inf, -inf, nan], [0, -0.0, 1e-300, 0.5, 1, 3, 1e300, inf, nan, -1],
                    rng.normal(size=N), rng.uniform(0, 5, size=N)),
    "xlog1py": _pairs([0, -0.0, 1, -2.5, 1e-300, inf, nan], [-1, -0.5, -1e-10, 0, 1e-10, 1, 1e300, inf, nan, -2],
                      rng.normal(size=N), rng.uniform(-1, 5, size=N)),
    "entr": (_grid(SPECIAL + [-1, 1e-300, 1e-10, 0.5, 1, 2, 1e300], rng.uniform(0, 3, size=N)),),
    "rel_entr": _pairs([-1, 0, -0.0, 1e-300, 1e-10, 0.3, 1, 1.5, 1e300, inf, nan],
                       [-1, 0, 1e-300, 1e-10, 0.3, 0.31, 1, 1.5, 3, 1e300, inf, nan],
                       rng.uniform(0, 2, size=N), rng.uniform(0, 2, size=N)),
    "kl_div": _pairs([-1, 0, -0.0, 1e-300, 1e-10, 0.3, 1, 1.5, 1e300, inf, nan],
                     [-1, 0, 1e-300, 1e-10, 0.3, 0.31, 1, 1.5, 3, 1e300, inf, nan],
                     rng.uniform(0, 2, size=N), rng.uniform(0, 2, size=N)),
    "erf": (_grid(SPECIAL + [-30, -10, -6, -5, -1.5, -1, -0.99, -1e-10, 1e-300, 0.5, 1, 1.2, 3, 5.9, 6, 7.9, 8, 10,
                             26, 27, 30], rng.normal(scale=3, size=N)),),
    "erfc": (_grid(SPECIAL + [-30, -10, -6, -5, -1.5, -1, -0.99, -1e-10, 1e-300, 0.5, 1, 1.2, 3, 5.9, 6, 7.9, 8,
                              10, 26, 26.6, 26.7, 27, 30], rng.normal(scale=6, size=N)),),
    "ndtr": (_grid(SPECIAL + [-40, -38.5, -37.5, -30, -20, -8.5, -5, -1.5, -1.4142, -1, -0.5, 0.5, 1, 1.4142,
                              1.5, 5, 8.3, 9, 40], rng.normal(scale=5, size=N)),),
    "log_ndtr": (_grid(SPECIAL + [-1e200, -1e10, -1e5, -100, -71, -70.7, -50, -11.4, -11.2, -5, -1.5, -1.0001, -1,
                                  -0.999, 0.5, 1, 5, 8.3, 9, 40], rng.normal(scale=20, size=N)),),
    "ndtri": (_grid(SPECIAL + [1e-300, 1e-20, 1e-14, 1.2e-14, 1e-5, 0.1, 0.135, 0.14, 0.5, 0.86, 0.865, 0.9,
                               1 - 1e-10, 1, -0.1, 1.1], rng.uniform(size=N)),),
    "erfinv": (_grid(SPECIAL + [-1, -0.999, -0.5, -1e-7, -5e-8, 1e-300, 5e-8, 1e-7, 2e-7, 0.5, 0.9999999, 1, 1.5,
                                -1.5], rng.uniform(-1, 1, size=N)),),
    "gammaln": (_grid(SPECIAL + [-1e10 - 0.5, -100.5, -35.3, -34, -33.7, -5.5, -3, -1, -0.5, -1e-10, 1e-300, 1e-10,
                                 0.5, 1, 1.5, 2, 2.5, 3, 12.9, 13, 13.1, 100, 999.9, 1000, 1e5, 1e8, 1e9, 1e300],
                      numpy.concatenate([rng.uniform(-40, 40, size=N), rng.uniform(0, 3, size=N)])),),
    "digamma": (_grid(SPECIAL + [-10.3, -3, -1, -0.81, -0.8, -0.7, -0.504, -0.5, -0.3, -0.2, -1e-10, 1e-300, 1e-10,
                                 0.5, 1, 1.46163, 2, 2.5, 9.5, 10, 10.5, 1e5, 1e17, 1e20],
                      numpy.concatenate([rng.uniform(-10, 20, size=N), rng.uniform(-0.81, -0.2, size=N)])),),
    "erfcx": (_grid(SPECIAL + [-1e300, -27, -26.7, -26.6, -10, -6.2, -6.1, -6, -3, -1, -0.7, -1e-10, 1e-300, 1e-10,
                               0.3, 0.5, 0.7, 0.71, 0.9, 0.999, 1, 1.001, 2, 7.9, 8, 8.1, 20, 49.9, 50, 50.1, 1e3,
                               4e7, 5e7, 6e7, 1e10, 1e300],
                     numpy.concatenate([rng.normal(scale=3, size=N), rng.uniform(0, 1.2, size=N),
                                        rng.uniform(-6.1, 0, size=N)])),),
    "erfcinv": (_grid(SPECIAL + [-1, 1e-300, 1e-20, 1e-5, 0.05, 0.27, 0.28, 0.5, 1, 1.5, 1.72, 1.73, 1.9,
                                 2 - 1e-10, 2, 2.5], rng.uniform(0, 2, size=N)),),
    "ndtri_exp": (_grid(SPECIAL + [-1e300, -1e200, -1e10, -1e4, -700, -20, -2.0000001, -2, -1.9999999, -1,
                                   -0.1455, -0.14541345786885906, -0.1454, -1e-10, -1e-300, 1e-300, 1],
                        numpy.concatenate([-rng.exponential(scale=3, size=N), rng.uniform(-2.5, 0, size=N)])),),
    "loggamma": (_grid(SPECIAL + [-1e10, -3, -1, -0.5, -1e-300, 1e-300, 1e-10, 0.5, 1, 1.5, 2, 2.5, 3, 12.9, 13,
                                  13.1, 100, 999.9, 1000, 1e5, 1e8, 1e9, 1e300], rng.uniform(-5, 40, size=N)),),
    **{name: (_grid(SPECIAL + [-800, -713, -711, -709, -30, -8.0001, -8, -7.9999, -1, -1e-10, 1e-300, 0.5, 3, 8, 8.0001,
                          20, 700, 709, 709.8, 711, 713, 800, 1e300], rng.normal(scale=30, size=N)),)
       for name in ("i0", "i0e", "i1", "i1e")},
}


def _mp(v):
    return mpmath.mpf(float(v))


def _ndtri_ref(p):
    if not 0 < p < 1:
        return None
    guess = float(sp.ndtri(float(p)))
    return mpmath.findroot(lambda t: mpmath.ncdf(t) - p, guess)


def _log_ndtr_tail(x):
    """log ndtr(x) far below 0 (mpmath's erfc overflows there): its asymptotic series."""
    return -x * x / 2 - mpmath.log(-x * mpmath.sqrt(2 * mpmath.pi)) + mpmath.log1p(-1 / x**2 + 3 / x**4 - 15 / x**6)


def _xlog(x, y, log):
    if x == 0:
        return mpmath.mpf(0)
    return x * log(y)


def _erfcx_ref(x):
    if x > 1e6:  # (mpmath's erfc fails far out: the asymptotic series)
        return (1 - 1 / (2 * x**2) + 3 / (4 * x**4) - 15 / (8 * x**6)) / (x * mpmath.sqrt(mpmath.pi))
    return mpmath.exp(x * x) * mpmath.erfc(x)


_NDTRI_EXP_UPPER = numpy.log1p(-numpy.exp(-2.0))


def _erfcinv_ref(y):
    if not 0 < y < 2:
        return None
    return -_ndtri_ref(y / 2) / mpmath.sqrt(2)


def _ndtri_exp_ref(y):
    if not y < 0:
        return None
    guess = float(sp.ndtri_exp(float(y)))
    if y < -1e4:  # (mpmath's ncdf underflows there: the tail's asymptotic series)
        return mpmath.findroot(lambda t: _log_ndtr_tail(t) - y, guess)
    return mpmath.findroot(lambda t: mpmath.log(mpmath.ncdf(t)) - y, guess)


REFERENCES = {  # the true values (None: not a finite real number; SciPy's answer decides there)
    "expit": lambda x: 1 / (1 + mpmath.exp(-x)),
    "logit": lambda x: mpmath.log(x / (1 - x)) if 0 < x < 1 else None,
    "xlogy": lambda x, y: _xlog(x, y, mpmath.log) if y > 0 or x == 0 else None,
    "xlog1py": lambda x, y: _xlog(x, y, mpmath.log1p) if y > -1 or x == 0 else None,
    "entr": lambda x: -x * mpmath.log(x) if x > 0 else None,
    "rel_entr": lambda x, y: x * mpmath.log(x / y) if x > 0 and y > 0 else None,
    "kl_div": lambda x, y: x * mpmath.log(x / y) - x + y if x > 0 and y > 0 else None,
    "erf": mpmath.erf,
    "erfc": mpmath.erfc,
    "ndtr": mpmath.ncdf,
    "log_ndtr": lambda x: (mpmath.log1p(-mpmath.ncdf(-x)) if x > 0 else mpmath.log(mpmath.ncdf(x)) if x > -1e4
                           else _log_ndtr_tail(x)),
    "ndtri": _ndtri_ref,
    "erfinv": lambda y: mpmath.erfinv(y) if -1 < y < 1 else None,
    "gammaln": lambda x: mpmath.re(mpmath.loggamma(x)) if not (x <= 0 and x == int(x)) else None,
    "loggamma": lambda x: mpmath.loggamma(x) if x > 0 else None,
    "erfcx": _erfcx_ref,
    "erfcinv": _erfcinv_ref,
    "ndtri_exp": _ndtri_exp_ref,
    "digamma": lambda x: mpmath.digamma(x) if not (x <= 0 and x == int(x)) else None,
    "i0": lambda x: mpmath.besseli(0, x),
    "i0e": lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(0, x),
    "i1": lambda x: mpmath.besseli(1, x),
    "i1e": lambda x: mpmath.exp(-abs(x)) * mpmath.besseli(1, x),
}


def _truth(name, args):
    fn = REFERENCES[name]
    out = []
    with mpmath.workdps(40):
        for vals in zip(*args):
            if not all(numpy.isfinite(vals)):
                out.append(None)
                continue
            try:
                out.append(fn(*(_mp(v) for v in vals)))
            except (ValueError, ZeroDivisionError):
                out.append(None)
    return out


def _ulps(values, truth, dtype):
    """|value - truth| in ulps of the truth (in ``dtype``); None where the truth is None."""
    out = []
    with mpmath.workdps(40):
        for v, t in zip(values, truth):
            if t is None:
                out.append(None)
                continue
            rounded = dtype.type(float(t))
            if not numpy.isfinite(rounded):  # beyond the type's range: the value must be the infinity
                out.append(0.0 if v == rounded else inf)
                continue
            spacing = float(numpy.spacing(abs(rounded)))
            out.append(float(abs(_mp(v) - t)) / spacing)
    return out


def _lazy(name, args):
    return getattr(sp, name)(*(np.asarray(a) for a in args))


def _check(name, args, got, dtype):
    want = getattr(sp, name)(*args)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype)
    # SciPy's NaNs, infinities and zeros, signs included
    edge = ~numpy.isfinite(want) | (want == 0)
    same = ((got == want) & (numpy.signbit(got) == numpy.signbit(want))) | (numpy.isnan(got) & numpy.isnan(want))
    bad = numpy.flatnonzero(edge & ~same)
    assert bad.size == 0, [(name, *(a[i] for a in args), got[i], want[i]) for i in bad[:8]]
    # subnormal answers: XLA's CPU programs flush them to zero (as every lazycore program does)
    tiny = numpy.finfo(want.dtype).tiny
    subnormal = numpy.isfinite(want) & (abs(want) < tiny) & (want != 0)
    assert (abs(got[subnormal]) < tiny).all(), [(name, *(a[i] for a in args)) for i in numpy.flatnonzero(subnormal)]
    edge |= subnormal
    # elsewhere: as close to the true value as SciPy, give or take the primitives' ulps: float32
    # results are f64 ones rounded once (as SciPy's), within an ulp of SciPy's error; in float64
    # XLA's log, exp, sin and cos are within an ulp where glibc's are within half of one, a few
    # of them per formula (4 ulps), and where SciPy's own error is large (an ill-conditioned
    # cancellation) twice SciPy's. digamma below -0.8 is psi(1 - x) - pi cot(pi x): 2 ulps of the
    # cotangent (sin/cos where SciPy calls tan) are 2 |pi cot(pi x)| / |psi(x)| ulps of the result.
    # ndtri_exp from -2 is ndtri(p), p = exp(y) (-ndtri(-expm1(y)) above log(1 - exp(-2))): an ulp
    # of XLA's exp is ulp(p) / npdf(x) in x (up to 7 ulps of x near y = -0.5)
    truth = _truth(name, args)
    worse = []
    for i, (g, w) in enumerate(zip(_ulps(got, truth, want.dtype), _ulps(want, truth, want.dtype))):
        if g is None or w is None or edge[i]:
            continue
        bound = max(w + 4.0, 2 * w) if dtype == numpy.float64 else w + 1.0
        if name == "digamma" and args[0][i] < -0.8:
            with mpmath.workdps(40):
                x = _mp(args[0][i])
                bound += float(2 * abs(mpmath.pi * mpmath.cot(mpmath.pi * x)) / abs(truth[i]))
        if name == "ndtri_exp" and dtype == numpy.float64 and -2 <= args[0][i] < 0:
            with mpmath.workdps(40):
                y, x = _mp(args[0][i]), truth[i]
                p = -mpmath.expm1(y) if y > _NDTRI_EXP_UPPER else mpmath.exp(y)
                ulp_p = float(numpy.spacing(float(p)))
                bound += float(ulp_p / (mpmath.npdf(x) * float(numpy.spacing(abs(float(x))))))
        if g > bound:
            worse.append((name, *(a[i] for a in args), float(got[i]), float(want[i]), g, w))
    assert not worse, worse[:8]


# CI: the functions scikit-learn and scipy.stats call most, in float64 (one program of about 4 s
# to compile at load 10); by hand every function in both types (two programs of about 10 s).
CI_NAMES = ("expit", "logit", "xlogy", "entr", "rel_entr", "ndtr", "ndtri", "erfinv", "gammaln", "digamma")
CASES = [(dtype, name) for dtype in (numpy.float64, numpy.float32) for name in GRIDS
         if FULL or (dtype == numpy.float64 and name in CI_NAMES)]


def _lazy_and_accurate(names, dtype):
    metrics.reset()
    inputs = {name: tuple(a.astype(dtype) for a in GRIDS[name]) for name in names}
    with numpy.errstate(all="ignore"):
        lazy = {name: _lazy(name, args) for name, args in inputs.items()}
        lazycore.mark_step()  # the whole grid: one program
        got = {name: numpy.asarray(v) for name, v in lazy.items()}
        assert metrics.fallbacks() == {}
        for name, args in inputs.items():
            _check(name, args, got[name], numpy.dtype(dtype))


@pytest.mark.parametrize("dtype", sorted({d for d, _ in CASES}, key=str))
def test_special_functions_are_lazy_and_as_accurate_as_scipy(dtype):
    _lazy_and_accurate([name for d, name in CASES if d == dtype], dtype)


def test_erfcx_erfcinv_ndtri_exp_loggamma_are_lazy_and_as_accurate_as_scipy():
    """Four more of scipy.stats' specials (each a counted fallback before): erfcx (Faddeeva's,
    log_ndtr's tail), erfcinv and ndtri_exp (Cephes' ndtri), loggamma (Cephes' lgam from 0).
    CI: float64 (one small program); float32 with the others by hand."""
    _lazy_and_accurate(["erfcx", "erfcinv", "ndtri_exp", "loggamma"], numpy.float64)


def test_dtypes_broadcasting_out_and_scalars_follow_scipy():
    metrics.reset()
    unary = [numpy.array([0.0625, 0.25, 0.5, 0.75], numpy.float16), numpy.array([1, 2, 3, -4], numpy.int32),
             numpy.array([True, False]), numpy.array([0.125, 0.5], numpy.float32)]
    a, b = numpy.array([[0.0], [0.5], [2.0]]), numpy.array([0.25, 1.0, 3.0, 0.0], numpy.float32)
    pending = []  # (lazy result, SciPy's): read after one barrier
    with numpy.errstate(all="ignore"):
        for name in ("expit", "logit", "entr", "ndtr"):
            for host in unary:
                pending.append((getattr(sp, name)(np.asarray(host)), getattr(sp, name)(host)))
        for name in ("xlogy", "rel_entr"):
            out = np.zeros((3, 4), dtype=numpy.float32)  # a float64 result cast into float32, as NumPy's same_kind
            assert getattr(sp, name)(np.asarray(a), np.asarray(b), out=out) is out
            pending.append((out, getattr(sp, name)(a, b).astype(numpy.float32)))
            pending.append((getattr(sp, name)(np.asarray(a), np.asarray(b)), getattr(sp, name)(a, b)))
        scalar = sp.expit(np.asarray(numpy.float64(0.5)))
        with pytest.raises(TypeError):  # NumPy's refusal of a float into an int output
            sp.ndtr(np.asarray(unary[0]), out=np.zeros(4, dtype=numpy.int32))
        lazycore.mark_step()
        for got, want in pending:
            assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape)
            numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-15, atol=0, equal_nan=True)
        assert numpy.ndim(scalar) == 0 and float(scalar) == float(sp.expit(numpy.float64(0.5)))
    assert metrics.fallbacks() == {}


def test_complex_operands_run_scipy_counted():
    metrics.reset()
    z = numpy.array([0.5 + 0.5j, -1 + 2j])
    got = sp.erf(np.asarray(z))
    numpy.testing.assert_array_equal(numpy.asarray(got), sp.erf(z))
    assert set(metrics.fallbacks()) == {"numpy.erf"}


def test_log1p_in_float64_is_within_two_ulps_of_numpys():
    """np.log1p's float64 loop (and the special functions' log1p): XLA's own was up to 128 ulps
    off NumPy's on (-1/2, -0.3); 2 on (0.4, 1) stay (XLA's)."""
    x = numpy.concatenate([numpy.linspace(-0.999, -0.2, 2001), numpy.linspace(0.2, 2.5, 2001),
                           numpy.array([-1.0, -0.0, 0.0, 1e-300, 1e300, inf, nan, -2.0])])
    with numpy.errstate(all="ignore"):
        got, want = numpy.asarray(np.log1p(np.asarray(x))), numpy.log1p(x)
    numpy.testing.assert_array_equal(numpy.isnan(got), numpy.isnan(want))
    finite = numpy.isfinite(want)
    numpy.testing.assert_array_equal(got[~finite & ~numpy.isnan(want)], want[~finite & ~numpy.isnan(want)])
    ulps = abs(got[finite] - want[finite]) / numpy.spacing(abs(want[finite]))
    assert ulps.max() <= 2, (ulps.max(), x[finite][ulps.argmax()])
