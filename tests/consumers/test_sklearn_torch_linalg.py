"""scikit-learn under ``array_api_dispatch`` on lazy **torch** arrays, the
estimators and metrics that reached eager's kernels through ``torch.linalg.eigh``
with eigenvectors (PCA's ``covariance_eigh`` solver, RidgeCV's eigen GCV: one
counted fallback a fit) and ``torch.bincount`` (``f1_score``: 3 a call), against
the same calls on eager CPU tensors: the same values and no fallback.

``LinearDiscriminantAnalysis`` is compared through ``coef_`` and ``predict``
only: its ``scalings_`` and ``transform`` come from the singular vectors of a
wide matrix, whose signs are LAPACK's implementation's (jaxlib's gesdd against
torch's MKL, which differ for wide matrices with n >= 11/6 m and for tall ones
with m < 11/6 n; frontends/torch/ops/decompositions.py, ``_eigh``).

scikit-learn's dispatch is process-wide and SciPy reads ``SCIPY_ARRAY_API`` at
import, so the cases run in one child process (``python
test_sklearn_torch_linalg.py``), with ``LAZYCORE_TEST_FULL=1`` only (about a
minute: a few programs of several seconds' compile each).
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve()

sys.path.insert(0, str(HERE.parents[1]))  # (also run as a script)
from _bits import FULL  # noqa: E402


def _cases():
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import RidgeCV
    from sklearn.metrics import f1_score

    def pca(solver):
        return lambda X, y, t: (lambda p: (p.components_, p.explained_variance_, p.transform(X)))(
            PCA(3, svd_solver=solver).fit(X))

    def ridge(rows, mode):
        return lambda X, y, t: (lambda r: (r.coef_, r.intercept_))(
            RidgeCV(alphas=(0.1, 1.0, 10.0), gcv_mode=mode).fit(X[:rows], t[:rows]))

    return {
        "PCA(covariance_eigh)": pca("covariance_eigh"),
        "PCA(full)": pca("full"),
        "RidgeCV(eigen, tall)": ridge(40, "eigen"),
        "RidgeCV(eigen, wide)": ridge(5, "eigen"),
        "RidgeCV(auto)": ridge(40, None),
        "LinearDiscriminantAnalysis": lambda X, y, t: (lambda m: (m.coef_, m.predict(X)))(
            LinearDiscriminantAnalysis().fit(X, y)),
        "f1_score(macro)": lambda X, y, t: (f1_score(y, (y + (X[:, 0] > 1).long()) % 3, average="macro"),),
        "f1_score(None)": lambda X, y, t: (f1_score(y, (y + (X[:, 1] > 0.5).long()) % 3, average=None),),
    }


def main():
    import sklearn
    import torch

    import lazycore.torch as ltorch
    from lazycore.observe import metrics

    sklearn.set_config(array_api_dispatch=True)
    dev = ltorch.device()
    g = torch.Generator().manual_seed(0)
    X = torch.randn(40, 6, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (40,), generator=g)
    t = X @ torch.randn(6, dtype=torch.float64, generator=g)
    for name, fn in _cases().items():
        want = fn(X, y, t)
        metrics.reset()
        got = fn(X.to(dev), y.to(dev), t.to(dev))
        diff = max((torch.as_tensor(a).cpu().double() - torch.as_tensor(b).double()).abs().max().item()
                   for a, b in zip(got, want))
        print(json.dumps({"case": name, "diff": diff, "fallbacks": metrics.fallbacks()}), flush=True)


@pytest.fixture(scope="module")
def results():
    for m in ("sklearn", "scipy"):
        pytest.importorskip(m)
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, str(HERE)], capture_output=True, text=True, timeout=1800, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["case"]: r for r in rows}


@pytest.mark.skipif(not FULL, reason="LAZYCORE_TEST_FULL=1 runs scikit-learn on lazy torch arrays")
@pytest.mark.parametrize("name", ["PCA(covariance_eigh)", "PCA(full)", "RidgeCV(eigen, tall)", "RidgeCV(eigen, wide)",
                                  "RidgeCV(auto)", "LinearDiscriminantAnalysis", "f1_score(macro)",
                                  "f1_score(None)"])
def test_sklearn_on_lazy_torch_as_eager_without_fallback(results, name):
    r = results[name]
    assert r["diff"] < 1e-12, r
    assert r["fallbacks"] == {}, r


if __name__ == "__main__":
    main()
