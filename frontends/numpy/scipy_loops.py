"""SciPy's special-function ufuncs as lazy loops, computed as SciPy's xsf library computes them.

Each loop is the algorithm of xsf (SciPy's C++ special-function library: Cephes, Boost's
digamma near its root, Faddeeva's erfcx tail), op for op, so a lazy result is as close to
the true value as SciPy's own: the same rational approximations, the same argument
reductions, the same branch points, XLA's ``exp``/``log``/``sin`` in place of the C
library's. Where xsf's C++ loops (``while u >= 3: u -= 1; z *= u``) run a data-dependent
number of times, the loop is unrolled to its largest count, each step applied where its
condition holds (``select``), which keeps every rounding of the scalar code.

Precision as SciPy's: the functions xsf writes for ``double`` only (its ``float``
overloads convert, call the double one and round once: ``erf``, ``ndtr``, ``gammaln``,
``entr``, ...) compute in f64 here too (:func:`_in_double`); the ones written once for
any ``T`` (``expit``, ``log_expit``) compute in the loop's own type (float16 in float32, as
NumPy's half loops), but for ``logit`` and ``xlogy``, whose float32 ``log`` XLA computes 1.1 ulp
off (libm: 0.5): those in f64, rounded once. Integer inputs reach the ``d`` loop (NumPy's type
resolution of SciPy's ufunc). Complex operands run SciPy itself (counted): these loops
are the real ones.

:data:`LOOPS` maps each SciPy ufunc's ``__name__`` (``psi`` is ``digamma``) to its loop.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from lazycore.trace import composites, control, core

apply = core.apply
_c = composites.full_like


# --- helpers ---------------------------------------------------------------------------------


def _cmp(x, v, direction):
    return apply("compare", x, v if not isinstance(v, (int, float)) else _c(x, v), direction=direction)


def _sel(cond, a, b):
    return apply("select", cond, a, b)


def _and(a, b):
    return apply("and", a, b)


def _or(a, b):
    return apply("or", a, b)


def _not(a):
    return apply("not", a)


def _add(a, b):
    return apply("add", a, b if not isinstance(b, (int, float)) else _c(a, b))


def _sub(a, b):
    return apply("sub", a, b if not isinstance(b, (int, float)) else _c(a, b))


def _mul(a, b):
    return apply("mul", a, b if not isinstance(b, (int, float)) else _c(a, b))


def _div(a, b):
    if isinstance(a, (int, float)):
        a = _c(b, a)
    return apply("div", a, b if not isinstance(b, (int, float)) else _c(a, b))


def _opaque(x):
    """``x`` behind an optimization barrier: XLA's simplifier folds ``(x - c1) - c2`` into
    ``x - (c1 + c2)``, rounding the constants' sum (where a split constant carries extra digits)."""
    r = apply("optimization_barrier", [x])
    return r[0] if isinstance(r, (tuple, list)) else r


def _polevl(x, coef):
    """Cephes' ``polevl``: ``coef[0] x^N + ... + coef[N]``, as ``ans = ans * x + c``."""
    ans = _c(x, coef[0])
    for c in coef[1:]:
        ans = _add(_mul(ans, x), c)
    return ans


def _p1evl(x, coef):
    """Cephes' ``p1evl``: the leading coefficient 1 implied (``ans = x + coef[0]`` first)."""
    ans = _add(x, coef[0])
    for c in coef[1:]:
        ans = _add(_mul(ans, x), c)
    return ans


def log1p(x):
    """``log1p``: the op (its float64 lowering corrects XLA's near -1, passes/lowering/elementwise.py
    ``_log1p_f64``)."""
    return apply("log1p", x)


def _in_double(fn):
    """xsf's ``float`` overloads of double-only functions: computed in f64, rounded once."""

    def loop(*xs):
        dtype = xs[0].dtype
        if dtype == "f64":
            return fn(*xs)
        return core.convert_to(fn(*(core.convert_to(x, "f64") for x in xs)), dtype)

    loop.__name__ = fn.__name__
    loop.__doc__ = fn.__doc__
    return loop


def _templated(fn):
    """xsf's templates (``T expit(T x)``): computed in the loop's type, half precision in f32."""

    def loop(*xs):
        dtype = xs[0].dtype
        if dtype not in ("f16", "bf16"):
            return fn(*xs)
        return core.convert_to(fn(*(core.convert_to(x, "f32") for x in xs)), dtype)

    loop.__name__ = fn.__name__
    loop.__doc__ = fn.__doc__
    return loop


# --- log_exp.h, log.h, convex_analysis.h -------------------------------------------------------------------


@_templated
def expit(x):
    """``1 / (1 + exp(-x))``."""
    return _div(1.0, _add(apply("exp", apply("neg", x)), 1.0))


@_in_double
def logit(x):
    """``log(x / (1 - x))`` outside [0.3, 0.65], else ``log1p(s) - log1p(-s)``, ``s = 2 (x - 1/2)``.
    (xsf's template computes a float32 loop in float32; XLA's float32 log is 1.1 ulp off to libm's
    0.5: here in f64, rounded once.)"""
    plain = apply("log", _div(x, _sub(_c(x, 1.0), x)))
    s = _mul(_sub(x, 0.5), 2.0)  # (2 * (x - 0.5): exact either way)
    near = _sub(log1p(s), log1p(apply("neg", s)))
    return _sel(_or(_cmp(x, 0.3, "LT"), _cmp(x, 0.65, "GT")), plain, near)


@_templated
def log_expit(x):
    """``x - log1p(exp(x))`` below 0, else ``-log1p(exp(-x))`` (+inf gives -0.0)."""
    below = _sub(x, log1p(apply("exp", x)))
    above = apply("neg", log1p(apply("exp", apply("neg", x))))
    return _sel(_cmp(x, 0, "LT"), below, above)


