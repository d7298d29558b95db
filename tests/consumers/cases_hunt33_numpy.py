"""Cases for test_hunt33_numpy.py (issue 39's hunt, session 33, NumPy side): scikit-learn
1.9 estimators under ``array_api_dispatch`` with options the earlier hunts (``cases.py``,
``cases_wide.py``, ``cases_hunt26.py``, ``cases_hunt27_numpy.py``, ``cases_hunt31n.py``) did
not run: LogisticRegression with ``class_weight`` ("balanced" and a dict) and without a
penalty (``C=inf``), and ``CalibratedClassifierCV``'s temperature scaling over a
LogisticRegression (``cases_wide.py`` calibrates an LDA).

scikit-learn 1.9's other GLMs (``TweedieRegressor``, ``GammaRegressor``) do not declare
Array API support (only ``PoissonRegressor`` has an Array API loss): on any non-NumPy
array their Cython loss raises ``TypeError: Function call with ambiguous argument
types``, torch's arrays too, so they are not cases here.

Same protocol as ``cases.py`` (its runner and comparison, one JSON line a case and dtype):
``python cases_hunt33_numpy.py NAME...``, ``--list`` for the names.
"""

import sys

import numpy

import cases
from cases import _data, _estimator, case


def skl():
    from sklearn import linear_model as lm
    from sklearn.calibration import CalibratedClassifierCV

    # L-BFGS stops where the gradient's norm drops under its tolerance (cases.py's slack)
    _estimator(lambda: lm.LogisticRegression(class_weight="balanced", tol=1e-10, max_iter=1000),
               ["coef_", "intercept_"], ["predict_proba"], slack=1e4, name="LogisticRegression(balanced)")
    _estimator(lambda: lm.LogisticRegression(class_weight={0: 2.0, 1: 1.0, 2: 0.5}, tol=1e-10, max_iter=1000),
               ["coef_", "intercept_"], ["decision_function"], slack=1e4, name="LogisticRegression(class_weight)")
    _estimator(lambda: lm.LogisticRegression(C=numpy.inf, tol=1e-10, max_iter=1000), ["coef_", "intercept_"],
               ["predict_proba"], slack=1e4, name="LogisticRegression(C=inf)")

    @case("CalibratedClassifierCV(LogisticRegression,temperature)", slack=1e4)
    def _(xp, to, dtype):
        _, X, labels = _data(dtype)
        cal = CalibratedClassifierCV(lm.LogisticRegression(tol=1e-10, max_iter=1000), method="temperature", cv=3)
        return cal.fit(to(X), to(labels)).predict_proba(to(X))


def build():
    skl()


if __name__ == "__main__":
    cases.build = build
    cases.main(sys.argv[1:])
