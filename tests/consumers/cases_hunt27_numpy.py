"""Cases for test_hunt27_numpy.py (issue 39's hunt, session 27): what the earlier hunts
(``cases.py``, ``cases_wide.py``, ``cases_hunt26.py``) leave out. scikit-learn under
``array_api_dispatch`` (the estimators, metrics and tools its Array API list names with
the options nobody ran: multilabel and binary averages, ``normalize=``, tweedie powers,
``pairwise_kernels``' kernels, search and cross-validation tools, float32 beside
float64), SciPy's Array API paths (stats, special, signal, fft, cluster.vq,
spatial.distance), and plain NumPy scripts as users write them (``np`` is the namespace:
NumPy for the reference, ``lazycore.numpy`` for the check).

Same protocol as ``cases.py`` (its runner and comparison, one JSON line a case and dtype):
``python cases_hunt27_numpy.py NAME...``, ``--list`` for the names. Each line also has
``reads``: the lazy run's device-to-host copies (``transfers``, each announced by a
``transfer`` event), ``implicit`` barriers (a pending value read where the user asked for
none: ``np.asarray``/``float``/``bool`` of a lazy value inside a library), ``host_copies``
(values read from the host copy an upload keeps: no device read, no event) and
``unannounced`` (copies made by the PJRT layer without a ``transfer`` event).
"""

from __future__ import annotations

import sys

import numpy

import cases
from cases import _data, _proba, case


def _ns(x):
    return x.__array_namespace__() if hasattr(x, "__array_namespace__") else numpy


# --- scikit-learn ------------------------------------------------------------------------------------