def _x_times(x, y, log):
    """``0`` where ``x == 0`` and ``y`` is not NaN, else ``x * log(y)``."""
    zero = _and(_cmp(x, 0, "EQ"), _not(composites.isnan(y)))
    return _sel(zero, _c(x, 0.0), _mul(x, log))


@_in_double
def xlogy(x, y):
    """``x * log(y)``, 0 where ``x`` is 0 (and ``y`` not NaN). (xsf's template computes a float32
    loop in float32, where XLA's log is 1.1 ulp off to libm's 0.5: here in f64, rounded once.)"""
    return _x_times(x, y, apply("log", y))


@_in_double
def xlog1py(x, y):
    """``x * log1p(y)``, 0 where ``x`` is 0 (xsf's ``log1p`` is a double one: the float loop widens)."""
    return _x_times(x, y, log1p(y))


@_in_double
def entr(x):
    """``-x log x`` above 0, 0 at 0, -inf below, NaN stays."""
    r = _sel(_cmp(x, 0, "GT"), apply("neg", _mul(x, apply("log", x))), _c(x, -math.inf))
    r = _sel(_cmp(x, 0, "EQ"), _c(x, 0.0), r)
    return _sel(composites.isnan(x), x, r)


def _either_nan(x, y):
    return _or(composites.isnan(x), composites.isnan(y))


_TINY = float(np.finfo(np.float64).tiny)
_LOG_UNDERFLOW = -745.1332191019412  # log(2**-1075): a quotient below rounds to 0


@_in_double
def kl_div(x, y):
    """``x log(x/y) - x + y`` for positive ``x, y``; ``y`` where ``x == 0 <= y``; else inf. (A ratio
    below the normal range, which the program flushes to 0: ``log(x) - log(y)``, -inf where the
    quotient underflows as SciPy's does.)"""
    both = _and(_cmp(x, 0, "GT"), _cmp(y, 0, "GT"))
    ratio = _div(x, y)
    apart = _sub(apply("log", x), apply("log", y))
    apart = _sel(_cmp(apart, _LOG_UNDERFLOW, "LT"), _c(x, -math.inf), apart)  # (SciPy's ratio: 0 there)
    log = _sel(_cmp(ratio, _TINY, "LT"), apart, apply("log", ratio))
    r = _sel(both, _add(_sub(_mul(x, log), x), y), _c(x, math.inf))
    r = _sel(_and(_cmp(x, 0, "EQ"), _cmp(y, 0, "GE")), y, r)
    return _sel(_either_nan(x, y), _c(x, math.nan), r)


@_in_double
def rel_entr(x, y):
    """``x log(x/y)``: through ``log1p((x - y)/y)`` for ratios in (1/2, 2), ``log(x) - log(y)``
    where the ratio under- or overflows; 0 where ``x == 0 <= y``, inf for other non-positive."""
    ratio = _div(x, y)
    near = _mul(x, log1p(_div(_sub(x, y), y)))
    plain = _mul(x, apply("log", ratio))
    apart = _mul(x, _sub(apply("log", x), apply("log", y)))
    normal = _and(_cmp(ratio, _TINY, "GT"), _cmp(ratio, math.inf, "LT"))
    r = _sel(_and(_cmp(ratio, 0.5, "GT"), _cmp(ratio, 2.0, "LT")), near, _sel(normal, plain, apart))
    nonpositive = _or(_cmp(x, 0, "LE"), _cmp(y, 0, "LE"))
    edge = _sel(_and(_cmp(x, 0, "EQ"), _cmp(y, 0, "GE")), _c(x, 0.0), _c(x, math.inf))
    r = _sel(nonpositive, edge, r)
    return _sel(_either_nan(x, y), _c(x, math.nan), r)


# --- cephes/ndtr.h: erf, erfc, ndtr; stats.h: log_ndtr (f64 throughout) ---------------------------------

_NDTR_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
           4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
           9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_NDTR_Q = (1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
           9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
           1.65666309194161350182E3, 5.57535340817727675546E2)
_NDTR_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
           6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0)
_NDTR_S = (2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
           1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0)
_MAXLOG = 7.097827128933839730962063185871E2  # log(DBL_MAX)
_SQRT1_2 = 0.707106781186547524401  # M_SQRT1_2


def _erf_f64(x):
    """Cephes' erf: the dialect's ``erf`` lowers f64 to it (x T(x^2)/U(x^2) below 1, 1 - erfc above)."""
    return apply("erf", x)


def _erfc_f64(a):
    """Cephes' erfc: ``1 - erf(a)`` for ``|a| < 1``, else ``exp(-a^2)`` times a ratio
    (``2 - y`` below 0); 0 (2 below 0) where ``-a^2`` passes ``-MAXLOG`` or the
    result underflows; NaN stays."""
    x = apply("abs", a)
    z = apply("neg", _mul(a, a))
    p, q = _erfc_terms(x)
    y = _div(_mul(apply("exp", z), p), q)  # (z * p) / q
    negative = _cmp(a, 0, "LT")
    y = _sel(negative, _sub(_c(a, 2.0), y), y)
    under = _or(_cmp(z, -_MAXLOG, "LT"), _cmp(y, 0, "EQ"))
    y = _sel(under, _sel(negative, _c(a, 2.0), _c(a, 0.0)), y)
    y = _sel(_cmp(x, 1.0, "LT"), _sub(_c(a, 1.0), _erf_f64(a)), y)
    return _sel(composites.isnan(a), a, y)


