"""The rest of scikit-learn's Array API list (metrics, GaussianMixture, temperature
calibration, model selection, label binarizing, FeatureUnion, clustering scores),
SciPy's Array API functions in special, stats, fft, signal, cluster and ndimage, and
every array-api-extra function, on ``lazycore.numpy`` arrays against NumPy's: the cases
are in ``cases_wide.py`` (the protocol and the comparison are ``cases.py``'s, in one
child process). CI runs :data:`CI` (what issue 39's hunt found falling back: lazy masks,
0-d masks, ``bincount``, ``lstsq``, ``repeat`` by lazy counts, ``nonzero``); ``LAZYCORE_TEST_FULL=1`` runs all
(about 180 cases, some minutes).
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from _bits import FULL  # (tests/ is on the path)

HERE = pathlib.Path(__file__).resolve().parent

# each with the fallbacks it recorded before this test (and lazycore.numpy's fixes) came
CI = {"f1_score(None)": {"numpy.bincount", "ndarray.__getitem__"}, "confusion_matrix(normalize)": set(),
      "davies_bouldin_score": {"ndarray.__getitem__", "numpy.nonzero"},
      "xpx.tril,triu_indices": {"numpy.nonzero"},
      "GaussianMixture(diag)": set(), "signal.savgol_filter": {"numpy.linalg.lstsq"},
      "stats.mannwhitneyu": {"numpy.repeat"}, "xpx.setdiff1d(float)": {"ndarray.__getitem__"},
      "xpx.searchsorted": set(), "xpx.at.min(mask)": {"ndarray.__getitem__", "ndarray.__setitem__"},
      "xpx.isclose(0-d)": {"ndarray.__getitem__", "ndarray.__setitem__"}}

for _m in ("sklearn", "scipy", "array_api_extra"):
    pytest.importorskip(_m)


def _child(*args, timeout):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, str(HERE / "cases_wide.py"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=HERE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


NAMES = json.loads(_child("--list", timeout=300).strip().splitlines()[-1]) if FULL else list(CI)


@pytest.fixture(scope="module")
def results():
    out = _child(*NAMES, timeout=3600 if FULL else 900)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {(r["case"], r["dtype"]): r for r in rows}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_wider_consumer_matches_numpy(results, name, dtype):
    r = results[(name, dtype)]
    assert r["status"] == "ok", json.dumps(r, indent=1)
    assert r["noise"] == {}, r["fallbacks"]


@pytest.mark.parametrize("name", [n for n in CI if CI[n]])
def test_what_fell_back_is_lazy(results, name):
    assert not CI[name] & set(results[(name, "float64")]["fallbacks"]), results[(name, "float64")]["fallbacks"]