def skl():
    import sklearn
    from sklearn import metrics as M
    from sklearn import preprocessing as pp
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.metrics import pairwise as P
    from sklearn.metrics.cluster import contingency_matrix
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import KFold, RandomizedSearchCV, cross_val_score, train_test_split

    def metric(name, fn, kind, slack=1.0):
        @case(name, slack=slack)
        def _(xp, to, dtype):
            rng, X, labels = _data(dtype)
            n = labels.shape[0]
            w = rng.uniform(0.1, 2.0, n).astype(dtype)
            if kind == "labels":
                pred = labels.copy()
                pred[rng.integers(0, n, n // 3)] = rng.integers(0, 3, n // 3)
                return fn(to(labels), to(pred), to(w))
            if kind == "binary":
                yb = (labels == 1).astype(numpy.int64)
                pred = yb.copy()
                pred[rng.integers(0, n, n // 4)] ^= 1
                return fn(to(yb), to(pred), to(w))
            if kind == "score":
                yb = (labels == 1).astype(numpy.int64)
                return fn(to(yb), to(rng.uniform(size=n).astype(dtype)), to(w))
            if kind == "multilabel":
                t = (rng.uniform(size=(n, 3)) < 0.4).astype(numpy.int64)
                p = t.copy()
                p[rng.integers(0, n, n // 3), rng.integers(0, 3, n // 3)] ^= 1
                return fn(to(t), to(p), to(w))
            if kind == "proba":
                return fn(to(labels), to(_proba(rng, n, 3, dtype)), to(w))
            if kind == "real":
                t = (X[:, :2] ** 2 + 0.5).astype(dtype)
                return fn(to(t), to((t + rng.normal(scale=0.1, size=(n, 2)).astype(dtype)) ** 2), to(w))
            if kind == "real1":
                t = (X[:, 0] ** 2 + 0.5).astype(dtype)
                return fn(to(t), to((t + rng.normal(scale=0.1, size=n).astype(dtype)) ** 2), to(w))
            if kind == "pair":
                return fn(to(numpy.abs(X[:20])), to(numpy.abs(X[20:])), None)
            raise ValueError(kind)

    # classification, the averages and options the earlier hunts left out
    metric("f1_score(binary,pos_label=0)", lambda a, b, w: M.f1_score(a, b, pos_label=0), "binary")
    metric("precision_score(binary,sw)", lambda a, b, w: M.precision_score(a, b, sample_weight=w), "binary")
    metric("recall_score(micro,sw)", lambda a, b, w: M.recall_score(a, b, average="micro", sample_weight=w), "labels")
    metric("fbeta_score(None,beta=2)", lambda a, b, w: M.fbeta_score(a, b, beta=2.0, average=None), "labels")
    metric("jaccard_score(weighted,sw)", lambda a, b, w: M.jaccard_score(a, b, average="weighted", sample_weight=w),
           "labels")
    metric("precision_recall_fscore_support(weighted,sw)",
           lambda a, b, w: M.precision_recall_fscore_support(a, b, average="weighted", sample_weight=w)[:3], "labels")
    metric("f1_score(samples)", lambda a, b, w: M.f1_score(a, b, average="samples"), "multilabel")
    metric("f1_score(multilabel,macro,sw)", lambda a, b, w: M.f1_score(a, b, average="macro", sample_weight=w),
           "multilabel")
    metric("jaccard_score(samples)", lambda a, b, w: M.jaccard_score(a, b, average="samples"), "multilabel")
    metric("multilabel_confusion_matrix(samplewise)",
           lambda a, b, w: M.multilabel_confusion_matrix(a, b, samplewise=True), "multilabel")
    metric("multilabel_confusion_matrix(sw,labels)",
           lambda a, b, w: M.multilabel_confusion_matrix(a, b, sample_weight=w, labels=[2, 0]), "labels")
    metric("hamming_loss(multilabel,sw)", lambda a, b, w: M.hamming_loss(a, b, sample_weight=w), "multilabel")
    metric("zero_one_loss(count,sw)", lambda a, b, w: M.zero_one_loss(a, b, normalize=False, sample_weight=w),
           "labels")
    metric("zero_one_loss(multilabel)", lambda a, b, w: M.zero_one_loss(a, b), "multilabel")
    metric("accuracy_score(multilabel,sw)", lambda a, b, w: M.accuracy_score(a, b, sample_weight=w), "multilabel")
    metric("confusion_matrix(all,sw)", lambda a, b, w: M.confusion_matrix(a, b, normalize="all", sample_weight=w),
           "labels")
    metric("confusion_matrix(pred)", lambda a, b, w: M.confusion_matrix(a, b, normalize="pred"), "labels")
    metric("contingency_matrix", lambda a, b, w: contingency_matrix(a, b), "labels")
    metric("contingency_matrix(eps)", lambda a, b, w: contingency_matrix(a, b, eps=0.5), "labels")
    metric("log_loss(count,labels)", lambda a, b, w: M.log_loss(a, b, normalize=False, labels=[0, 1, 2]), "proba")
    metric("d2_log_loss_score(sw)", lambda a, b, w: M.d2_log_loss_score(a, b, sample_weight=w), "proba")
    metric("brier_score_loss(pos_label,sw)", lambda a, b, w: M.brier_score_loss(a, b, sample_weight=w, pos_label=0),
           "score")
    metric("d2_brier_score(sw)", lambda a, b, w: M.d2_brier_score(a, b, sample_weight=w), "score")
    metric("roc_curve(sw,all)", lambda a, b, w: M.roc_curve(a, b, sample_weight=w, drop_intermediate=False), "score")
    metric("precision_recall_curve(sw)", lambda a, b, w: M.precision_recall_curve(a, b, sample_weight=w), "score")
    # regression
    metric("mean_tweedie_deviance(1.5,sw)", lambda a, b, w: M.mean_tweedie_deviance(a, b, power=1.5, sample_weight=w),
           "real1")
    metric("mean_tweedie_deviance(3)", lambda a, b, w: M.mean_tweedie_deviance(a, b, power=3), "real1")
    metric("mean_tweedie_deviance(0)", lambda a, b, w: M.mean_tweedie_deviance(a, b, power=0), "real1")
    metric("d2_tweedie_score(1,sw)", lambda a, b, w: M.d2_tweedie_score(a, b, power=1, sample_weight=w), "real1")
    metric("mean_gamma_deviance(sw)", lambda a, b, w: M.mean_gamma_deviance(a, b, sample_weight=w), "real1")
    metric("mean_poisson_deviance(sw)", lambda a, b, w: M.mean_poisson_deviance(a, b, sample_weight=w), "real1")
    metric("mean_absolute_error(raw,sw)",
           lambda a, b, w: M.mean_absolute_error(a, b, multioutput="raw_values", sample_weight=w), "real")
    metric("mean_absolute_percentage_error(raw)",
           lambda a, b, w: M.mean_absolute_percentage_error(a, b, multioutput="raw_values"), "real")
    metric("mean_squared_log_error(sw,weights)",
           lambda a, b, w: M.mean_squared_log_error(a, b, sample_weight=w,
                                                    multioutput=_ns(w).asarray([0.3, 0.7], dtype=w.dtype)),
           "real")
    metric("root_mean_squared_error(raw,sw)",
           lambda a, b, w: M.root_mean_squared_error(a, b, multioutput="raw_values", sample_weight=w), "real")
    metric("root_mean_squared_log_error(sw)", lambda a, b, w: M.root_mean_squared_log_error(a, b, sample_weight=w),
           "real")
    metric("max_error", lambda a, b, w: M.max_error(a, b), "real1")
    metric("explained_variance(variance_weighted,sw)",
           lambda a, b, w: M.explained_variance_score(a, b, multioutput="variance_weighted", sample_weight=w), "real")
    metric("explained_variance(constant,force_finite)",
           lambda a, b, w: (M.explained_variance_score(a * 0 + 1, b),
                            M.explained_variance_score(a * 0 + 1, b, force_finite=False)),
           "real1")
    metric("r2_score(constant,force_finite)",
           lambda a, b, w: (M.r2_score(a * 0 + 1, b), M.r2_score(a * 0 + 1, a * 0 + 1),
                            M.r2_score(a * 0 + 1, b, force_finite=False)),
           "real1")
    metric("d2_absolute_error_score(raw,sw)",
           lambda a, b, w: M.d2_absolute_error_score(a, b, multioutput="raw_values", sample_weight=w), "real")
    metric("d2_pinball_score(0.8,sw)", lambda a, b, w: M.d2_pinball_score(a, b, alpha=0.8, sample_weight=w), "real")
    metric("median_absolute_error(raw)", lambda a, b, w: M.median_absolute_error(a, b, multioutput="raw_values"),
           "real")
    # pairwise: the kernels pairwise_kernels names, and the metrics pairwise_distances takes
    for kern, kw in [("polynomial", dict(degree=2, coef0=0.5)), ("sigmoid", dict(gamma=0.2)), ("chi2", dict(gamma=0.5)),
                     ("additive_chi2", {}), ("cosine", {}), ("linear", {}), ("poly", dict(degree=3))]:
        metric(f"pairwise_kernels({kern})",
               lambda a, b, w, kern=kern, kw=kw: P.pairwise_kernels(a, b, metric=kern, **kw), "pair")
    metric("pairwise_kernels(rbf,X only)", lambda a, b, w: P.pairwise_kernels(a, metric="rbf", gamma=0.4), "pair")
    metric("pairwise_distances(l2)", lambda a, b, w: P.pairwise_distances(a, b, metric="l2"), "pair")
    metric("pairwise_distances(euclidean,X only)", lambda a, b, w: P.pairwise_distances(a, metric="euclidean"), "pair")
    metric("cosine_distances(X only)", lambda a, b, w: P.cosine_distances(a), "pair")
    metric("euclidean_distances(norms)",
           lambda a, b, w: P.euclidean_distances(a, b, Y_norm_squared=_ns(b).sum(b * b, axis=1)), "pair")
    metric("polynomial_kernel(defaults)", lambda a, b, w: P.polynomial_kernel(a, b), "pair")
    metric("sigmoid_kernel(coef0)", lambda a, b, w: P.sigmoid_kernel(a, b, gamma=0.3, coef0=-0.5), "pair")
    metric("rbf_kernel(default gamma)", lambda a, b, w: P.rbf_kernel(a, b), "pair")
    metric("paired_distances(cosine)", lambda a, b, w: P.paired_cosine_distances(a[:10], b[:10]), "pair")

    # float32 beside float64: scikit-learn's "everything follows y_pred"
    @case("mixed: r2_score(float64 true, dtype pred)")
    def _(xp, to, dtype):
        rng, X, _ = _data(dtype)
        t = (X[:, 0] ** 2).astype(numpy.float64)
        return M.r2_score(to(t), to((t + rng.normal(scale=0.1, size=t.shape)).astype(dtype)))

    @case("mixed: mean_squared_error(float32 true, dtype pred,sw)")
    def _(xp, to, dtype):
        rng, X, _ = _data(dtype)
        t = (X[:, :2] ** 2).astype(numpy.float32)
        p = (t + rng.normal(scale=0.1, size=t.shape)).astype(dtype)
        return M.mean_squared_error(to(t), to(p), sample_weight=to(rng.uniform(size=48)), multioutput="raw_values")

    @case("mixed: StandardScaler fit dtype, transform float64")
    def _(xp, to, dtype):
        _, X, _ = _data(dtype)
        s = pp.StandardScaler().fit(to(X))
        return {"mean_": s.mean_, "t": s.transform(to(X.astype(numpy.float64) * 1.5))}

    @case("mixed: LDA fit dtype, predict float32")
    def _(xp, to, dtype):
        _, X, labels = _data(dtype)
        lda = LinearDiscriminantAnalysis().fit(to(X), to(labels))
        return {"coef_": lda.coef_, "p": lda.predict_proba(to(X[:10].astype(numpy.float32)))}

    # estimators: options the earlier hunts did not run
    def est(name, make, attrs, methods=(), y="labels", slack=1.0, n=48):
        @case(name, slack=slack)
        def _(xp, to, dtype):
            rng, X, labels = _data(dtype, n=n)
            target = {"labels": labels, "none": None, "binary": (labels == 1).astype(numpy.int64),
                      "positive": numpy.exp(X[:, 0] / 2).astype(dtype) + 1,
                      "real": (X @ numpy.arange(1, X.shape[1] + 1) + 0.5).astype(dtype)}[y]
            e = make()
            Xx = to(X)
            e.fit(Xx) if target is None else e.fit(Xx, to(target))
            out = {a: getattr(e, a) for a in attrs}
            for m in methods:
                if m == "inverse_transform":
                    out[m] = e.inverse_transform(e.transform(Xx))
                elif m == "score":
                    out[m] = e.score(Xx) if target is None else e.score(Xx, to(target))
                else:
                    out[m] = getattr(e, m)(Xx)
            return out

    est("StandardScaler(no mean)", lambda: pp.StandardScaler(with_mean=False), ["scale_", "var_"],
        ["transform", "inverse_transform"], y="none")
    est("StandardScaler(no std)", lambda: pp.StandardScaler(with_std=False), ["mean_"], ["transform"], y="none")
    est("MinMaxScaler(defaults,inverse)", pp.MinMaxScaler, ["data_min_", "data_max_", "data_range_"],
        ["transform", "inverse_transform"], y="none")
    est("MaxAbsScaler(inverse)", pp.MaxAbsScaler, ["scale_"], ["transform", "inverse_transform"], y="none")
    est("Binarizer(0)", pp.Binarizer, [], ["transform"], y="none")
    est("PolynomialFeatures(3,no bias)", lambda: pp.PolynomialFeatures(3, include_bias=False), ["powers_"],
        ["transform"], y="none")
    est("GaussianMixture(random,predict)",
        lambda: GaussianMixture(2, init_params="random", random_state=0, tol=1e-8, max_iter=100),
        ["weights_", "means_", "converged_"], ["predict", "score_samples"], y="none", slack=1e3, n=60)
    est("GaussianMixture(reg_covar,diag)",
        lambda: GaussianMixture(3, covariance_type="diag", reg_covar=1e-2, init_params="random_from_data",
                                random_state=1, tol=1e-8, max_iter=100),
        ["means_", "precisions_cholesky_"], ["predict_proba"], y="none", slack=1e3, n=60)
    est("LDA(svd,tol,no covariance)", lambda: LinearDiscriminantAnalysis(tol=1e-2), ["coef_", "intercept_"],
        ["transform", "predict"])
    est("RidgeClassifier(svd,multi)", lambda: RidgeClassifier(solver="svd", alpha=3.0),
        ["coef_", "intercept_"], ["decision_function", "predict", "score"])

    from sklearn.linear_model import LogisticRegression, PoissonRegressor

    # L-BFGS stops where the gradient's norm drops under its tolerance (cases.py's slack)
    est("LogisticRegression(C,no intercept)", lambda: LogisticRegression(C=0.3, fit_intercept=False, tol=1e-10,
                                                                         max_iter=1000),
        ["coef_"], ["predict_log_proba", "decision_function"], slack=1e4)
    est("LogisticRegression(binary)", lambda: LogisticRegression(tol=1e-10, max_iter=1000),
        ["coef_", "intercept_"], ["predict_proba", "predict"], slack=1e4, y="binary")
    est("PoissonRegressor(alpha,no intercept)", lambda: PoissonRegressor(alpha=0.5, fit_intercept=False, tol=1e-10,
                                                                         max_iter=1000),
        ["coef_"], ["predict", "score"], y="positive", slack=1e4)

    @case("LogisticRegression(sample_weight)", slack=1e4)
    def _(xp, to, dtype):
        rng, X, labels = _data(dtype)
        w = rng.uniform(0.1, 2.0, 48).astype(dtype)
        m = LogisticRegression(tol=1e-10, max_iter=1000).fit(to(X), to(labels), sample_weight=to(w))
        return {"coef_": m.coef_, "intercept_": m.intercept_, "p": m.predict_proba(to(X))}

    @case("FrozenEstimator(LDA)")
    def _(xp, to, dtype):
        from sklearn.frozen import FrozenEstimator

        _, X, labels = _data(dtype)
        f = FrozenEstimator(LinearDiscriminantAnalysis().fit(to(X), to(labels)))
        f.fit(to(X[::-1]), to(labels[::-1]))  # a no-op
        return f.predict_proba(to(X)), f.score(to(X), to(labels))

    @case("move_estimator_to(fit on NumPy)")
    def _(xp, to, dtype):
        from sklearn.utils._array_api import move_estimator_to

        _, X, labels = _data(dtype)
        with sklearn.config_context(array_api_dispatch=False):
            lda = LinearDiscriminantAnalysis().fit(X, labels)
        moved = move_estimator_to(lda, xp, None)
        return moved.coef_, moved.predict_proba(to(X)), moved.transform(to(X))

    @case("KernelCenterer(fit,transform other)")
    def _(xp, to, dtype):
        _, X, _ = _data(dtype)
        K = X[:20] @ X[:20].T
        Kt = X[20:30] @ X[:20].T
        kc = pp.KernelCenterer().fit(to(K))
        return {"K_fit_rows_": kc.K_fit_rows_, "K_fit_all_": kc.K_fit_all_, "t": kc.transform(to(Kt))}

    @case("LabelEncoder(ints)")
    def _(xp, to, dtype):
        _, _, labels = _data(dtype)
        enc = pp.LabelEncoder().fit(to(labels * 7 - 3))
        codes = enc.transform(to(labels[::-1] * 7 - 3))
        return {"classes_": enc.classes_, "codes": codes, "inverse": enc.inverse_transform(codes)}

    @case("LabelBinarizer(binary)")
    def _(xp, to, dtype):
        _, _, labels = _data(dtype)
        lb = pp.LabelBinarizer().fit(to(labels == 1))
        t = lb.transform(to(labels[::-1] == 1))
        return {"classes_": lb.classes_, "t": t, "inv": lb.inverse_transform(t)}

    # tools
    @case("train_test_split(no shuffle,0.3)")
    def _(xp, to, dtype):
        _, X, labels = _data(dtype)
        return tuple(train_test_split(to(X), to(labels), test_size=0.3, shuffle=False))

    @case("train_test_split(3 arrays)")
    def _(xp, to, dtype):
        rng, X, labels = _data(dtype)
        w = rng.uniform(size=48).astype(dtype)
        return tuple(train_test_split(to(X), to(labels), to(w), train_size=30, random_state=3))

    @case("cross_val_score(Ridge,r2)")
    def _(xp, to, dtype):
        _, X, _ = _data(dtype, n=60)
        y = (X @ numpy.arange(1, 5) + 0.3).astype(dtype)
        return numpy.asarray(cross_val_score(Ridge(solver="svd"), to(X), to(y), cv=KFold(3)))

    @case("cross_val_score(LDA,accuracy)")
    def _(xp, to, dtype):
        _, X, labels = _data(dtype, n=60)
        return numpy.asarray(cross_val_score(LinearDiscriminantAnalysis(), to(X), to(labels), cv=3))

    @case("cross_val_score(RidgeClassifier,f1_macro)")
    def _(xp, to, dtype):
        _, X, labels = _data(dtype, n=60)
        return numpy.asarray(cross_val_score(RidgeClassifier(solver="svd"), to(X), to(labels), cv=3,
                                             scoring="f1_macro"))

    @case("RandomizedSearchCV(Ridge)")
    def _(xp, to, dtype):
        _, X, _ = _data(dtype, n=60)
        y = (X @ numpy.arange(1, 5) + 0.3).astype(dtype)
        s = RandomizedSearchCV(Ridge(solver="svd"), {"alpha": [0.01, 0.1, 1.0, 10.0]}, n_iter=3, cv=3,
                               random_state=0).fit(to(X), to(y))
        return s.best_params_["alpha"], s.best_estimator_.coef_, s.predict(to(X))

    @case("HalvingGridSearchCV(LDA)")
    def _(xp, to, dtype):
        from sklearn.experimental import enable_halving_search_cv  # noqa: F401
        from sklearn.model_selection import HalvingGridSearchCV

        _, X, labels = _data(dtype, n=90)
        s = HalvingGridSearchCV(LinearDiscriminantAnalysis(), {"tol": [1e-1, 1e-4, 1e-6]}, cv=3, factor=2,
                                random_state=0).fit(to(X), to(labels))
        return s.best_params_["tol"], s.predict(to(X))

    @case("check_consistent_length")
    def _(xp, to, dtype):
        from sklearn.utils import check_consistent_length

        _, X, labels = _data(dtype)
        check_consistent_length(to(X), to(labels))
        try:
            check_consistent_length(to(X), to(labels[:-1]))
            return False
        except ValueError:
            return True


# --- SciPy -------------------------------------------------------------------------------------------


def sci():
    import scipy.cluster.vq as vq
    import scipy.fft as sfft
    import scipy.signal as sig
    import scipy.spatial.distance as dist
    import scipy.special as sp
    import scipy.stats as st

    def two(fn, name, positive=False, unit=False, slack=1.0):
        @case(name, slack=slack)
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

    # stats
    two(lambda x, y: st.ttest_ind(x, y, axis=None), "stats.ttest_ind(None)")
    two(lambda x, y: st.ttest_rel(x, y, axis=-1, alternative="greater").confidence_interval(0.95),
        "stats.ttest_rel.ci")
    two(lambda x, y: st.zscore(x, axis=0, ddof=1), "stats.zscore(axis0,ddof)")
    two(lambda x, y: st.gzscore(x, axis=-1), "stats.gzscore", positive=True)
    two(lambda x, y: st.moment(x, order=4, axis=None), "stats.moment(4,None)")
    two(lambda x, y: st.moment(x, order=[0, 1, 2], axis=0), "stats.moment(0,1,2)")
    two(lambda x, y: st.skew(x, axis=0), "stats.skew(axis0)")
    two(lambda x, y: st.kurtosis(x, axis=None, fisher=True, bias=True), "stats.kurtosis(None)")
    two(lambda x, y: st.entropy(x, y, axis=0), "stats.entropy(qk,axis0)", positive=True)
    two(lambda x, y: st.entropy(x[0]), "stats.entropy(1d)", positive=True)
    for method in ("min", "max", "dense", "ordinal"):
        two(lambda x, y, m=method: st.rankdata(_ns(x).round(x * 2), method=m, axis=-1), f"stats.rankdata({method})")
    two(lambda x, y: st.rankdata(x, axis=None), "stats.rankdata(None)")
    two(lambda x, y: st.pearsonr(x, y, axis=0), "stats.pearsonr(axis0)")
    two(lambda x, y: st.pearsonr(x[0], y[0], alternative="less").confidence_interval(0.8), "stats.pearsonr(less).ci")
    two(lambda x, y: st.variation(x, axis=-1, ddof=1), "stats.variation(ddof)", positive=True)
    two(lambda x, y: st.describe(x, axis=None, ddof=0)[2:], "stats.describe(None)")
    two(lambda x, y: st.sem(x, axis=0, ddof=2), "stats.sem(ddof2)")
    two(lambda x, y: st.tmean(x, (-1, 1), inclusive=(False, True), axis=None), "stats.tmean(exclusive)")
    two(lambda x, y: st.median_abs_deviation(x, axis=-1, scale="normal"), "stats.median_abs_deviation")
    two(lambda x, y: st.iqr(x, axis=None, scale="normal"), "stats.iqr(normal)")
    two(lambda x, y: st.percentileofscore(x[0], 0.3), "stats.percentileofscore")
    two(lambda x, y: st.scoreatpercentile(x[0], [10, 90]), "stats.scoreatpercentile")
    two(lambda x, y: st.hmean(x, axis=None), "stats.hmean(None)", positive=True)
    two(lambda x, y: st.pmean(x, -1.5, axis=-1, weights=y), "stats.pmean(weights)", positive=True)
    two(lambda x, y: st.norm.pdf(x, loc=0.5, scale=2.0), "stats.norm.pdf")
    two(lambda x, y: st.norm.cdf(x), "stats.norm.cdf")
    two(lambda x, y: st.t.sf(_ns(x).abs(x), df=5), "stats.t.sf")
    two(lambda x, y: st.gamma.logpdf(x, a=2.0, scale=1.5), "stats.gamma.logpdf", positive=True)
    two(lambda x, y: st.Normal(mu=x[0], sigma=1.5).logpdf(y[0]) if hasattr(st, "Normal") else 0,
        "stats.Normal(array mu).logpdf")
    two(lambda x, y: st.Normal().cdf(x, y) if hasattr(st, "Normal") else 0, "stats.Normal.cdf(x,y)")
    # special
    two(lambda x, y: sp.logsumexp(x, axis=(0, 1), keepdims=True), "special.logsumexp(axes,keepdims)")
    two(lambda x, y: sp.logsumexp(_ns(x).where(x > 0.5, -_ns(x).inf, x), axis=-1), "special.logsumexp(-inf)")
    two(lambda x, y: sp.logsumexp(x * 0 - _ns(x).inf, axis=-1), "special.logsumexp(all -inf)")
    two(lambda x, y: sp.softmax(x, axis=0), "special.softmax(axis0)")
    two(lambda x, y: sp.softmax(_ns(x).where(x > 0.5, -_ns(x).inf, x), axis=-1), "special.softmax(-inf)")
    two(lambda x, y: sp.log_softmax(x, axis=None), "special.log_softmax(None)")
    two(lambda x, y: sp.xlogy(x * (x > 0), y), "special.xlogy(zeros)", positive=True)
    two(lambda x, y: (sp.gammaln(x), sp.gammaln(-x - 0.5)), "special.gammaln(negative)", positive=True)
    two(lambda x, y: sp.digamma(x), "special.digamma", positive=True)
    two(lambda x, y: sp.loggamma(x), "special.loggamma", positive=True)
    two(lambda x, y: sp.expit(x * 40), "special.expit(large)")
    two(lambda x, y: sp.log_expit(x * 40), "special.log_expit(large)")
    two(lambda x, y: sp.erf(x) + sp.erfc(y), "special.erf+erfc")
    two(lambda x, y: sp.exp2(x) + sp.exp10(y), "special.exp2,exp10")
    two(lambda x, y: sp.cbrt(x), "special.cbrt")
    two(lambda x, y: sp.round(x * 3), "special.round")
    two(lambda x, y: sp.i0e(x) + sp.i1e(y), "special.i0e,i1e")
    two(lambda x, y: sp.entr(x) + sp.rel_entr(x, y), "special.entr,rel_entr", unit=True)
    # signal
    for win in ("hamming", "blackman", ("gaussian", 2.5), ("tukey", 0.3), "bartlett", "boxcar", "cosine",
                ("kaiser", 8.0), "nuttall", "flattop"):
        two(lambda x, y, win=win: sig.get_window(win, 17, xp=_ns(x)) if "xp" in sig.get_window.__code__.co_varnames
            else sig.get_window(win, 17), f"signal.get_window({win})")
    two(lambda x, y: sig.convolve(x[0], y[0, :5], mode="same"), "signal.convolve(same)")
    two(lambda x, y: sig.convolve(x[0], y[0, :5], mode="valid", method="direct"), "signal.convolve(valid,direct)")
    two(lambda x, y: sig.correlate(x[0], y[0, :7], mode="same", method="fft"), "signal.correlate(same,fft)")
    two(lambda x, y: sig.correlate(x, y[:2, :3], mode="full"), "signal.correlate(2d)")
    two(lambda x, y: sig.fftconvolve(x, y[:2, :4], mode="same"), "signal.fftconvolve(2d,same)")
    two(lambda x, y: sig.fftconvolve(x, y, mode="valid", axes=-1), "signal.fftconvolve(axes)")
    two(lambda x, y: sig.convolve2d(x, y[:2, :3], boundary="wrap", mode="same"), "signal.convolve2d(wrap)")
    two(lambda x, y: sig.convolve2d(x, y[:2, :3], boundary="symm"), "signal.convolve2d(symm)")
    two(lambda x, y: sig.oaconvolve(x, y[:, :6], mode="valid", axes=1), "signal.oaconvolve(axes)")
    # fft
    two(lambda x, y: sfft.rfft2(x), "fft.rfft2")
    two(lambda x, y: sfft.irfft2(sfft.rfft2(x), s=x.shape), "fft.irfft2")
    two(lambda x, y: sfft.fft(x, n=40, axis=-1, norm="forward"), "fft.fft(n,forward)")
    two(lambda x, y: sfft.ifftn(x, axes=(0, 1), norm="ortho"), "fft.ifftn(ortho)")
    two(lambda x, y: sfft.dctn(x, type=2, norm="ortho"), "fft.dctn")
    two(lambda x, y: sfft.idctn(sfft.dctn(x, type=3), type=3), "fft.idctn(3)")
    two(lambda x, y: sfft.dst(x, type=1, axis=-1), "fft.dst(1)")
    two(lambda x, y: sfft.dct(x, type=4, axis=0), "fft.dct(4)")
    two(lambda x, y: sfft.fftshift(sfft.fft2(x)), "fft.fftshift(fft2)")
    # cluster.vq
    two(lambda x, y: vq.vq(x.T, y.T[:4], check_finite=False), "cluster.vq.vq(no check)")
    two(lambda x, y: vq.whiten(x), "cluster.vq.whiten(rows)")
    two(lambda x, y: vq.kmeans(x.T, y.T[:2], iter=4, thresh=1e-12)[0], "cluster.vq.kmeans(thresh)")
    # spatial.distance
    for m in ("euclidean", "cityblock", "cosine", "chebyshev", "correlation", "braycurtis", "canberra",
              "jensenshannon", "seuclidean", "minkowski"):
        two(lambda x, y, m=m: dist.cdist(_ns(x).abs(x.T[:6]), _ns(y).abs(y.T[:5]), m), f"spatial.distance.cdist({m})")
    two(lambda x, y: dist.pdist(x.T[:8], "euclidean"), "spatial.distance.pdist")
    two(lambda x, y: dist.squareform(dist.pdist(x.T[:8], "sqeuclidean")), "spatial.distance.squareform(pdist)")
    two(lambda x, y: (dist.euclidean(x[0], y[0]), dist.cosine(x[0], y[0]), dist.correlation(x[0], y[0])),
        "spatial.distance(1d functions)")


# --- users' plain NumPy scripts ----------------------------------------------------------------------


def scripts():
    # a k-means loop with bincount centre updates and a convergence check each iteration
    @case("script.kmeans(bincount,allclose)")
    def _(np, to, dtype):
        rng, Xn, _ = _data(dtype, n=60)
        X = to(Xn)
        K = 3
        C = X[[0, 10, 20]].copy()
        for it in range(20):
            d = np.linalg.norm(X[:, None, :] - C[None, :, :], axis=2)
            lab = d.argmin(axis=1)
            counts = np.bincount(lab, minlength=K)
            C_new = np.stack([np.bincount(lab, weights=X[:, j], minlength=K) for j in range(X.shape[1])], axis=1)
            C_new = C_new / np.maximum(counts, 1)[:, None]
            if np.allclose(C, C_new):
                break
            C = C_new
        inertia = np.sum((X - C[lab]) ** 2)
        return C, lab, inertia, it

    # logistic regression by gradient descent, a bias column, L2, in-place update, a loss every 10 steps
    @case("script.logreg(gd,l2)")
    def _(np, to, dtype):
        _, Xn, labels = _data(dtype, n=64)
        X, y = to(Xn), to((labels == 1).astype(dtype))
        Xb = np.hstack([np.ones((X.shape[0], 1), dtype=X.dtype), X])
        w = np.zeros(Xb.shape[1], dtype=X.dtype)
        losses = []
        for it in range(30):
            p = 1.0 / (1.0 + np.exp(-(Xb @ w)))
            grad = Xb.T @ (p - y) / len(y) + 1e-2 * w
            w -= 0.1 * grad
            if it % 10 == 0:
                losses.append(-np.mean(y * np.log(p + 1e-12) + (1 - y) * np.log(1 - p + 1e-12)))
        return w, np.array(losses), np.mean((p > 0.5) == (y == 1))

    # a two-layer net in NumPy (CS231n's loop): ReLU by a mask write, softmax loss, SGD in place
    @case("script.two_layer_net")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(1)
        N, D, H, C = 32, 4, 16, 3
        _, Xn, yn = _data(dtype, n=N)
        X, y = to(Xn), to(yn)
        W1 = to((0.1 * rng.standard_normal((D, H))).astype(dtype))
        W2 = to((0.1 * rng.standard_normal((H, C))).astype(dtype))
        b1, b2 = np.zeros(H, dtype=dtype), np.zeros(C, dtype=dtype)
        reg, lr = 1e-3, 0.5
        for it in range(8):
            h = np.maximum(0, X @ W1 + b1)
            scores = h @ W2 + b2
            scores -= scores.max(axis=1, keepdims=True)
            e = np.exp(scores)
            probs = e / e.sum(axis=1, keepdims=True)
            loss = -np.log(probs[np.arange(N), y]).mean() + 0.5 * reg * (np.sum(W1 * W1) + np.sum(W2 * W2))
            ds = probs.copy()
            ds[np.arange(N), y] -= 1
            ds /= N
            dW2 = h.T @ ds + reg * W2
            db2 = ds.sum(axis=0)
            dh = ds @ W2.T
            dh[h <= 0] = 0
            dW1 = X.T @ dh + reg * W1
            db1 = dh.sum(axis=0)
            W1 += -lr * dW1
            b1 += -lr * db1
            W2 += -lr * dW2
            b2 += -lr * db2
        return W1, b1, W2, b2, loss

    # Mandelbrot: complex arrays, escape counts by masked writes
    @case("script.mandelbrot(complex,masks)")
    def _(np, to, dtype):
        h, w, maxit = 24, 32, 20
        x = np.linspace(-2.0, 0.8, w, dtype=dtype)
        y = np.linspace(-1.4, 1.4, h, dtype=dtype)
        c = x[None, :] + 1j * y[:, None]
        z = np.zeros_like(c)
        div = np.full(c.shape, maxit, dtype=int)
        for i in range(maxit):
            z = z ** 2 + c
            diverge = np.abs(z) > 2
            div[diverge & (div == maxit)] = i
            z[diverge] = 2
        return div, c.dtype.name

    # Mandelbrot on real arrays with np.where (no masks)
    @case("script.mandelbrot(real,where)")
    def _(np, to, dtype):
        x, y = np.meshgrid(np.linspace(-2.0, 0.8, 32, dtype=dtype), np.linspace(-1.4, 1.4, 24, dtype=dtype))
        zr, zi = np.zeros_like(x), np.zeros_like(x)
        n = np.zeros(x.shape, dtype=np.int32)
        for _ in range(20):
            zr, zi = np.where(zr * zr + zi * zi <= 4, zr * zr - zi * zi + x, zr), np.where(
                zr * zr + zi * zi <= 4, 2 * zr * zi + y, zi)
            n += (zr * zr + zi * zi <= 4)
        return n

    # Game of Life as numpy-100 writes it: neighbour sums from slices, writes through a view's mask
    @case("script.life(slices,view mask)")
    def _(np, to, dtype):
        Z = to((numpy.random.default_rng(4).random((16, 16)) < 0.3).astype(numpy.int64))
        for _ in range(6):
            N = (Z[0:-2, 0:-2] + Z[0:-2, 1:-1] + Z[0:-2, 2:] + Z[1:-1, 0:-2] + Z[1:-1, 2:]
                 + Z[2:, 0:-2] + Z[2:, 1:-1] + Z[2:, 2:])
            birth = (N == 3) & (Z[1:-1, 1:-1] == 0)
            survive = ((N == 2) | (N == 3)) & (Z[1:-1, 1:-1] == 1)
            Z[...] = 0
            Z[1:-1, 1:-1][birth | survive] = 1
        return Z

    # Game of Life with np.roll on a uint8 board
    @case("script.life(roll,uint8)")
    def _(np, to, dtype):
        Z = to((numpy.random.default_rng(5).random((12, 12)) < 0.35).astype(numpy.uint8))
        for _ in range(6):
            n = sum(np.roll(np.roll(Z, i, 0), j, 1) for i in (-1, 0, 1) for j in (-1, 0, 1) if i or j)
            Z = ((n == 3) | ((Z == 1) & (n == 2))).astype(np.uint8)
        return Z, n.dtype.name

    # Monte Carlo pi with default_rng (the draws are not NumPy's: statistics are compared)
    @case("script.monte_carlo_pi(default_rng)")
    def _(np, to, dtype):
        rng = np.random.default_rng(42)
        n = 200_000
        xy = rng.random((n, 2), dtype=dtype)
        pi = 4 * np.mean(np.sum(xy ** 2, axis=1) <= 1)
        dice = rng.integers(1, 7, size=n)
        g = rng.normal(2.0, 3.0, size=n)
        u = rng.uniform(-1, 1, size=(n,))
        return (abs(float(pi) - numpy.pi) < 0.02, xy.dtype.name, abs(float(dice.mean()) - 3.5) < 0.03,
                int(dice.min()), int(dice.max()), abs(float(g.mean()) - 2) < 0.05, abs(float(g.std()) - 3) < 0.05,
                abs(float(u.mean())) < 0.01, g.dtype.name, dice.dtype.name)

    # a shuffled train/test split and a bootstrap as users write them with default_rng
    @case("script.rng(permutation,choice)")
    def _(np, to, dtype):
        rng = np.random.default_rng(0)
        X = to(numpy.arange(40.0, dtype=dtype).reshape(20, 2))
        idx = rng.permutation(len(X))
        Xtr, Xte = X[idx[:15]], X[idx[15:]]
        boot = rng.choice(20, size=(50, 20), replace=True)
        means = X[boot, 0].mean(axis=1)
        return (np.sort(np.concatenate([Xtr[:, 0], Xte[:, 0]])), Xtr.shape, bool(np.all((means >= 0) & (means <= 38))))

    # image convolution with stride tricks (as_strided windows, then einsum / a sum)
    @case("script.conv2d(as_strided)")
    def _(np, to, dtype):
        from numpy.lib.stride_tricks import as_strided

        img = to(numpy.random.default_rng(6).random((10, 12)).astype(dtype))
        k = to(numpy.array([[0, 1, 0], [1, -4, 1], [0, 1, 0]], dtype=dtype))
        H, W = img.shape
        s0, s1 = img.strides
        win = as_strided(img, shape=(H - 2, W - 2, 3, 3), strides=(s0, s1, s0, s1))
        return np.einsum("ijkl,kl->ij", win, k), (win * k).sum(axis=(2, 3))

    # stride-trick windows of a uint8 image, max pooling
    @case("script.maxpool(uint8,reshape)")
    def _(np, to, dtype):
        img = to(numpy.random.default_rng(7).integers(0, 256, (8, 12), dtype=numpy.uint8))
        pooled = img.reshape(4, 2, 6, 2).max(axis=(1, 3))
        avg = img.reshape(4, 2, 6, 2).mean(axis=(1, 3))
        up = np.repeat(np.repeat(pooled, 2, axis=0), 2, axis=1)
        return pooled, avg, up, (img == up).sum()

    # einsum-heavy code
    @case("script.einsum")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(8)
        A = to(rng.normal(size=(4, 3, 5)).astype(dtype))
        B = to(rng.normal(size=(4, 5, 2)).astype(dtype))
        Cm = to(rng.normal(size=(4, 2, 3)).astype(dtype))
        M = to(rng.normal(size=(3, 3)).astype(dtype))
        v = to(rng.normal(size=3).astype(dtype))
        return (np.einsum("bij,bjk->bik", A, B), np.einsum("ii", M), np.einsum("ii->i", M),
                np.einsum("i,j->ij", v, v), np.einsum("i,ij,j->", v, M, v), np.einsum("ijk->kji", A),
                np.einsum("bij->j", A), np.einsum("bij,bjk,bkl->bil", A, B, Cm, optimize=True),
                np.einsum("...ij,...jk", A, B), np.einsum(A, [0, 1, 2], B, [0, 2, 3], [0, 1, 3]),
                np.einsum("bij,bij->b", A, A), np.einsum("ij,kj->ik", M, M, optimize="greedy"))

    @case("script.einsum_path")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(8)
        M = to(rng.normal(size=(3, 4)).astype(dtype))
        N = to(rng.normal(size=(4, 5)).astype(dtype))
        path, text = np.einsum_path("ij,jk,kl->il", M, N, N.T, optimize="greedy")
        return str(path)

    # np.linalg: the factorizations and solvers a user calls
    @case("script.linalg")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(9)
        An = rng.normal(size=(5, 5)).astype(dtype)
        A = to(An)
        S = A @ A.T + 5 * np.eye(5, dtype=dtype)
        b = to(rng.normal(size=5).astype(dtype))
        B = to(rng.normal(size=(5, 2)).astype(dtype))
        R = to(rng.normal(size=(8, 3)).astype(dtype))

        def signs(U):  # the largest entry of each column positive
            i = np.argmax(np.abs(U), axis=0)
            return U * np.sign(U[i, np.arange(U.shape[1])])

        x = np.linalg.solve(A, b)
        coef, res, rank, sv = np.linalg.lstsq(R, to(rng.normal(size=8).astype(dtype)), rcond=None)
        w, V = np.linalg.eigh(S)
        U, s, Vt = np.linalg.svd(R, full_matrices=False)
        Q, Rr = np.linalg.qr(R)
        L = np.linalg.cholesky(S)
        sign, logdet = np.linalg.slogdet(S)
        return {"solve": x, "solve2": np.linalg.solve(S, B), "lstsq": (coef, res, rank, sv), "eigh": (w, signs(V)),
                "svd": (signs(U), s, np.abs(Vt)), "qr": np.abs(Q) + 0 * Rr.sum(), "qr_r": np.abs(Rr), "chol": L,
                "inv": np.linalg.inv(A), "det": np.linalg.det(A), "slogdet": (sign, logdet),
                "pinv": np.linalg.pinv(R), "mpow": np.linalg.matrix_power(A, 3),
                "mpow_neg": np.linalg.matrix_power(S, -2),
                "norms": (np.linalg.norm(A), np.linalg.norm(A, 2), np.linalg.norm(A, "nuc"), np.linalg.norm(A, np.inf),
                          np.linalg.norm(A, axis=0), np.linalg.norm(b, 1)),
                "rank": np.linalg.matrix_rank(R), "cond": np.linalg.cond(S),
                "multi_dot": np.linalg.multi_dot([A, S, B]),
                "trace": np.trace(S), "eigvalsh": np.linalg.eigvalsh(S)}

    @case("script.linalg(eig,eigvals)")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(9)
        S = rng.normal(size=(4, 4)).astype(dtype)
        S = S + S.T  # real eigenvalues
        A = to(S)
        w = np.linalg.eigvals(A)
        return np.sort(w.real), np.linalg.eig(A)[0].real.shape

    @case("script.linalg(tensorsolve,batched)")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(10)
        A = to((rng.normal(size=(3, 4, 4)) + 4 * numpy.eye(4)).astype(dtype))
        b = to(rng.normal(size=(3, 4)).astype(dtype))
        return (np.linalg.solve(A, b[..., None])[..., 0], np.linalg.inv(A), np.linalg.det(A),
                np.linalg.tensorsolve(A[0], b[0]))

    # np.fft: a spectrum, a low-pass filter by masking, a circular convolution
    @case("script.fft(spectrum,filter)")
    def _(np, to, dtype):
        n = 64
        t = np.arange(n) / n
        noise = to(numpy.random.default_rng(11).normal(scale=0.2, size=n).astype(dtype))
        sig_ = (np.sin(2 * np.pi * 5 * t) + 0.5 * np.cos(2 * np.pi * 12 * t)).astype(dtype) + noise
        F = np.fft.fft(sig_)
        freqs = np.fft.fftfreq(n, d=1 / n)
        power = np.abs(F) ** 2
        peak = freqs[np.argmax(power[: n // 2])]
        G = F.copy()
        G[np.abs(freqs) > 8] = 0
        clean = np.fft.ifft(G).real
        R = np.fft.rfft(sig_)
        conv = np.fft.irfft(np.fft.rfft(sig_, 128) * np.fft.rfft(noise, 128), 128)[: 2 * n - 1]
        img = np.outer(sig_[:16], noise[:16])
        return (peak, clean, np.fft.irfft(R, n), conv, np.abs(np.fft.fftshift(np.fft.fft2(img))), R.dtype.name,
                np.fft.rfftfreq(n, 0.5))

    # sorting, ranks, unique, histograms, bins, cumulative sums
    @case("script.sort_unique_histogram")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(12)
        x = to(rng.normal(size=200).astype(dtype))
        ints = to(rng.integers(0, 10, 50))
        s = np.sort(x)
        order = np.argsort(x, kind="stable")
        ranks = np.empty_like(order)
        ranks[order] = np.arange(len(x))
        u, first, inv, cnt = np.unique(ints, return_index=True, return_inverse=True, return_counts=True)
        h, edges = np.histogram(x, bins=10, range=(-3, 3))
        dens = np.histogram(x, bins=edges, density=True)[0]
        return {"sort": s, "argsort": order, "ranks": ranks, "top5": x[np.argsort(x)[-5:][::-1]],
                "unique": (u, first, inv, cnt), "hist": (h, edges, dens),
                "bincount": (np.bincount(ints, minlength=12), np.bincount(ints, weights=x[:50])),
                "cumsum": (np.cumsum(x), np.cumsum(ints), np.maximum.accumulate(x)),
                "searchsorted": np.searchsorted(s, np.array([0.0, 1.0], dtype=dtype)),
                "median": (np.median(x), np.percentile(x, [5, 50, 95]))}

    @case("script.digitize,lexsort,partition")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(12)
        x = to(rng.normal(size=200).astype(dtype))
        ints = to(rng.integers(0, 10, 50))
        edges = np.linspace(-3, 3, 11)
        part = np.partition(x, 10)
        return {"digitize": (np.digitize(x, edges), np.digitize(x, edges, right=True)),
                "lexsort": np.lexsort((x[:50], ints)),
                "partition": (np.sort(part[:10]), part[10]), "argpartition": np.sort(x[np.argpartition(x, 10)[:10]]),
                "hist_auto": np.histogram(x, bins="auto")[0]}

    # masked assignment and in-place updates through views
    @case("script.masked_assignment")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(13)
        a = to(rng.uniform(size=(6, 8)).astype(dtype))
        a[a < 0.1] = 0
        a[a > 0.9] *= 0.5
        a[(a > 0.2) & (a < 0.4)] += 10
        col = a[:, 1]
        col[col > 0.5] = -1
        b = a.copy()
        np.putmask(b, b > 5, 5.0)
        c = np.zeros_like(a)
        np.copyto(c, a, where=a > 0.5)
        np.clip(a, 0.1, 0.9, out=a)
        X = to(numpy.where(rng.uniform(size=(6, 3)) < 0.2, numpy.nan, rng.normal(size=(6, 3))).astype(dtype))
        means = np.nanmean(X, axis=0)
        inds = np.where(np.isnan(X))
        X[inds] = np.take(means, inds[1])
        return a, b, c, X

    # fancy indexing with np.ix_, np.add.at, duplicate indices
    @case("script.ix_,add.at")
    def _(np, to, dtype):
        A = to(numpy.arange(30, dtype=dtype).reshape(5, 6))
        rows, cols = np.array([0, 2, 4]), np.array([1, 3])
        sub = A[np.ix_(rows, cols)]
        A[np.ix_(rows, cols)] = -1
        A[np.ix_([True, False, True, False, True], [1, 5])] += 5
        counts = np.zeros(5, dtype=dtype)
        np.add.at(counts, np.array([0, 1, 1, 3, 3, 3]), 1)
        B = A.copy()
        B[[0, 0, 1], [1, 1, 2]] += 1
        return sub, A, counts, B, A[[0, 1], :][:, [2, 3]], A[1:4][:, [0, 5]]

    # loops with scalar indexing and in-place updates
    @case("script.ar_loop,gauss_seidel")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(14)
        eps = to(rng.normal(size=30).astype(dtype))
        x = np.zeros(30, dtype=dtype)
        for t in range(1, 30):
            x[t] = 0.8 * x[t - 1] + eps[t]
        s = x[0]
        for v in x[1:10]:
            s = 0.9 * s + 0.1 * v
        u = np.zeros((6, 6), dtype=dtype)
        u[0, :] = 1.0
        for _ in range(3):
            for i in range(1, 5):
                for j in range(1, 5):
                    u[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
        return x, s, u

    # dtype promotion corners: uint8 images, int/float mixes, integer overflow, half results
    @case("script.dtype_corners")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(15)
        img = to(rng.integers(0, 256, (6, 8), dtype=numpy.uint8))
        i8 = to(numpy.array([-128, -1, 0, 1, 127], dtype=numpy.int8))
        i32 = to(numpy.arange(-3, 3, dtype=numpy.int32))
        f = to(rng.normal(size=6).astype(dtype))
        out = {
            "u8+100": img + 100, "u8-rev": img - img[::-1], "u8*2": img * 2, "u8/2": img / 2, "u8//3": img // 3,
            "u8/255f32": img.astype(np.float32) / 255, "u8*1.5 clip": (img * 1.5).clip(0, 255).astype(np.uint8),
            "u8 mean": img.mean(), "u8 sum": img.sum(), "u8 sum(axis)": img.sum(axis=0),
            "u8 max-min": img.max() - img.min(),
            "u8 >128": (img > 128).sum(), "u8 to i16": img.astype(np.int16) - 128, "u8 sqrt": np.sqrt(img),
            "u8 exp": np.exp(img[:1, :3] / 64), "i8 sin": np.sin(i8), "i8 abs": np.abs(i8), "i8*i8": i8 * i8,
            "-u8": -img[:1], "i32/2": i32 / 2, "i32//2.0": i32 // 2.0, "i32**2": i32 ** 2, "2**i32pos": 2 ** (i32 + 3),
            "2.0**i32": 2.0 ** i32, "i32 + f": i32 + f, "f32scalar*i32": np.float32(2.5) * i32,
            "i64+u64": to(numpy.arange(3)) + to(numpy.arange(3, dtype=numpy.uint64)),
            "bool+bool": (f > 0) + (f < 1), "True+i32": True + i32, "f*True": f * True,
            "i32%-2": i32 % -2, "-7//i32": -7 // (i32 + 4), "f16": (f.astype(np.float16) * 3).astype(np.float16),
            "f16+f32": f.astype(np.float16) + np.float32(1), "round": np.round(f * 10, 1), "rint": np.rint(f * 10),
            "floor_div_f": f // 0.3, "mod_f": f % 0.3, "mod_neg": f % -0.3, "astype i8": (f * 100).astype(np.int8),
            "int(f) trunc": (f * 3).astype(int), "u8 sum(dtype u8)": img.sum(dtype=np.uint8),
        }
        return out

    # np.errstate: silenced divisions, then cleaning the result
    @case("script.errstate")
    def _(np, to, dtype):
        import warnings

        a = to(numpy.array([1.0, 0.0, -1.0, 2.0], dtype=dtype))
        b = to(numpy.array([0.0, 0.0, 1.0, 4.0], dtype=dtype))
        with np.errstate(divide="ignore", invalid="ignore"):
            r = a / b
            lg = np.log(a)
        r[~np.isfinite(r)] = 0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with np.errstate(divide="warn", invalid="ignore"):
                q = a / b
                numpy.asarray(q)
        raised = False
        try:
            with np.errstate(divide="raise", invalid="ignore"):
                float((a / b).sum())
        except FloatingPointError:
            raised = True
        return r, lg, q, raised, len(caught)


def build():
    skl()
    sci()
    scripts()


# --- running: cases.py's runner, plus the lazy run's host reads ----------------------------------------


def _counting():
    """Count the lazy run's announced copies, implicit barriers and raw PJRT reads."""
    from lazycore.ir import events
    from lazycore.runtime import pjrt

    seen = {"transfers": 0, "implicit": 0, "raw": 0}

    def on_transfer(direction, *_):
        if direction == "device-to-host":
            seen["transfers"] += 1

    def on_implicit(*_):
        seen["implicit"] += 1

    raw = pjrt.to_host

    def to_host(buffer):
        seen["raw"] += 1
        return raw(buffer)

    pjrt.to_host = to_host
    events.listen("transfer", on_transfer)
    events.listen("implicit_barrier", on_implicit)
    return seen


def _lazy_only(fn, seen):
    """``fn`` whose lazy run's reads are recorded (the comparison's own reads are not)."""

    def run(xp, to, dtype):
        if xp is numpy:
            return fn(xp, to, dtype)
        import lazycore
        from lazycore.observe import metrics

        lazycore.mark_step(wait=True)
        for k in seen:
            seen[k] = 0
        r = fn(xp, to, dtype)
        seen["snapshot"] = {k: v for k, v in seen.items() if k != "snapshot"}
        seen["snapshot"]["host_copies"] = metrics.counters().get("host_reads", 0)  # (since run_case's reset)
        return r

    return run


def main(argv):
    import json
    import os

    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    import sklearn

    sklearn.set_config(array_api_dispatch=True)
    build()
    if argv == ["--list"]:
        print(json.dumps(list(cases.CASES)))
        return
    unknown = [n for n in argv if n not in cases.CASES]
    if unknown:
        raise SystemExit(f"unknown cases: {unknown}")
    seen = _counting()
    for name, (fn, slack) in list(cases.CASES.items()):
        cases.CASES[name] = (_lazy_only(fn, seen), slack)
    for name in argv or list(cases.CASES):
        for dtype in ("float32", "float64"):
            seen.pop("snapshot", None)
            out = cases.run_case(name, dtype)
            snap = seen.get("snapshot", {})
            out["reads"] = {"transfers": snap.get("transfers", 0), "implicit": snap.get("implicit", 0),
                            "host_copies": snap.get("host_copies", 0),
                            "unannounced": snap.get("raw", 0) - snap.get("transfers", 0)}
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