def _erfc_terms(x):
    """Cephes erfc's numerator and denominator for ``x >= 1``: P/Q below 8, R/S from 8."""
    below = _cmp(x, 8.0, "LT")
    p = _sel(below, _polevl(x, _NDTR_P), _polevl(x, _NDTR_R))
    q = _sel(below, _p1evl(x, _NDTR_Q), _p1evl(x, _NDTR_S))
    return p, q


@_in_double
def erf(x):
    """Cephes' erf (the float loop in f64, rounded once)."""
    return _erf_f64(x)


@_in_double
def erfc(x):
    """Cephes' erfc."""
    return _erfc_f64(x)


def _ndtr_f64(a):
    x = _mul(a, _SQRT1_2)
    z = apply("abs", x)
    small = _add(_mul(_erf_f64(x), 0.5), 0.5)  # 0.5 + 0.5 * erf(x)
    y = _mul(_erfc_f64(z), 0.5)
    y = _sel(_cmp(x, 0, "GT"), _sub(_c(a, 1.0), y), y)
    r = _sel(_cmp(z, 1.0, "LT"), small, y)
    return _sel(composites.isnan(a), a, r)


@_in_double
def ndtr(a):
    """The standard normal CDF: ``0.5 + 0.5 erf(x/sqrt 2)`` near 0, ``erfc(|x|/sqrt 2) / 2``
    (one minus it above 0) beyond."""
    return _ndtr_f64(a)


_ISPI = 0.56418958354775628694807945156  # 1 / sqrt(pi)


# erfcx's Taylor coefficients at 3/4, highest power first (mpmath, 50 digits: a0 = exp(9/16) erfc(3/4),
# a1 = 3/2 a0 - 2/sqrt(pi), a(n+1) = (3/2 a(n) + 2 a(n-1)) / (n+1), from erfcx' = 2x erfcx - 2/sqrt(pi))
_ERFCX_AT_3_4 = (
    -1.0639550902512525e-08, 3.750604434348139e-08, -1.2920526683148003e-07, 4.3445834921494253e-07,
    -1.424088529978787e-06, 4.543733191203631e-06, -1.4088463868243626e-05, 4.237248023960813e-05,
    -0.00012335437532328967, 0.0003467506629301161, -0.0009385120614756802, 0.0024376373607573405,
    -0.006051532297208567, 0.014289198665935787, -0.03189726203968182, 0.06679054252756873,
    -0.1298360619948811, 0.2309581315512983, -0.3679726916557954, 0.5069376502931449,
)


def _erfcx_beyond(y):
    """``exp(y^2) erfc(y)`` for ``y >= 0``: ``exp(y^2)(1 - erf y)`` below 1/2, its Taylor polynomial
    at 3/4 on [1/2, 1) (``1 - erf y`` loses up to 7 ulps there; Faddeeva's erfcx, SciPy's, has its own
    polynomial fits), Cephes' erfc ratios without their ``exp(-y^2)`` up to 50, and Faddeeva's
    continued fraction beyond 50, its first term beyond 5e7."""
    near = _mul(apply("exp", _mul(y, y)), _sub(_c(y, 1.0), _erf_f64(y)))
    near = _sel(_cmp(y, 0.5, "LT"), near, _polevl(_sub(y, 0.75), _ERFCX_AT_3_4))
    p, q = _erfc_terms(y)
    mid = _div(p, q)
    y2 = _mul(y, y)
    frac = _div(_mul(_c(y, _ISPI), _add(_mul(y2, _add(y2, 4.5)), 2.0)),
                _mul(y, _add(_mul(y2, _add(y2, 5.0)), 3.75)))
    far = _div(_ISPI, y)
    r = _sel(_cmp(y, 5e7, "GT"), far, frac)
    r = _sel(_cmp(y, 50.0, "GT"), r, mid)
    return _sel(_cmp(y, 1.0, "LT"), near, r)


@_in_double
def log_ndtr(x):
    """``log(erfcx(-t)/2) - t^2`` below -1 (``t = x/sqrt 2``), else ``log1p(-erfc(t)/2)``."""
    t = _mul(x, _SQRT1_2)
    nt = apply("neg", t)
    below = _sub(apply("log", _div(_erfcx_beyond(_sel(_cmp(x, -1.0, "LT"), nt, _c(x, 2.0))), 2.0)), _mul(t, t))
    above = log1p(apply("neg", _div(_erfc_f64(t), 2.0)))
    return _sel(_cmp(x, -1.0, "LT"), below, above)


# --- cephes/ndtri.h, erfinv.h ------------------------------------------------------------------------------

_NDTRI_P0 = (-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
             1.39312609387279679503E1, -1.23916583867381258016E0)
_NDTRI_Q0 = (1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
             -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
             1.59056225126211695515E1, -1.18331621121330003142E0)
_NDTRI_P1 = (4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
             4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
             -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4)
_NDTRI_Q1 = (1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
             1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
             -3.80806407691578277194E-2, -9.33259480895457427372E-4)
_NDTRI_P2 = (3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
             1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
             3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9)
_NDTRI_Q2 = (6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
             2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
             2.89247864745380683936E-6, 6.79019408009981274425E-9)
_EXP_M2 = 0.13533528323661269189  # exp(-2)
_SQRT2PI = 2.506628274631000502415765284811045253007


