"""The NumPy shim's demo runs unchanged on both imports and agrees; its benchmark runs (smoke)."""

import pathlib
import sys

import numpy

import lazycore
import lazycore.numpy as lnp
from lazycore.observe import metrics

ROOT = pathlib.Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import heat  # noqa: E402


def test_heat_equation_matches_numpy(clean_runtime):
    want, _ = heat.simulate(numpy, n=48, steps=12)
    got, _ = heat.simulate(lnp, n=48, steps=12, step_end=lazycore.mark_step, every=3)
    numpy.testing.assert_allclose(numpy.asarray(got), want, rtol=1e-6, atol=1e-7)
    c = metrics.counters()
    assert c["fallbacks"] == 0
    assert c["compiles"] <= 2 and c["cache_hits"] >= 2, c  # one program per 3 steps, reused


def test_benchmark_smoke():
    import numpy_heat

    assert numpy_heat.main(["--quick"]) == 0
