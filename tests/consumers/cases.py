"""Real Array API consumers on ``lazycore.numpy`` arrays against the same call on NumPy's.

Each case is a call into scikit-learn (``array_api_dispatch=True``), SciPy
(``SCIPY_ARRAY_API=1``), array-api-extra or einops, written once for an array
namespace ``xp`` and a converter ``to`` (NumPy arrays in, ``xp``'s arrays out):
run with NumPy (``to`` is the identity) it is the reference; run with
``lazycore.numpy`` it is the check. What is compared: every array the call
returns (``numpy.asarray`` of it), within a tolerance of the dtype, and the
fallbacks the lazy run recorded.

scikit-learn and SciPy read ``SCIPY_ARRAY_API`` when they are imported and
scikit-learn's dispatch is process-wide, so the cases run in a child process
(``python cases.py NAME...``: one JSON line a case); the tests in this folder
start one per test module and check its lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
import warnings

import numpy

# A fallback that is no host work (a dtype question, a constant of the sizes, sorted
# unique values, an elementwise ufunc): any count of these fails a case.
NOISE = ("numpy.isdtype", "numpy.issubdtype", "numpy.result_type", "numpy.can_cast", "numpy.finfo",
         "numpy.iinfo", "numpy.promote_types", "numpy.common_type", "numpy.fft.fftfreq", "numpy.fft.rfftfreq",
         "numpy.fft.fftshift", "numpy.fft.ifftshift", "numpy.unique_values", "numpy.unique_counts",
         "numpy.unique_inverse", "numpy.unique_all", "numpy.unique", "numpy.linalg.diagonal", "numpy.diagonal",
         "numpy.searchsorted", "numpy.nextafter", "numpy.logaddexp", "numpy.logaddexp2")

RTOL = {"float32": 2e-5, "float64": 1e-10}

CASES: dict = {}
"""name -> (function of (xp, to, dtype), tolerance factor)."""


REFEREES: dict = {}
"""name -> :class:`Referee`: the cases whose float32 row a float64 truth judges."""


@dataclasses.dataclass(frozen=True)
class Referee:
    """A float32 row judged by a float64 truth instead of by NumPy's float32 result: the
    same call on float64 NumPy copies of the float32 inputs is the truth, and the lazy
    result passes when each array is no further from it (largest absolute difference)
    than ``factor`` times the peer's float32 result is. For results the last bit of an
    elementwise function or a sum's order decides, amplified (finite differences): two
    correct float32 runs part there, and which is nearer the truth is the question.
    ``peer``: whose float32 run is the yardstick, NumPy's (``"numpy"``), or the library's
    own Array API path run eagerly on torch CPU tensors (``"torch"``) where the library
    takes another algorithm for NumPy arrays (a float64 one: no float32 peer)."""

    factor: float
    peer: str = "numpy"


def case(name, slack=1.0, referee=None):
    """Register ``fn(xp, to, dtype)``; ``slack`` scales the dtype's tolerance (iterative
    solvers whose stopping point moves with the rounding: said where used); ``referee``
    a :class:`Referee` for the float32 row (said where used)."""

    def deco(fn):
        CASES[name] = (fn, slack)
        if referee is not None:
            REFEREES[name] = referee
        return fn

    return deco


def _data(dtype, n=48, d=4, seed=0):
    rng = numpy.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    labels = numpy.array([2, 1, 0])[rng.integers(0, 3, n)]  # classes first seen out of order
    X[labels == 1] += 1.5
    X[labels == 2] -= 1.0
    return rng, X, labels


def _proba(rng, n, k, dtype):
    return rng.dirichlet(numpy.ones(k), size=n).astype(dtype)


# --- scikit-learn ------------------------------------------------------------------------------------


def _estimator(make, attrs, methods=(), y="labels", Xfn=None, slack=1.0, name=None):
    def fn(xp, to, dtype):
        rng, X, labels = _data(dtype)
        if Xfn is not None:
            X = Xfn(X)
        target = {"labels": labels, "none": None, "positive": numpy.exp(X[:, 0] / 2).astype(dtype) + 1,
                  "real": (X @ numpy.arange(1, X.shape[1] + 1) + 0.5).astype(dtype)}[y]
        est = make()
        Xx = to(X)
        if target is None:
            est.fit(Xx)
        else:
            est.fit(Xx, to(target))
        out = {a: getattr(est, a) for a in attrs}
        for m in methods:
            out[m] = getattr(est, m)(Xx)
        return out

    case(name or make().__class__.__name__, slack=slack)(fn)


def _sklearn_cases():
    from sklearn import discriminant_analysis as da
    from sklearn import kernel_approximation as ka
    from sklearn import linear_model as lm
    from sklearn import naive_bayes as nb
    from sklearn import preprocessing as pp
    from sklearn.decomposition import PCA

    _estimator(da.LinearDiscriminantAnalysis, ["coef_", "intercept_", "classes_"], ["predict_proba"])
    _estimator(lambda: lm.RidgeClassifier(solver="svd"), ["coef_", "intercept_", "classes_"],
               ["decision_function", "predict"], name="RidgeClassifier")
    _estimator(lambda: lm.RidgeClassifierCV(), ["coef_", "intercept_", "classes_"], ["predict"],
               name="RidgeClassifierCV")
    _estimator(lambda: lm.Ridge(solver="svd"), ["coef_", "intercept_"], ["predict"], y="real", name="Ridge")
    _estimator(lambda: lm.RidgeCV(), ["coef_", "intercept_", "alpha_"], ["predict"], y="real", name="RidgeCV")
    # L-BFGS stops where the gradient's norm drops under its tolerance: the two runs' rounding
    # moves that point by about the tolerance, so their coefficients agree to ~1e-6, not 1e-10
    _estimator(lambda: lm.LogisticRegression(tol=1e-10, max_iter=1000), ["coef_", "intercept_", "classes_"],
               ["predict_proba"], slack=1e4, name="LogisticRegression")
    _estimator(lambda: lm.PoissonRegressor(tol=1e-10, max_iter=1000), ["coef_", "intercept_"], ["predict"],
               y="positive", slack=1e4, name="PoissonRegressor")
    _estimator(nb.GaussianNB, ["theta_", "var_", "class_prior_", "classes_"], ["predict_proba"])
    _estimator(pp.StandardScaler, ["mean_", "scale_"], ["transform"], y="none")
    _estimator(pp.MinMaxScaler, ["data_min_", "scale_"], ["transform"], y="none")
    _estimator(pp.MaxAbsScaler, ["max_abs_"], ["transform"], y="none")
    _estimator(pp.Normalizer, [], ["transform"], y="none")
    _estimator(lambda: pp.Binarizer(threshold=0.2), [], ["transform"], y="none", name="Binarizer")
    _estimator(pp.KernelCenterer, [], ["transform"], y="none", Xfn=lambda X: X @ X.T)
    _estimator(lambda: pp.PolynomialFeatures(2), [], ["transform"], y="none", name="PolynomialFeatures")
    _estimator(lambda: PCA(n_components=3, svd_solver="full"), ["components_", "explained_variance_", "mean_"],
               ["transform"], y="none", name="PCA")
    _estimator(lambda: ka.Nystroem(n_components=10, random_state=0), ["components_"], ["transform"], y="none",
               name="Nystroem")

    @case("LabelEncoder")
    def _(xp, to, dtype):
        _, _, labels = _data(dtype)
        enc = pp.LabelEncoder()
        codes = enc.fit_transform(to(labels.astype(dtype)))
        return {"classes_": enc.classes_, "codes": codes,
                "inverse": enc.inverse_transform(codes)}

    from sklearn import metrics as M

    def _metric(name, fn, kind):
        def run(xp, to, dtype):
            rng, X, labels = _data(dtype)
            n = labels.shape[0]
            if kind == "labels":
                pred = labels.copy()
                pred[rng.integers(0, n, n // 3)] = rng.integers(0, 3, n // 3)
                return fn(to(labels), to(pred))
            if kind == "proba":
                return fn(to(labels), to(_proba(rng, n, 3, dtype)))
            if kind == "binary":
                yb = (labels == 1).astype(numpy.int64)
                return fn(to(yb), to(rng.uniform(size=n).astype(dtype)))
            if kind == "real":
                t = (X[:, 0] ** 2 + 0.5).astype(dtype)
                return fn(to(t), to((t + rng.normal(scale=0.1, size=n).astype(dtype)) ** 2))
            if kind == "pair":
                return fn(to(X[:20]), to(X[20:]))
            raise ValueError(kind)

        case(name)(run)

    for name, kind in [
        ("accuracy_score", "labels"), ("balanced_accuracy_score", "labels"),
        ("cohen_kappa_score", "labels"), ("confusion_matrix", "labels"),
        ("hamming_loss", "labels"), ("zero_one_loss", "labels"),
        ("multilabel_confusion_matrix", "labels"), ("log_loss", "proba"),
        ("d2_log_loss_score", "proba"), ("brier_score_loss", "binary"),
        ("average_precision_score", "binary"), ("precision_recall_curve", "binary"),
        ("det_curve", "binary"), ("r2_score", "real"), ("explained_variance_score", "real"),
        ("mean_absolute_error", "real"), ("mean_squared_error", "real"),
        ("mean_squared_log_error", "real"), ("median_absolute_error", "real"),
        ("mean_pinball_loss", "real"), ("mean_tweedie_deviance", "real"),
        ("d2_absolute_error_score", "real"), ("d2_pinball_score", "real"),
    ]:
        _metric(name, getattr(M, name), kind)
    for name in ("f1_score", "precision_score", "recall_score", "jaccard_score"):
        _metric(name, lambda a, b, f=getattr(M, name): f(a, b, average="macro"), "labels")
    _metric("fbeta_score", lambda a, b: M.fbeta_score(a, b, beta=0.5, average="weighted"), "labels")
    @case("roc_auc_score(sample_weight)")
    def _(xp, to, dtype):
        # fpr is a cumulative sum of the negatives' weights: a tree-order sum went down
        # by an ulp where a weight was 0, and auc refused the curve (ValueError)
        rng, X, labels = _data(dtype, n=200)
        yb = (labels == 1).astype(numpy.int64)
        w = rng.uniform(size=200).astype(dtype)
        return M.roc_auc_score(to(yb), to(rng.uniform(size=200).astype(dtype)), sample_weight=to(w))

    from sklearn.metrics import pairwise as P

    for name in ("cosine_similarity", "euclidean_distances", "rbf_kernel", "linear_kernel", "polynomial_kernel", "sigmoid_kernel",
                 "chi2_kernel", "additive_chi2_kernel", "paired_cosine_distances", "paired_euclidean_distances"):
        if name in ("chi2_kernel", "additive_chi2_kernel"):
            _metric(name, lambda a, b, f=getattr(P, name): f(a * a, b * b), "pair")
        elif name.startswith("paired"):
            _metric(name, lambda a, b, f=getattr(P, name): f(a[:8], b[:8]), "pair")
        else:
            _metric(name, getattr(P, name), "pair")


# --- SciPy -------------------------------------------------------------------------------------------


def _scipy_cases():
    import scipy.fft as sfft
    import scipy.special as sp
    import scipy.stats as st

    def two(fn, name=None, positive=False):
        def run(xp, to, dtype):
            rng = numpy.random.default_rng(3)
            x = rng.normal(size=(3, 30)).astype(dtype)
            y = (x + rng.normal(size=(3, 30))).astype(dtype)
            if positive:
                x, y = numpy.abs(x) + 0.1, numpy.abs(y) + 0.1
            r = fn(to(x), to(y))
            return tuple(r) if isinstance(r, tuple) else r

        case(name)(run)

    two(lambda x, y: st.pearsonr(x[0], y[0]), name="stats.pearsonr")
    two(lambda x, y: st.pearsonr(x, y, axis=-1), name="stats.pearsonr(axis)")
    two(lambda x, y: st.ttest_ind(x, y, axis=-1), name="stats.ttest_ind")
    two(lambda x, y: st.ttest_rel(x, y, axis=-1), name="stats.ttest_rel")
    two(lambda x, y: st.ttest_1samp(x, 0.1, axis=-1), name="stats.ttest_1samp")
    # (its p-value is xp.clip(p, 0.): the Array API's clip with one bound)
    two(lambda x, y: (lambda r: (r.statistic, r.pvalue))(st.cramervonmises_2samp(x, y, axis=-1)),
        name="stats.cramervonmises_2samp")
    two(lambda x, y: st.skew(x, axis=-1), name="stats.skew")
    two(lambda x, y: st.kurtosis(x, axis=-1), name="stats.kurtosis")
    two(lambda x, y: st.zscore(x, axis=-1), name="stats.zscore")
    two(lambda x, y: st.moment(x, 3, axis=-1), name="stats.moment")
    two(lambda x, y: st.sem(x, axis=-1), name="stats.sem")
    two(lambda x, y: st.variation(x, axis=-1), name="stats.variation")
    two(lambda x, y: st.gmean(x, axis=-1), name="stats.gmean", positive=True)
    two(lambda x, y: st.hmean(x, axis=-1), name="stats.hmean", positive=True)
    two(lambda x, y: st.pmean(x, 2.5, axis=-1), name="stats.pmean", positive=True)
    two(lambda x, y: st.entropy(x, y, axis=-1), name="stats.entropy", positive=True)
    two(lambda x, y: st.describe(x, axis=-1)[2:], name="stats.describe")
    two(lambda x, y: st.chisquare(x, x.sum(axis=-1, keepdims=True) / 30 + 0 * y, axis=-1),
        name="stats.chisquare", positive=True)
    two(lambda x, y: sp.logsumexp(x, axis=-1), name="special.logsumexp")
    two(lambda x, y: sp.softmax(x, axis=-1), name="special.softmax")
    two(lambda x, y: sp.log_softmax(x, axis=-1), name="special.log_softmax")
    for f in ("expit", "erf", "erfc", "ndtr", "gammaln", "log_ndtr", "entr", "softplus"):
        two(lambda x, y, f=getattr(sp, f): f(x), name=f"special.{f}")
    two(lambda x, y: sp.logit(sp.expit(x)), name="special.logit")
    two(lambda x, y: sp.xlogy(x, y), name="special.xlogy", positive=True)
    two(lambda x, y: sp.rel_entr(x, y), name="special.rel_entr", positive=True)
    two(lambda x, y: sfft.fft(x, axis=-1), name="fft.fft")
    two(lambda x, y: sfft.rfft(x, axis=-1), name="fft.rfft")
    two(lambda x, y: sfft.irfft(sfft.rfft(x, axis=-1), axis=-1), name="fft.irfft")
    two(lambda x, y: sfft.fftshift(x, axes=-1), name="fft.fftshift")

    @case("fft.fftfreq")
    def _(xp, to, dtype):
        return sfft.fftfreq(10, 0.25, xp=xp), sfft.rfftfreq(9, xp=xp)


# --- array-api-extra ---------------------------------------------------------------------------------


def _xpx_cases():
    import array_api_extra as xpx

    def one(fn, name=None, ints=False):
        def run(xp, to, dtype):
            rng = numpy.random.default_rng(5)
            if ints:
                a = rng.integers(0, 9, 25)
                b = rng.integers(4, 14, 15)
                return fn(xp, to(a), to(b))
            x = rng.normal(size=(4, 6)).astype(dtype)
            y = (x + rng.normal(scale=1e-3, size=(4, 6))).astype(dtype)
            return fn(xp, to(x), to(y))

        case(f"xpx.{name}")(run)

    one(lambda xp, a, b: xpx.setdiff1d(a, b), name="setdiff1d", ints=True)
    one(lambda xp, a, b: xpx.union1d(a, b), name="union1d", ints=True)
    one(lambda xp, a, b: xpx.nunique(a), name="nunique", ints=True)
    one(lambda xp, a, b: xpx.isin(a, b), name="isin", ints=True)
    one(lambda xp, a, b: xpx.one_hot(a, 9), name="one_hot", ints=True)
    one(lambda xp, a, b: xpx.atleast_nd(x := a[0], ndim=3), name="atleast_nd")
    one(lambda xp, a, b: xpx.cov(a), name="cov")
    one(lambda xp, a, b: xpx.kron(a[:2, :2], b[:3, :2]), name="kron")
    one(lambda xp, a, b: xpx.pad(a, 2), name="pad")
    one(lambda xp, a, b: xpx.isclose(a, b, rtol=1e-3, atol=0.0), name="isclose")
    one(lambda xp, a, b: xpx.expand_dims(a, axis=(0, 2)), name="expand_dims")
    one(lambda xp, a, b: xpx.create_diagonal(a[0]), name="create_diagonal")
    one(lambda xp, a, b: xpx.sinc(a), name="sinc")
    one(lambda xp, a, b: xpx.nan_to_num(a / (b - b)), name="nan_to_num")
    one(lambda xp, a, b: xpx.at(a, (slice(None), 1)).add(b[:, 1]), name="at")
    one(lambda xp, a, b: xpx.apply_where(a > 0, (a, b), lambda u, v: u * v, fill_value=0.0), name="apply_where")
    one(lambda xp, a, b: xp.sort(xpx.partition(a[0], 2))[:3], name="partition")
    one(lambda xp, a, b: (xpx.nansum(a, axis=0), xpx.nanmean(a, axis=1), xpx.nanmax(a), xpx.nanmin(a)),
        name="nanreductions")


# --- einops ------------------------------------------------------------------------------------------


def _einops_cases():
    # einops' own functions know arrays by their framework (numpy, torch, jax ...); any Array
    # API array goes through einops.array_api (no einsum there)
    import einops.array_api as ea

    def one(fn, name):
        def run(xp, to, dtype):
            x = numpy.random.default_rng(7).normal(size=(2, 3, 4, 6)).astype(dtype)
            return fn(to(x))

        case(f"einops.{name}")(run)

    one(lambda x: ea.rearrange(x, "b c (h p) w -> b (h w) (c p)", p=2), "rearrange")
    one(lambda x: ea.reduce(x, "b c h w -> b c", "mean"), "reduce(mean)")
    one(lambda x: ea.reduce(x, "b c (h 2) w -> b h w", "max"), "reduce(max)")
    one(lambda x: ea.repeat(x[0, 0], "h w -> h w r", r=3), "repeat")
    one(lambda x: ea.pack([x, x[:, :1]], "b * h w")[0], "pack")
    one(lambda x: ea.unpack(ea.pack([x, x[:, :1]], "b * h w")[0], [[3], [1]], "b * h w"), "unpack")


def build():
    _sklearn_cases()
    _scipy_cases()
    _xpx_cases()
    _einops_cases()


# --- running and comparing ---------------------------------------------------------------------------


def _leaves(r, prefix=""):
    """``(path, numpy array)`` for every value in a result (dicts, tuples, named tuples)."""
    if isinstance(r, dict):
        for k, v in r.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(r, (tuple, list)):
        for i, v in enumerate(r):
            yield from _leaves(v, f"{prefix}[{i}]")
    else:
        yield prefix, numpy.asarray(r)


def compare(got, want, rtol):
    """Mismatch messages (empty: the results agree)."""
    g, w = dict(_leaves(got)), dict(_leaves(want))
    if g.keys() != w.keys():
        return [f"result structure differs: {sorted(g)} vs {sorted(w)}"]
    bad = []
    for k, wv in w.items():
        gv = g[k]
        if gv.shape != wv.shape:
            bad.append(f"{k}: shape {gv.shape} vs {wv.shape}")
        elif wv.dtype.kind in "fc" or gv.dtype.kind in "fc":
            scale = float(numpy.nanmax(numpy.abs(wv))) if wv.size and not numpy.all(numpy.isnan(wv)) else 0.0
            if not numpy.allclose(gv, wv, rtol=rtol, atol=rtol * scale, equal_nan=True):
                err = numpy.nanmax(numpy.abs(gv.astype(complex) - wv)) if gv.size else 0
                bad.append(f"{k}: max abs diff {err:.3g} (scale {scale:.3g}, rtol {rtol:g})")
        elif not numpy.array_equal(gv, wv):
            bad.append(f"{k}: {gv.ravel()[:8]} vs {wv.ravel()[:8]}")
        if gv.dtype != wv.dtype and not (gv.dtype.kind == wv.dtype.kind == "i"):
            bad.append(f"{k}: dtype {gv.dtype} vs {wv.dtype}")
    return bad


def _widen(a):
    """NumPy's float64 copy of a float32 input (the truth's operands: the same values)."""
    if isinstance(a, numpy.ndarray) and a.dtype.kind in "fc":
        return a.astype(numpy.complex128 if a.dtype.kind == "c" else numpy.float64)
    return a


def _torch_cpu(a):
    import torch

    return torch.asarray(a)


_PEERS = {"numpy": lambda a: a, "torch": _torch_cpu}


def refereed(got, peer, truth, factor):
    """Mismatch messages of a refereed row (empty: it passes) and, by array, the peer's and
    the lazy result's distances from the truth: structure, shapes, dtypes, integers and
    where NaN falls as the peer's; each float array no further from the truth than
    ``factor`` times the peer's."""
    g, p, t = dict(_leaves(got)), dict(_leaves(peer)), dict(_leaves(truth))
    if not g.keys() == p.keys() == t.keys():
        return [f"result structure differs: {sorted(g)} vs {sorted(p)} vs {sorted(t)}"], {}
    bad, dist = [], {}
    for k, pv in p.items():
        gv, tv = g[k], t[k]
        if not gv.shape == pv.shape == tv.shape:
            bad.append(f"{k}: shape {gv.shape} vs {pv.shape} (truth {tv.shape})")
            continue
        if gv.dtype != pv.dtype and not (gv.dtype.kind == pv.dtype.kind == "i"):
            bad.append(f"{k}: dtype {gv.dtype} vs {pv.dtype}")
        if pv.dtype.kind not in "fc":
            if not numpy.array_equal(gv, pv):
                bad.append(f"{k}: {gv.ravel()[:8]} vs {pv.ravel()[:8]}")
            continue
        if not numpy.array_equal(numpy.isnan(gv), numpy.isnan(pv)):
            bad.append(f"{k}: NaN where the peer has none or none where it has one")
            continue
        tv = tv.astype(numpy.complex128 if "c" in (gv.dtype.kind + tv.dtype.kind) else numpy.float64)
        d = [float(numpy.nanmax(numpy.abs(v.astype(tv.dtype) - tv), initial=0.0)) for v in (pv, gv)]
        dist[k] = d
        if d[1] > factor * d[0]:
            bad.append(f"{k}: {d[1]:.3g} from the float64 truth, the peer {d[0]:.3g} (factor {factor:g})")
    return bad, dist