def _ndtri_tail(x):
    """Cephes ndtri's tail in ``x = sqrt(-2 log y)``: ``x - log(x)/x - z P(z)/Q(z)`` with ``z = 1/x``
    (one P/Q below 8, another from 8): minus the quantile of ``y``."""
    x0 = _sub(x, _div(apply("log", x), x))
    z = _div(1.0, x)
    below8 = _cmp(x, 8.0, "LT")
    x1 = _sel(below8, _div(_mul(z, _polevl(z, _NDTRI_P1)), _p1evl(z, _NDTRI_Q1)),
              _div(_mul(z, _polevl(z, _NDTRI_P2)), _p1evl(z, _NDTRI_Q2)))
    return _sub(x0, x1)


def _ndtri_f64(y0):
    """Cephes' ndtri: a rational function of ``y - 1/2`` for ``y`` in (exp(-2), 1 - exp(-2)),
    else of ``1/x`` with ``x = sqrt(-2 log y)`` (``y`` folded below 1/2); -inf at 0, inf at 1,
    NaN outside [0, 1]."""
    flip = _cmp(y0, 1.0 - _EXP_M2, "GT")
    y = _sel(flip, _sub(_c(y0, 1.0), y0), y0)
    w = _sub(y, 0.5)
    w2 = _mul(w, w)
    central = _mul(_add(w, _mul(w, _div(_mul(w2, _polevl(w2, _NDTRI_P0)), _p1evl(w2, _NDTRI_Q0)))), _SQRT2PI)
    # the tail on y clamped into (0, exp(-2)]: lanes the central branch takes stay finite
    yt = _sel(_cmp(y, _EXP_M2, "GT"), _c(y, _EXP_M2), y)
    tail = _ndtri_tail(apply("sqrt", _mul(apply("log", yt), -2.0)))
    tail = _sel(flip, tail, apply("neg", tail))
    r = _sel(_cmp(y, _EXP_M2, "GT"), central, tail)
    r = _sel(_or(_cmp(y0, 0.0, "LT"), _cmp(y0, 1.0, "GT")), _c(y0, math.nan), r)
    r = _sel(_cmp(y0, 1.0, "EQ"), _c(y0, math.inf), r)
    return _sel(_cmp(y0, 0.0, "EQ"), _c(y0, -math.inf), r)


@_in_double
def ndtri(y):
    """The standard normal quantile (Cephes' ndtri)."""
    return _ndtri_f64(y)


_DBL_MAX = float(np.finfo(np.float64).max)
_NDTRI_EXP_UPPER = math.log1p(-math.exp(-2.0))  # log(1 - exp(-2)), as SciPy's C computes it
_SQRT2 = 1.41421356237309504880  # M_SQRT2


@_in_double
def ndtri_exp(y):
    """The inverse of log_ndtr (SciPy's _ndtri_exp): below -2 Cephes ndtri's tail in
    ``x = sqrt(-2 y)`` (``sqrt 2 sqrt(-y)`` below -DBL_MAX/2, where ``-2 y`` overflows), above
    ``log(1 - exp(-2))`` ``-ndtri(-expm1(y))``, between ``ndtri(exp(y))``; -inf at -inf,
    inf at 0, NaN above 0."""
    ys = _sel(_cmp(y, -2.0, "LT"), y, _c(y, -2.0))  # (the other branches' lanes stay finite)
    x = _sel(_cmp(ys, -_DBL_MAX * 0.5, "GE"), apply("sqrt", _mul(ys, -2.0)),
             _mul(apply("sqrt", apply("neg", ys)), _SQRT2))
    small = apply("neg", _ndtri_tail(x))  # x1 - x0
    upper = apply("neg", _ndtri_f64(apply("neg", apply("expm1", y))))
    r = _sel(_cmp(y, _NDTRI_EXP_UPPER, "GT"), upper, _ndtri_f64(apply("exp", y)))
    r = _sel(_cmp(y, -2.0, "LT"), small, r)
    return _sel(_cmp(y, -_DBL_MAX, "LT"), _c(y, -math.inf), r)


@_in_double
def erfcinv(y):
    """The inverse of erfc (xsf's cephes::erfcinv): ``-ndtri(y/2) / sqrt 2`` on (0, 2); inf at 0,
    -inf at 2, NaN outside."""
    r = _mul(apply("neg", _ndtri_f64(_mul(y, 0.5))), _SQRT1_2)
    r = _sel(_cmp(y, 0.0, "EQ"), _c(y, math.inf), r)
    r = _sel(_cmp(y, 2.0, "EQ"), _c(y, -math.inf), r)
    return _sel(_or(_cmp(y, 0.0, "LT"), _cmp(y, 2.0, "GT")), _c(y, math.nan), r)


@_in_double
def erfcx(x):
    """``exp(x^2) erfc(x)`` (SciPy's Faddeeva erfcx for real x): from 0 :func:`_erfcx_beyond`;
    below 0 ``2 exp(x^2) - erfcx(-x)``, its second term dropped below -6.1, inf below -26.7."""
    positive = _erfcx_beyond(apply("abs", x))
    twice = _mul(apply("exp", _mul(x, x)), 2.0)
    r = _sel(_cmp(x, -6.1, "LT"), twice, _sub(twice, positive))
    r = _sel(_cmp(x, -26.7, "LT"), _c(x, math.inf), r)
    return _sel(_cmp(x, 0.0, "GE"), positive, r)


# Boost's erf_inv (SciPy's erfinv ufunc: boost::math::erf_inv), its 64-bit rational approximations:
# per region (Y, P, Q, shift), P and Q with the lowest power first. In double ``q = 1 - |z|`` is at
# least 2**-53, so ``sqrt(-log q)`` stays below 6.1: the regions from 18 on never apply.
_ERFINV_SMALL = (0.0891314744949340820313,
                 (-0.000508781949658280665617, -0.00836874819741736770379, 0.0334806625409744615033,
                  -0.0126926147662974029034, -0.0365637971411762664006, 0.0219878681111168899165,
                  0.00822687874676915743155, -0.00538772965071242932965),
                 (1.0, -0.970005043303290640362, -1.56574558234175846809, 1.56221558398423026363,
                  0.662328840472002992063, -0.71228902341542847553, -0.0527396382340099713954,
                  0.0795283687341571680018, -0.00233393759374190016776, 0.000886216390456424707504))
