"""More Array API consumers than ``cases.py`` holds: the rest of what scikit-learn 1.9's own
tests run under ``array_api_dispatch`` (metrics, GaussianMixture, temperature
calibration, model selection, label binarizing, FeatureUnion, clustering scores),
SciPy's Array API functions in special, stats, fft, signal, cluster and ndimage, and
the array-api-extra functions ``cases.py`` leaves out.

Same protocol as ``cases.py`` (its runner and comparison, one JSON line a case and
dtype): ``python cases_wide.py NAME...``, ``--list`` for the names.
"""

from __future__ import annotations

import sys

import numpy

import cases
from cases import _data, _proba, case


def _sklearn_more():
    import sklearn
    from sklearn import metrics as M
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.metrics import pairwise as P
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import GridSearchCV, cross_val_predict, train_test_split
    from sklearn.pipeline import FeatureUnion
    from sklearn.preprocessing import LabelBinarizer, label_binarize

    def metric(name, fn, kind):
        @case(name)
        def _(xp, to, dtype):
            rng, X, labels = _data(dtype)
            n = labels.shape[0]
            if kind == "labels":
                pred = labels.copy()
                pred[rng.integers(0, n, n // 3)] = rng.integers(0, 3, n // 3)
                return fn(to(labels), to(pred))
            if kind == "binary":
                yb = (labels == 1).astype(numpy.int64)
                return fn(to(yb), to(rng.uniform(size=n).astype(dtype)))
            if kind == "proba":
                return fn(to(labels), to(_proba(rng, n, 3, dtype)))
            if kind == "real":
                t = (X[:, 0] ** 2 + 0.5).astype(dtype)
                return fn(to(t), to((t + rng.normal(scale=0.1, size=n).astype(dtype)) ** 2))
            if kind == "pair":
                return fn(to(X[:20]), to(X[20:]))
            if kind == "cluster":
                return fn(to(X), to(labels))
            raise ValueError(kind)

    for name, kind in [("d2_brier_score", "binary"), ("roc_curve", "binary"), ("roc_auc_score", "binary"),
                       ("d2_tweedie_score", "real"), ("mean_poisson_deviance", "real"),
                       ("mean_gamma_deviance", "real"), ("max_error", "real"),
                       ("mean_absolute_percentage_error", "real"), ("root_mean_squared_error", "real"),
                       ("root_mean_squared_log_error", "real"),
                       ("calinski_harabasz_score", "cluster"), ("davies_bouldin_score", "cluster")]:
        metric(name, getattr(M, name), kind)
    metric("precision_recall_curve", M.precision_recall_curve, "binary")
    metric("det_curve", M.det_curve, "binary")
    metric("precision_recall_fscore_support", lambda a, b: M.precision_recall_fscore_support(a, b)[:3], "labels")
    metric("f1_score(micro)", lambda a, b: M.f1_score(a, b, average="micro"), "labels")
    metric("f1_score(None)", lambda a, b: M.f1_score(a, b, average=None), "labels")
    metric("confusion_matrix(normalize)", lambda a, b: M.confusion_matrix(a, b, normalize="true"), "labels")
    metric("log_loss(2 classes)", lambda a, b: M.log_loss((a == 1) * 1, b[:, 0] / (b[:, 0] + b[:, 1])),
           "proba")
    for name in ("paired_manhattan_distances",):
        metric(name, lambda a, b, f=getattr(P, name): f(a[:8], b[:8]), "pair")
    for name in ("cosine_distances", "pairwise_distances", "pairwise_distances_argmin"):
        metric(name, getattr(P, name), "pair")
    # on NumPy arrays scikit-learn answers these with scipy's cdist, in float64 whatever
    # the input; any other namespace gets its generic code, in the input's dtype
    for name in ("manhattan_distances", "laplacian_kernel"):
        metric(name, lambda a, b, f=getattr(P, name): f(a, b).astype("float64") if hasattr(f(a, b), "astype")
               else f(a, b), "pair")
    metric("pairwise_kernels(rbf)", lambda a, b: P.pairwise_kernels(a, b, metric="rbf", gamma=0.3), "pair")
    metric("pairwise_distances(manhattan)",
           lambda a, b: P.pairwise_distances(a, b, metric="manhattan").astype("float64"), "pair")
    metric("euclidean_distances(squared)", lambda a, b: P.euclidean_distances(a, b, squared=True), "pair")

    @case("entropy(cluster)")
    def _(xp, to, dtype):
        from sklearn.metrics.cluster._supervised import entropy
        _, _, labels = _data(dtype)
        return entropy(to(labels))

    for cov in ("full", "tied", "diag", "spherical"):
        @case(f"GaussianMixture({cov})", slack=1e3)
        def _(xp, to, dtype, cov=cov):
            # EM stops when the lower bound's change drops under tol: tol=1e-8 puts both runs
            # far past where their rounding differs, the slack is for the float32 solves
            _, X, _ = _data(dtype, n=60)
            g = GaussianMixture(n_components=3, covariance_type=cov, random_state=0, tol=1e-8, max_iter=200,
                                init_params="random_from_data").fit(to(X))
            return {"means_": g.means_, "weights_": g.weights_, "covariances_": g.covariances_,
                    "predict_proba": g.predict_proba(to(X)), "score_samples": g.score_samples(to(X)),
                    "score": g.score(to(X)), "bic": g.bic(to(X))}

    @case("CalibratedClassifierCV(temperature)", slack=1e4)
    def _(xp, to, dtype):
        # the temperature is found by a bounded scalar minimizer on the host: its stopping
        # point moves with the rounding of the loss (the tolerance is scikit-learn's own)
        _, X, labels = _data(dtype, n=90)
        cal = CalibratedClassifierCV(LinearDiscriminantAnalysis(), method="temperature", cv=3)
        cal.fit(to(X), to(labels.astype(dtype)))
        return cal.predict_proba(to(X))

    @case("train_test_split")
    def _(xp, to, dtype):
        _, X, labels = _data(dtype)
        return tuple(train_test_split(to(X), to(labels), random_state=0, stratify=labels))

    @case("GridSearchCV(LDA)")
    def _(xp, to, dtype):
        X = numpy.arange(100).reshape((10, 10)).astype(dtype)
        y = numpy.array([0] * 5 + [1] * 5)
        s = GridSearchCV(LinearDiscriminantAnalysis(), {"tol": [1e-2, 1e-4, 1e-6]}, cv=2, error_score="raise")
        s.fit(to(X), to(y))
        return s.score(to(X), to(y)), s.predict(to(X))

    @case("cross_val_predict(Ridge)")
    def _(xp, to, dtype):
        _, X, _ = _data(dtype, n=60)
        y = (X @ numpy.arange(1, 5) + 0.3).astype(dtype)
        return cross_val_predict(Ridge(solver="svd"), to(X), to(y), cv=3)

    @case("cross_val_predict(LDA)")
    def _(xp, to, dtype):
        _, X, labels = _data(dtype, n=60)
        return cross_val_predict(LinearDiscriminantAnalysis(), to(X), to(labels), cv=3, method="predict_proba")

    @case("LabelBinarizer")
    def _(xp, to, dtype):
        _, _, labels = _data(dtype)
        lb = LabelBinarizer(neg_label=-1, pos_label=2)
        t = lb.fit_transform(to(labels))
        return {"classes_": lb.classes_, "t": t, "inverse": lb.inverse_transform(t)}

    @case("label_binarize")
    def _(xp, to, dtype):
        _, _, labels = _data(dtype)
        return label_binarize(to(labels), classes=[0, 1, 2])

    @case("FeatureUnion(Nystroem)")
    def _(xp, to, dtype):
        X = numpy.random.RandomState(0).uniform(size=(20, 10)).astype(dtype)
        u = FeatureUnion([("a", Nystroem(n_components=5, random_state=0)),
                          ("b", Nystroem(n_components=8, random_state=1))])
        return u.fit_transform(to(X))

    del sklearn


def _ns(x):
    return x.__array_namespace__() if hasattr(x, "__array_namespace__") else numpy


def _scipy_more():
    import scipy.cluster.vq as vq
    import scipy.fft as sfft
    import scipy.ndimage as nd
    import scipy.signal as sig
    import scipy.special as sp
    import scipy.stats as st

    def two(fn, name, positive=False, unit=False):
        @case(name)
        def _(xp, to, dtype):
            rng = numpy.random.default_rng(3)
            x = rng.normal(size=(3, 30)).astype(dtype)
            y = (x + rng.normal(size=(3, 30))).astype(dtype)
            if positive:
                x, y = numpy.abs(x) + 0.1, numpy.abs(y) + 0.1
            if unit:
                x, y = 1 / (1 + numpy.exp(-x)), 1 / (1 + numpy.exp(-y))
            r = fn(to(x), to(y))
            return tuple(r) if isinstance(r, tuple) else r

    for f in ("erfinv", "erfcinv", "ndtri", "logit", "log_expit", "i0", "i0e", "i1", "i1e", "expm1",
              "log1p", "cosm1", "psi", "gamma", "sinc" if hasattr(sp, "sinc") else "erfcx", "ndtri_exp",
              "xlog1py", "boxcox", "inv_boxcox", "spence", "exprel"):
        if not hasattr(sp, f):
            continue
        if f in ("erfinv",):
            two(lambda x, y, f=getattr(sp, f): f(2 * x - 1), f"special.{f}", unit=True)
        elif f in ("erfcinv",):
            two(lambda x, y, f=getattr(sp, f): f(2 * x), f"special.{f}", unit=True)
        elif f in ("ndtri", "logit"):
            two(lambda x, y, f=getattr(sp, f): f(x), f"special.{f}", unit=True)
        elif f == "ndtri_exp":
            two(lambda x, y, f=getattr(sp, f): f(-x), f"special.{f}", positive=True)
        elif f in ("xlog1py", "boxcox", "inv_boxcox"):
            two(lambda x, y, f=getattr(sp, f): f(x, y), f"special.{f}", positive=True)
        elif f in ("gamma", "psi", "spence"):
            two(lambda x, y, f=getattr(sp, f): f(x), f"special.{f}", positive=True)
        else:
            two(lambda x, y, f=getattr(sp, f): f(x), f"special.{f}")
    two(lambda x, y: sp.gammainc(x, y), "special.gammainc", positive=True)
    two(lambda x, y: sp.gammaincc(x, y), "special.gammaincc", positive=True)
    two(lambda x, y: sp.betainc(x, y, 0.4 + 0 * x), "special.betainc", positive=True)
    two(lambda x, y: sp.chdtr(3.0 + 0 * x, y), "special.chdtr", positive=True)
    two(lambda x, y: sp.stdtr(4.0 + 0 * x, y), "special.stdtr")
    two(lambda x, y: sp.fdtr(3.0 + 0 * x, 5.0 + 0 * x, y), "special.fdtr", positive=True)
    # scipy.special's host route (any namespace but NumPy's) makes Python numbers 0-d float64 /
    # int64 arrays, which NumPy 2 promotes: the numbers are given as arrays of x's dtype
    two(lambda x, y: sp.bdtr(3 + 0 * x, 10 + 0 * x, x), "special.bdtr", unit=True)
    two(lambda x, y: sp.ndtr(x) - sp.log_ndtr(y), "special.ndtr-log_ndtr")
    two(lambda x, y: sp.logsumexp(x, b=y, axis=-1, return_sign=True), "special.logsumexp(b,sign)")
    two(lambda x, y: sp.kl_div(x, y), "special.kl_div", positive=True)
    two(lambda x, y: sp.huber(1 + 0 * x, x), "special.huber")
    two(lambda x, y: sp.pseudo_huber(1 + 0 * x, x), "special.pseudo_huber")
    two(lambda x, y: sp.binom(x * 10, 3.0 + 0 * x), "special.binom", positive=True)
    two(lambda x, y: sp.beta(x, y), "special.beta", positive=True)
    two(lambda x, y: sp.betaln(x, y), "special.betaln", positive=True)
    two(lambda x, y: sp.poch(x, 2.5 + 0 * x), "special.poch", positive=True)

    two(lambda x, y: st.spearmanr(x[0], y[0]) if hasattr(st, "spearmanr") else 0, "stats.spearmanr")
    two(lambda x, y: st.kendalltau(x[0], y[0]), "stats.kendalltau")
    two(lambda x, y: st.linregress(x[0], y[0])[:5], "stats.linregress")
    two(lambda x, y: st.trim_mean(x, 0.1, axis=-1), "stats.trim_mean")
    two(lambda x, y: st.tmean(x, (-1, 1), axis=-1), "stats.tmean")
    two(lambda x, y: st.tvar(x, (-1, 1), axis=-1), "stats.tvar")
    two(lambda x, y: st.tstd(x, (-1, 1), axis=-1), "stats.tstd")
    two(lambda x, y: st.tmin(x, -1, axis=-1), "stats.tmin")
    two(lambda x, y: st.tmax(x, 1, axis=-1), "stats.tmax")
    two(lambda x, y: st.tsem(x, (-1, 1), axis=-1), "stats.tsem")
    two(lambda x, y: st.kstat(x[0], 3), "stats.kstat")
    two(lambda x, y: st.kstatvar(x[0], 2), "stats.kstatvar")
    two(lambda x, y: st.skewtest(x, axis=-1), "stats.skewtest")
    two(lambda x, y: st.kurtosistest(x, axis=-1), "stats.kurtosistest")
    two(lambda x, y: st.normaltest(x, axis=-1), "stats.normaltest")
    two(lambda x, y: st.jarque_bera(x, axis=-1), "stats.jarque_bera")
    two(lambda x, y: st.power_divergence(x, x.mean(axis=-1, keepdims=True) + 0 * y, axis=-1,
                                         lambda_="log-likelihood"), "stats.power_divergence", positive=True)
    two(lambda x, y: st.ttest_ind(x, y, axis=-1, equal_var=False), "stats.ttest_ind(welch)")
    two(lambda x, y: st.ttest_ind_from_stats(x[0], y[0] + 1, 10, x[1], y[1] + 1, 12), "stats.ttest_ind_from_stats")
    two(lambda x, y: st.f_oneway(x, y, x + y, axis=-1), "stats.f_oneway")
    two(lambda x, y: st.bartlett(x[0], y[0]), "stats.bartlett")
    two(lambda x, y: st.levene(x[0], y[0]) if False else st.circmean(x, axis=-1), "stats.circmean")
    two(lambda x, y: st.circvar(x, axis=-1), "stats.circvar")
    two(lambda x, y: st.circstd(x, axis=-1), "stats.circstd")
    two(lambda x, y: st.gstd(x, axis=-1), "stats.gstd", positive=True)
    two(lambda x, y: st.differential_entropy(x, axis=-1), "stats.differential_entropy")
    two(lambda x, y: st.combine_pvalues(x[0], method="fisher"), "stats.combine_pvalues", unit=True)
    two(lambda x, y: st.boxcox_llf(0.5, x[0]), "stats.boxcox_llf", positive=True)
    two(lambda x, y: st.yeojohnson_llf(0.5, x[0]), "stats.yeojohnson_llf")
    two(lambda x, y: st.sigmaclip(x[0])[0] if False else st.iqr(x, axis=-1), "stats.iqr")
    two(lambda x, y: st.quantile(x, 0.3, axis=-1) if hasattr(st, "quantile") else 0, "stats.quantile")
    two(lambda x, y: st.rankdata(x, axis=-1), "stats.rankdata")
    two(lambda x, y: st.mode(numpy.round(x) if False else x, axis=-1)[1] if False else st.variation(x, axis=None),
        "stats.variation(None)")
    two(lambda x, y: st.wasserstein_distance(x[0], y[0]), "stats.wasserstein_distance")
    two(lambda x, y: st.energy_distance(x[0], y[0]), "stats.energy_distance")
    two(lambda x, y: st.Normal(mu=0.5, sigma=2.0).pdf(x) if hasattr(st, "Normal") else 0, "stats.Normal.pdf")
    two(lambda x, y: st.Normal(mu=0.5, sigma=2.0).logcdf(x) if hasattr(st, "Normal") else 0, "stats.Normal.logcdf")
    two(lambda x, y: st.directional_stats(x.T).mean_direction, "stats.directional_stats")
    two(lambda x, y: st.chatterjeexi(x[0], y[0])[:2] if hasattr(st, "chatterjeexi") else 0, "stats.chatterjeexi")
    two(lambda x, y: st.brunnermunzel(x[0], y[0]), "stats.brunnermunzel")
    two(lambda x, y: st.mannwhitneyu(x[0], y[0]), "stats.mannwhitneyu")
    two(lambda x, y: st.wilcoxon(x[0], y[0]), "stats.wilcoxon")
    two(lambda x, y: st.ks_2samp(x[0], y[0]), "stats.ks_2samp")
    two(lambda x, y: st.ansari(x[0], y[0]), "stats.ansari")

    two(lambda x, y: sfft.ifft(sfft.fft(x, axis=-1), axis=-1), "fft.ifft")
    two(lambda x, y: sfft.fft2(x), "fft.fft2")
    two(lambda x, y: sfft.fftn(x, norm="ortho"), "fft.fftn(ortho)")
    two(lambda x, y: sfft.irfftn(sfft.rfftn(x), s=x.shape), "fft.irfftn")
    two(lambda x, y: sfft.hfft(x, axis=-1), "fft.hfft")
    two(lambda x, y: sfft.ihfft(x, axis=-1), "fft.ihfft")
    two(lambda x, y: sfft.dct(x, axis=-1), "fft.dct")
    two(lambda x, y: sfft.idct(x, type=2, axis=-1), "fft.idct")
    two(lambda x, y: sfft.dst(x, axis=-1), "fft.dst")
    two(lambda x, y: sfft.ifftshift(x, axes=-1), "fft.ifftshift")
    two(lambda x, y: sfft.next_fast_len(31), "fft.next_fast_len")

    two(lambda x, y: sig.fftconvolve(x[0], y[0]), "signal.fftconvolve")
    two(lambda x, y: sig.convolve(x[0], y[0, :5]), "signal.convolve")
    two(lambda x, y: sig.correlate(x[0], y[0, :5]), "signal.correlate")
    two(lambda x, y: sig.convolve2d(x, y[:2, :3]), "signal.convolve2d")
    two(lambda x, y: sig.correlate2d(x, y[:2, :3], mode="same"), "signal.correlate2d")
    two(lambda x, y: sig.oaconvolve(x[0], y[0, :7]), "signal.oaconvolve")
    two(lambda x, y: sig.lfilter(y[0, :3], numpy.asarray([1.0, -0.5]) if False else y[0, :1] * 0 + 1, x[0]),
        "signal.lfilter(fir)")
    two(lambda x, y: sig.detrend(x, axis=-1), "signal.detrend")
    two(lambda x, y: sig.medfilt(x[0], 5), "signal.medfilt")
    two(lambda x, y: sig.wiener(x[0]), "signal.wiener")
    two(lambda x, y: sig.hilbert(x[0]), "signal.hilbert")
    two(lambda x, y: sig.windows.hann(16, xp=x.__array_namespace__()) if False else sig.savgol_filter(x[0], 7, 2),
        "signal.savgol_filter")
    two(lambda x, y: sig.welch(x[0], nperseg=10), "signal.welch")
    two(lambda x, y: sig.periodogram(x[0]), "signal.periodogram")
    two(lambda x, y: sig.resample(x[0], 20), "signal.resample")
    two(lambda x, y: sig.decimate(x[0], 2, ftype="fir"), "signal.decimate")

    two(lambda x, y: vq.whiten(x.T), "cluster.vq.whiten")
    two(lambda x, y: vq.vq(x.T, y.T[:4]), "cluster.vq.vq")
    two(lambda x, y: vq.kmeans(x.T, y.T[:3].copy() if False else y.T[:3], iter=5)[0], "cluster.vq.kmeans")

    two(lambda x, y: nd.gaussian_filter(x, 1.0), "ndimage.gaussian_filter")
    two(lambda x, y: nd.uniform_filter(x, 3), "ndimage.uniform_filter")
    two(lambda x, y: nd.median_filter(x, 3), "ndimage.median_filter")
    two(lambda x, y: nd.sobel(x), "ndimage.sobel")
    two(lambda x, y: nd.laplace(x), "ndimage.laplace")
    two(lambda x, y: nd.convolve(x, y[:2, :3]), "ndimage.convolve")
    two(lambda x, y: nd.maximum_filter(x, 3), "ndimage.maximum_filter")
    two(lambda x, y: nd.shift(x, (0.5, 1.5), order=1), "ndimage.shift")
    two(lambda x, y: nd.zoom(x, 1.5, order=1), "ndimage.zoom")
    two(lambda x, y: nd.rotate(x, 30, order=1), "ndimage.rotate")
    # scipy wants every array argument in one namespace (a list becomes a NumPy array)
    two(lambda x, y: nd.map_coordinates(x, _ns(x).asarray([[0.5, 1.5], [2.5, 3.5]], dtype=x.dtype), order=1),
        "ndimage.map_coordinates")
    two(lambda x, y: nd.label(x > 0)[0], "ndimage.label")
    two(lambda x, y: nd.binary_erosion(x > 0), "ndimage.binary_erosion")
    two(lambda x, y: nd.distance_transform_edt(x > 0), "ndimage.distance_transform_edt")
    two(lambda x, y: nd.center_of_mass(numpy.abs(x) if False else x * x), "ndimage.center_of_mass")
    two(lambda x, y: nd.sum_labels(x, nd.label(y > 0)[0], index=_ns(x).asarray([1, 2])), "ndimage.sum_labels")


def _xpx_more():
    import array_api_extra as xpx

    def one(fn, name):
        @case(f"xpx.{name}")
        def _(xp, to, dtype):
            rng = numpy.random.default_rng(5)
            x = rng.normal(size=(4, 6)).astype(dtype)
            y = (x + rng.normal(scale=1e-3, size=(4, 6))).astype(dtype)
            return fn(xp, to(x), to(y))

    one(lambda xp, a, b: xpx.broadcast_shapes(a.shape, b[:1].shape), "broadcast_shapes")
    one(lambda xp, a, b: xpx.default_dtype(xp), "default_dtype")
    one(lambda xp, a, b: xpx.argpartition(a[0], 2)[:3] * 0 + xp.sort(a[0][xpx.argpartition(a[0], 2)[:3]]),
        "argpartition")
    one(lambda xp, a, b: xpx.at(a)[1:, ::2].set(b[1:, ::2]), "at.set")
    one(lambda xp, a, b: xpx.at(a, (slice(None), 0)).multiply(2.0), "at.multiply")
    one(lambda xp, a, b: xpx.at(a, a > 0).min(0.1), "at.min(mask)")
    one(lambda xp, a, b: xpx.lazy_apply(lambda u: numpy.cumsum(u, axis=0), a, shape=a.shape, dtype=a.dtype),
        "lazy_apply")
    one(lambda xp, a, b: xpx.pad(a, (1, 2), constant_values=3.0), "pad(values)")
    one(lambda xp, a, b: xpx.cov(a.T), "cov(T)")
    one(lambda xp, a, b: xpx.sinc(xp.zeros(3, dtype=a.dtype)), "sinc(0)")
    one(lambda xp, a, b: xpx.nan_to_num(xp.asarray([float("inf"), -float("inf"), float("nan")], dtype=a.dtype),
                                        fill_value=1.0), "nan_to_num(fill)")
    one(lambda xp, a, b: xpx.isclose(a, xp.asarray(0.0, dtype=a.dtype), atol=0.5), "isclose(0-d)")
    one(lambda xp, a, b: xpx.setdiff1d(xp.round(a * 2), xp.round(b * 3), assume_unique=False), "setdiff1d(float)")
    one(lambda xp, a, b: xpx.union1d(xp.round(a * 2), xp.round(b * 3)), "union1d(float)")
    one(lambda xp, a, b: xpx.nunique(xp.round(a * 2)), "nunique(float)")
    one(lambda xp, a, b: xpx.isin(xp.round(a * 2), xp.round(b * 3), invert=True), "isin(invert)")
    one(lambda xp, a, b: xpx.angle(a), "angle")
    one(lambda xp, a, b: (xpx.deg2rad(a * 90), xpx.rad2deg(b)), "deg2rad,rad2deg")
    one(lambda xp, a, b: xpx.diag_indices(4, ndim=2, xp=xp), "diag_indices")
    one(lambda xp, a, b: (xpx.tril_indices(4, offset=-1, m=5, xp=xp), xpx.triu_indices(3, offset=1, xp=xp)), "tril,triu_indices")
    one(lambda xp, a, b: xpx.searchsorted(xp.sort(a[0]), b, side="right"), "searchsorted")
    one(lambda xp, a, b: xpx.unravel_index(xp.asarray([3, 7, 22]), (4, 6)), "unravel_index")


def build():
    _sklearn_more()
    _scipy_more()
    _xpx_more()


if __name__ == "__main__":
    cases.build = build
    cases.main(sys.argv[1:])