def run_case(name, dtype):
    import lazycore.numpy as lnp
    from lazycore.observe import metrics

    fn, slack = CASES[name]
    rtol = RTOL[dtype] * slack
    referee = REFEREES.get(name) if dtype == "float32" else None
    out = {"case": name, "dtype": dtype}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = fn(numpy, lambda a: a, numpy.dtype(dtype))
            if referee is not None:
                truth = fn(numpy, _widen, numpy.dtype(dtype))
                peer = want if referee.peer == "numpy" else fn(numpy, _PEERS[referee.peer], numpy.dtype(dtype))
        except Exception as e:  # noqa: BLE001  (NumPy's own run failing is reported, not a lazycore bug)
            out.update(status="reference-error", error=f"{type(e).__name__}: {e}")
            return out
        metrics.reset()
        t0 = time.perf_counter()
        try:
            got = fn(lnp, lnp.asarray, numpy.dtype(dtype))
            if referee is None:
                bad = compare(got, want, rtol)
            else:
                bad, out["referee"] = refereed(got, peer, truth, referee.factor)
        except Exception as e:  # noqa: BLE001  (reported with its traceback)
            out.update(status="error", error=f"{type(e).__name__}: {e}",
                       trace=traceback.format_exc(limit=-6))
            bad = None
        out["seconds"] = round(time.perf_counter() - t0, 2)
    fallbacks = {k: sum(v.values()) for k, v in metrics.fallbacks().items()}
    out["fallbacks"] = fallbacks
    out["noise"] = {k: v for k, v in fallbacks.items() if k in NOISE}
    if bad is not None:
        out["status"] = "ok" if not bad else "mismatch"
        out["mismatch"] = bad
    return out


def main(argv):
    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    import sklearn

    sklearn.set_config(array_api_dispatch=True)
    build()
    if argv == ["--list"]:
        print(json.dumps(list(CASES)))
        return
    unknown = [n for n in argv if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases: {unknown}")
    names = argv or list(CASES)
    for name in names:
        for dtype in ("float32", "float64"):
            print(json.dumps(run_case(name, dtype)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