_ERFINV_MID = (2.249481201171875,
               (-0.202433508355938759655, 0.105264680699391713268, 8.37050328343119927838,
                17.6447298408374015486, -18.8510648058714251895, -44.6382324441786960818,
                17.445385985570866523, 21.1294655448340526258, -3.67192254707729348546),
               (1.0, 6.24264124854247537712, 3.9713437953343869095, -28.6608180499800029974,
                -20.1432634680485188801, 48.5609213108739935468, 10.8268667355460159008,
                -22.6436933413139721736, 1.72114765761200282724))
_ERFINV_TAILS = (
    (3.0, 1.125, 0.807220458984375,
     (-0.131102781679951906451, -0.163794047193317060787, 0.117030156341995252019, 0.387079738972604337464,
      0.337785538912035898924, 0.142869534408157156766, 0.0290157910005329060432, 0.00214558995388805277169,
      -0.679465575181126350155e-6, 0.285225331782217055858e-7, -0.681149956853776992068e-9),
     (1.0, 3.46625407242567245975, 5.38168345707006855425, 4.77846592945843778382, 2.59301921623620271374,
      0.848854343457902036425, 0.152264338295331783612, 0.01105924229346489121)),
    (6.0, 3.0, 0.93995571136474609375,
     (-0.0350353787183177984712, -0.00222426529213447927281, 0.0185573306514231072324,
      0.00950804701325919603619, 0.00187123492819559223345, 0.000157544617424960554631,
      0.460469890584317994083e-5, -0.230404776911882601748e-9, 0.266339227425782031962e-11),
     (1.0, 1.3653349817554063097, 0.762059164553623404043, 0.220091105764131249824, 0.0341589143670947727934,
      0.00263861676657015992959, 0.764675292302794483503e-4)),
    (18.0, 6.0, 0.98362827301025390625,
     (-0.0167431005076633737133, -0.00112951438745580278863, 0.00105628862152492910091,
      0.000209386317487588078668, 0.149624783758342370182e-4, 0.449696789927706453732e-6,
      0.462596163522878599135e-8, -0.281128735628831791805e-13, 0.99055709973310326855e-16),
     (1.0, 0.591429344886417493481, 0.138151865749083321638, 0.0160746087093676504695,
      0.000964011807005165528527, 0.275335474764726041141e-4, 0.282243172016108031869e-6)),
)


def _ratio(x, p, q):
    """Boost's ``evaluate_polynomial(P, x) / evaluate_polynomial(Q, x)`` (coefficients lowest first)."""
    return _div(_polevl(x, p[::-1]), _polevl(x, q[::-1]))


@_in_double
def erfinv(z):
    """Boost's erf_inv: ``p = |z|``, ``q = 1 - p``; ``p (p + 10) (Y + R(p))`` up to 1/2,
    ``sqrt(-2 log q) / (Y + R(q - 1/4))`` while ``q >= 1/4``, then ``x (Y + R(x - B))`` with
    ``x = sqrt(-log q)`` per region of x; the sign of z; 0 at 0, +-inf at +-1, NaN outside."""
    p = apply("abs", z)
    q = _sub(_c(z, 1.0), p)
    y, num, den = _ERFINV_SMALL
    g = _mul(p, _add(p, 10.0))
    r = _ratio(p, num, den)
    result = _add(_mul(g, y), _mul(g, r))
    y, num, den = _ERFINV_MID
    qs = _sel(_cmp(q, 0.0, "GT"), q, _c(z, 0.5))  # (q's lanes at 0 or NaN take another branch)
    mid = _div(apply("sqrt", _mul(apply("log", qs), -2.0)), _add(_ratio(_sub(qs, 0.25), num, den), y))
    x = apply("sqrt", apply("neg", apply("log", qs)))
    tail = None
    for bound, shift, y, num, den in reversed(_ERFINV_TAILS):
        r = _ratio(_sub(x, shift), num, den)
        here = _add(_mul(x, y), _mul(r, x))  # Y * x + R * x
        tail = here if tail is None else _sel(_cmp(x, bound, "LT"), here, tail)
    result = _sel(_cmp(p, 0.5, "LE"), result, _sel(_cmp(q, 0.25, "GE"), mid, tail))
    result = _sel(_cmp(z, 0.0, "LT"), apply("neg", result), result)
    result = _sel(_cmp(z, 0.0, "EQ"), _c(z, 0.0), result)
    result = _sel(_cmp(z, 1.0, "EQ"), _c(z, math.inf), result)
    result = _sel(_cmp(z, -1.0, "EQ"), _c(z, -math.inf), result)
    return _sel(_or(_cmp(p, 1.0, "GT"), composites.isnan(z)), _c(z, math.nan), result)


# --- cephes/gamma.h: lgam ----------------------------------------------------------------------------------

_GAMMA_A = (8.11614167470508450300E-4, -5.95061904284301438324E-4, 7.93650340457716943945E-4,
            -2.77777777730099687205E-3, 8.33333333333331927722E-2)
_GAMMA_B = (-1.37825152569120859100E3, -3.88016315134637840924E4, -3.31612992738871184744E5,
            -1.16237097492762307383E6, -1.72173700820839662146E6, -8.53555664245765465627E5)
