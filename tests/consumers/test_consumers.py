"""scikit-learn, SciPy, array-api-extra and einops on ``lazycore.numpy`` arrays give what
they give on NumPy's, and no dtype question, constant or sorted unique is a fallback.

The cases are in ``cases.py`` (run there in one child process: SciPy reads
``SCIPY_ARRAY_API`` when imported, scikit-learn's dispatch is process-wide). CI runs
:data:`CI`, one or two of each kind (three of the four scikit-learn calls issue 39
found wrong among them); ``LAZYCORE_TEST_FULL=1`` runs every case (about a hundred, some minutes).
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from _bits import FULL  # (tests/ is on the path)

HERE = pathlib.Path(__file__).resolve().parent

CI = ["LinearDiscriminantAnalysis", "RidgeClassifier", "LabelEncoder", "log_loss",
      "stats.pearsonr", "fft.fftfreq", "xpx.setdiff1d", "xpx.union1d", "einops.rearrange",
      "roc_auc_score(sample_weight)", "stats.cramervonmises_2samp"]

pytest.importorskip("sklearn")
pytest.importorskip("scipy")
pytest.importorskip("array_api_extra")
pytest.importorskip("einops")


def _child(*args, timeout):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, str(HERE / "cases.py"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=HERE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _names():
    if not FULL:
        return CI
    return json.loads(_child("--list", timeout=300).strip().splitlines()[-1])


NAMES = _names()


@pytest.fixture(scope="module")
def results():
    out = _child(*NAMES, timeout=3600 if FULL else 600)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {(r["case"], r["dtype"]): r for r in rows}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_consumer_matches_numpy_without_noise_fallbacks(results, name, dtype):
    r = results[(name, dtype)]
    assert r["status"] == "ok", json.dumps(r, indent=1)
    assert r["noise"] == {}, r["fallbacks"]
