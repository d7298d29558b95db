"""scikit-learn options nobody here ran, on ``lazycore.numpy`` arrays against NumPy's run
(issue 39, hunt 33): the cases in ``cases_hunt33_numpy.py`` (``cases.py``'s protocol and
comparison, in one child process: scikit-learn's dispatch is process-wide). Each fits
through SciPy's L-BFGS (a program per evaluation): about two minutes at load 15, so they
run with ``LAZYCORE_TEST_FULL=1`` only.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from _bits import FULL  # (tests/ is on the path)

HERE = pathlib.Path(__file__).resolve().parent


def _child(*args, timeout):
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = subprocess.run([sys.executable, str(HERE / "cases_hunt33_numpy.py"), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=HERE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


NAMES = json.loads(_child("--list", timeout=300).strip().splitlines()[-1]) if FULL else []


@pytest.fixture(scope="module")
def results():
    pytest.importorskip("sklearn")
    out = _child(*NAMES, timeout=1800)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {(r["case"], r["dtype"]): r for r in rows}


@pytest.mark.skipif(not FULL, reason="scikit-learn fits: LAZYCORE_TEST_FULL=1")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_case_matches_numpy(results, name, dtype):
    r = results[(name, dtype)]
    assert r["status"] == "ok", json.dumps(r, indent=1)
    assert r["noise"] == {}, r["fallbacks"]
    assert not r["fallbacks"], r["fallbacks"]