_GAMMA_C = (-3.51815701436523470549E2, -1.70642106651881159223E4, -2.20528590553854454839E5,
            -1.13933444367982507207E6, -2.53252307177582951285E6, -2.01889141433532773231E6)
_LS2PI = 0.91893853320467274178  # log(sqrt(2 pi))
_LOGPI = 1.144729885849400174143427351353058711647
_MAXLGM = 2.556348e305


def _lgam_stirling(x):
    """lgam for ``x >= 13``: Stirling's series (its short form from 1000, none from 1e8), inf above MAXLGM."""
    q = _add(_sub(_mul(_sub(x, 0.5), apply("log", x)), x), _LS2PI)
    p = _div(1.0, _mul(x, x))
    mid = _add(q, _div(_polevl(p, _GAMMA_A), x))
    short = _div(_add(_mul(_sub(_mul(p, 7.9365079365079365079365e-4), 2.7777777777777777777778e-3), p),
                      0.0833333333333333333333), x)
    large = _sel(_cmp(x, 1.0e8, "GT"), q, _add(q, short))
    r = _sel(_cmp(x, 1000.0, "GE"), large, mid)
    return _sel(_cmp(x, _MAXLGM, "GT"), _c(x, math.inf), r)


def _lgam_f64(x):
    # x < -34: reflection, log(pi) - log|x sin(pi z)| - lgam(-x), with z the distance to the nearer integer
    q = apply("neg", x)
    w = _lgam_stirling(_sel(_cmp(q, 13.0, "LT"), _c(q, 13.0), q))
    p = apply("floor", q)
    z = _sub(q, p)
    far = _cmp(z, 0.5, "GT")
    z = _sel(far, _sub(_add(p, 1.0), q), z)
    sinpi = _sel(_cmp(z, 0.5, "LT"), apply("sin", _mul(z, math.pi)),
                 apply("neg", apply("sin", _mul(_sub(z, 1.0), math.pi))))
    zz = _mul(q, sinpi)
    reflected = _sub(_sub(_c(x, _LOGPI), apply("log", zz)), w)
    reflected = _sel(_or(_cmp(p, q, "EQ"), _cmp(zz, 0.0, "EQ")), _c(x, math.inf), reflected)

    # -34 <= x < 13: shift into [2, 3) (z: the product of the shifts), then B/C there. Cephes'
    # two loops (``while u >= 3: p -= 1; u = x + p; z *= u`` and ``while u < 2: z /= u;
    # p += 1; u = x + p``, a pole where u is 0) as one loop of the most steps either takes
    # from [-34, 13): a lane needs steps of one kind only, each step where its condition holds.
    def shift(i, state):
        z, p, u, sing = state
        down, up = _cmp(u, 3.0, "GE"), _cmp(u, 2.0, "LT")
        p_down, p_up = _sub(p, 1.0), _add(p, 1.0)
        u_down = _add(x, p_down)
        sing = _or(sing, _and(up, _cmp(u, 0.0, "EQ")))
        z = _sel(down, _mul(z, u_down), _sel(up, _div(z, u), z))
        u = _sel(down, u_down, _sel(up, _add(x, p_up), u))
        p = _sel(down, p_down, _sel(up, p_up, p))
        return z, p, u, sing

    start = (_c(x, 1.0), _c(x, 0.0), x, _cmp(x, x, "NE"))  # (the pole flag False: a NaN x is returned as it is)
    z, p, u, sing = control.fori_loop(0, 36, shift, start)
    z = apply("abs", z)
    xs = _add(x, _sub(p, 2.0))
    ratio = _div(_mul(xs, _polevl(xs, _GAMMA_B)), _p1evl(xs, _GAMMA_C))
    small = _sel(_cmp(u, 2.0, "EQ"), apply("log", z), _add(apply("log", z), ratio))
    small = _sel(sing, _c(x, math.inf), small)

    r = _sel(_cmp(x, 13.0, "LT"), small, _lgam_stirling(_sel(_cmp(x, 13.0, "LT"), _c(x, 13.0), x)))
    r = _sel(_cmp(x, -34.0, "LT"), reflected, r)
    return _sel(composites.isfinite(x), r, x)  # (lgam returns a non-finite x as it is)


@_in_double
def gammaln(x):
    """log|Gamma(x)| (Cephes' lgam)."""
    return _lgam_f64(x)


@_in_double
def loggamma(x):
    """xsf's real loggamma: Cephes' lgam from 0 (-0 included), NaN below."""
    return _sel(_cmp(x, 0.0, "LT"), _c(x, math.nan), _lgam_f64(x))


# --- cephes/psi.h and digamma.h ----------------------------------------------------------------------------

_PSI_A = (8.33333333333333333333E-2, -2.10927960927960927961E-2, 7.57575757575757575758E-3,
          -4.16666666666666666667E-3, 3.96825396825396825397E-3, -8.33333333333333333333E-3,
          8.33333333333333333333E-2)
_PSI_Y = 0.99558162689208984  # (a float constant in xsf: exact in double)
_PSI_ROOT1 = 1569415565.0 / 1073741824.0
_PSI_ROOT2 = (381566830.0 / 1073741824.0) / 1073741824.0
_PSI_ROOT3 = 0.9016312093258695918615325266959189453125e-19
_PSI_P = (-0.0020713321167745952, -0.045251321448739056, -0.28919126444774784, -0.65031853770896507,
          -0.32555031186804491, 0.25479851061131551)
_PSI_Q = (-0.55789841321675513e-6, 0.0021284987017821144, 0.054151797245674225, 0.43593529692665969,
          1.4606242909763515, 2.0767117023730469, 1.0)
_EULER = 0.577215664901532860606512090082402431
_NEGROOT = -0.504083008264455409
_NEGROOTVAL = 7.2897639029768949e-17
_EPS = float(np.finfo(np.float64).eps)


def _harmonic_minus_euler():
    """psi(n) for n = 1..10 as psi's loop sums it: ``y += 1.0 / i`` for i < n, then ``- EULER``."""
    out, y = [], 0.0
    for n in range(1, 11):
        out.append(y - _EULER)
        y += 1.0 / n
    return out


_PSI_INTEGERS = _harmonic_minus_euler()


def _psi_f64(x):
    # x < 0: reflection, y = -pi / tan(pi r) with r x's fractional part, and x = 1 - x. The tangent
    # as sin/cos of pi t, t in [0, 1/4] (exact steps: r + 1, |.|, 1/2 - s): XLA's sin and cos over
    # the whole period, or their quotient near pi/2, would be several ulps farther than libm's tan
    negative = _cmp(x, 0.0, "LT")
    r = _sub(x, composites.trunc(x))
    rr = _sel(_cmp(r, -0.5, "LT"), _add(r, 1.0), r)  # tan(pi r) = tan(pi rr), rr in [-1/2, 1/2)
    s = apply("abs", rr)
    folded = _cmp(s, 0.25, "GT")  # tan(pi s) = 1 / tan(pi (1/2 - s))
    t = _mul(_sel(folded, _sub(_c(x, 0.5), s), s), math.pi)
    tan_t = _div(apply("sin", t), apply("cos", t))
    magnitude = _sel(folded, _mul(tan_t, math.pi), _div(math.pi, tan_t))  # pi / tan(pi s)
    y = _sel(negative, _sel(_cmp(rr, 0.0, "LT"), magnitude, apply("neg", magnitude)), _c(x, 0.0))
    xr = _sel(negative, _sub(_c(x, 1.0), x), x)
    # positive integers up to 10: the harmonic numbers less Euler's constant
    whole = _and(_cmp(xr, 10.0, "LE"), _cmp(xr, apply("floor", xr), "EQ"))
    integer = _c(x, _PSI_INTEGERS[0])
    for n in range(2, 11):
        integer = _sel(_cmp(xr, float(n), "EQ"), _c(x, _PSI_INTEGERS[n - 1]), integer)
    # into [1, 2]: below 1 one step up; below 10 steps down (at most 8)
    below1 = _cmp(xr, 1.0, "LT")
    y = _sel(below1, _sub(y, _div(1.0, xr)), y)
    xs = _sel(below1, _add(xr, 1.0), xr)
    below10 = _cmp(xs, 10.0, "LT")
    for _ in range(8):  # while x > 2: x -= 1; y += 1/x
        c = _and(below10, _cmp(xs, 2.0, "GT"))
        xs = _sel(c, _sub(xs, 1.0), xs)
        y = _sel(c, _add(y, _div(1.0, xs)), y)
    # [1, 2]: Boost's (x - root) (Y + R(x - 1)); beyond: the asymptotic series
    g = _sub(_opaque(_sub(_opaque(_sub(xs, _PSI_ROOT1)), _PSI_ROOT2)), _PSI_ROOT3)
    rr = _div(_polevl(_sub(xs, 1.0), _PSI_P), _polevl(_sub(xs, 1.0), _PSI_Q))
    near = _add(_mul(g, _PSI_Y), _mul(g, rr))
    zz = _div(1.0, _mul(xs, xs))
    asy_y = _sel(_cmp(xs, 1.0e17, "LT"), _mul(zz, _polevl(zz, _PSI_A)), _c(x, 0.0))
    asy = _sub(_sub(apply("log", xs), _div(0.5, xs)), asy_y)
    out = _add(y, _sel(_and(_cmp(xs, 1.0, "GE"), _cmp(xs, 2.0, "LE")), near, asy))
    out = _sel(whole, integer, out)  # (x was positive there: psi's y starts at 0)
    # the edges: a pole (NaN) at the negative integers, -inf at +0 and +inf at -0, NaN at -inf
    out = _sel(_and(negative, _cmp(r, 0.0, "EQ")), _c(x, math.nan), out)
    zero = _cmp(x, 0.0, "EQ")
    signed = _sel(_cmp(apply("atan2", x, _c(x, -1.0)), 0.0, "LT"), _c(x, math.inf), _c(x, -math.inf))
    out = _sel(zero, signed, out)
    out = _sel(_cmp(x, -math.inf, "EQ"), _c(x, math.nan), out)
    return _sel(_or(composites.isnan(x), _cmp(x, math.inf, "EQ")), x, out)


def _zeta_coefficients():
    """zeta(n + 1, negroot) for n = 1..99 (the Taylor coefficients of digamma at its negative
    root), from SciPy's own ``zeta`` (loaded: this loop runs only for SciPy's ufunc)."""
    special = sys.modules["scipy.special"]
    return [float(v) for v in special.zeta(np.arange(2, 101, dtype=np.float64), _NEGROOT)]


def _digamma_near_negroot(x):
    """xsf's Taylor series at digamma's negative root: ``coeff *= -(x - root)``, ``term = coeff
    zeta(n + 1, root)``, summed for n = 1..99 until a term is below eps times the sum (as the
    C loop breaks: later terms are left out where it stopped)."""
    d = _sub(x, _NEGROOT)
    table = composites.constant(np.asarray(_zeta_coefficients()), "f64", x.device)

    def step(i, state):
        coeff, res, done = state
        c = core.broadcast_to(apply("reshape", apply("dynamic_slice", table, [i], sizes=(1,)), shape=()), x.shape)
        coeff = _mul(coeff, apply("neg", d))
        term = _mul(coeff, c)
        res = _sel(done, res, _add(res, term))
        return coeff, res, _or(done, _cmp(apply("abs", term), _mul(apply("abs", res), _EPS), "LT"))

    start = (_c(x, -1.0), _c(x, _NEGROOTVAL), _cmp(x, x, "NE"))  # (done: False; NaN never takes this branch)
    return control.fori_loop(0, 99, step, start)[1]


@_in_double
def psi(x):
    """digamma: xsf's series at the negative root within 0.3 of it, else Cephes' psi."""
    near = _cmp(apply("abs", _sub(x, _NEGROOT)), 0.3, "LT")
    safe = _sel(near, x, _c(x, _NEGROOT))
    return _sel(near, _digamma_near_negroot(safe), _psi_f64(x))


# --- cephes/i0.h, i1.h: modified Bessel functions of order 0 and 1 (and their scaled forms) --------------

_I0_A = (-4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
         1.71539128555513303061E-15, -1.16853328779934516808E-14, 7.67618549860493561688E-14,
         -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
         9.67580903537323691224E-11, -5.18979560163526290666E-10, 2.65982372468238665035E-9,
         -1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
         1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
         -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
         1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
         -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
         1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0_B = (-7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
         3.46122286769746109310E-17, -2.82762398051658348494E-16, -3.42548561967721913462E-16,
         1.77256013305652638360E-15, 3.81168066935262242075E-15, -9.55484669882830764870E-15,
         -4.15056934728722208663E-14, 1.54008621752140982691E-14, 3.85277838274214270114E-13,
         7.18012445138366623367E-13, -1.79417853150680611778E-12, -1.32158118404477131188E-11,
         -3.14991652796324136454E-11, 1.18891471078464383424E-11, 4.94060238822496958910E-10,
         3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
         2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
         8.04490411014108831608E-1)
_I1_A = (2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
         -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
         3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
         -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
         9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
         -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
         4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
         -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
         2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
         -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1_B = (7.51729631084210481353E-18, 4.41434832307170791151E-18, -4.65030536848935832153E-17,
         -3.20952592199342395980E-17, 2.96262899764595013876E-16, 3.30820231092092828324E-16,
         -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
         4.27244001671195135429E-14, -2.10154184277266431302E-14, -4.08355111109219731823E-13,
         -7.19855177624590851209E-13, 2.03562854414708950722E-12, 1.41258074366137813316E-11,
         3.25260358301548823856E-11, -1.89749581235054123450E-11, -5.58974346219658380687E-10,
         -3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
         -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
         7.78576235018280120474E-1)


def _chbevl(x, coef):
    """Cephes' Chebyshev series: ``b0 = x b1 - b2 + c`` down the coefficients, ``(b0 - b2) / 2``."""
    b0, b1, b2 = _c(x, coef[0]), _c(x, 0.0), None
    for c in coef[1:]:
        b2, b1 = b1, b0
        b0 = _add(_sub(_mul(x, b1), b2), c)
    return _mul(_sub(b0, b2), 0.5)


def _bessel_i(x, below8, beyond8, odd, scaled):
    """Cephes' i0/i1 (``odd``: i1, ``* |x|`` below 8 and the sign of x) and their ``exp(-|x|)``
    scaled forms: a Chebyshev series in ``|x|/2 - 2`` up to 8, in ``32/|x| - 2`` beyond (over
    sqrt|x|)."""
    z = apply("abs", x)
    near = _chbevl(_sub(_div(z, 2.0), 2.0), below8)
    if odd:
        near = _mul(near, z)
    far = _chbevl(_sub(_div(32.0, z), 2.0), beyond8)
    if not scaled:
        near = _mul(near, apply("exp", z)) if odd else _mul(apply("exp", z), near)
        far = _div(_mul(apply("exp", z), far), apply("sqrt", z))  # (inf beyond MAXLOG, as SciPy 1.17's)
    else:
        far = _div(far, apply("sqrt", z))
    r = _sel(_cmp(z, 8.0, "LE"), near, far)
    return _sel(_cmp(x, 0.0, "LT"), apply("neg", r), r) if odd else r


def _bessel_loop(name, doc, below8, beyond8, odd, scaled):
    """The loop of one of Cephes' four modified Bessel functions (:func:`_bessel_i`), in f64."""

    def fn(x):
        return _bessel_i(x, below8, beyond8, odd=odd, scaled=scaled)

    fn.__name__, fn.__doc__ = name, doc
    return _in_double(fn)


i0 = _bessel_loop("i0", "I0 (Cephes).", _I0_A, _I0_B, odd=False, scaled=False)
i0e = _bessel_loop("i0e", "exp(-|x|) I0(x) (Cephes).", _I0_A, _I0_B, odd=False, scaled=True)
i1 = _bessel_loop("i1", "I1 (Cephes).", _I1_A, _I1_B, odd=True, scaled=False)
i1e = _bessel_loop("i1e", "exp(-|x|) I1(x) (Cephes).", _I1_A, _I1_B, odd=True, scaled=True)


LOOPS = {
    "expit": expit, "logit": logit, "log_expit": log_expit, "xlogy": xlogy, "xlog1py": xlog1py,
    "entr": entr, "rel_entr": rel_entr, "kl_div": kl_div,
    "erf": erf, "erfc": erfc, "erfcx": erfcx, "ndtr": ndtr, "log_ndtr": log_ndtr, "ndtri": ndtri,
    "ndtri_exp": ndtri_exp, "erfinv": erfinv, "erfcinv": erfcinv, "gammaln": gammaln, "loggamma": loggamma,
    "psi": psi, "i0": i0, "i0e": i0e, "i1": i1, "i1e": i1e,
}
