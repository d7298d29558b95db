"""Two nodes' attributes are equal as the digest reads them (ir.graph.attrs_equal,
the answer of attrs_key without building the keys), and the automatic step
cutter compares a period's nodes so: a NaN attribute (np.nanmax's NaN constant,
made every step) no longer keeps a loop from being cut, as the digest gives those nodes one
program; -0.0 and 0.0 differ, as they do there."""

import numpy
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir.graph import attrs_equal, attrs_key
from lazycore.observe import metrics

NAN = float("nan")
CASES = [
    ({}, {}),
    ({"a": 1}, {"a": 1}),
    ({"a": 1}, {"a": 2}),
    ({"a": 1}, {"b": 1}),
    ({"a": 1}, {"a": 1, "b": 2}),
    ({"a": 1, "b": "x"}, {"b": "x", "a": 1}),  # order aside
    ({"a": 1}, {"a": True}),
    ({"a": 1}, {"a": 1.0}),
    ({"a": NAN}, {"a": float("nan")}),
    ({"a": 0.0}, {"a": -0.0}),
    ({"a": 0.5}, {"a": 0.5}),
    ({"a": (1, 2)}, {"a": (1, 2)}),
    ({"a": (1, 2)}, {"a": (1, 3)}),
    ({"a": (NAN, 1.0)}, {"a": (float("nan"), 1.0)}),
    ({"a": numpy.array([1.0, NAN])}, {"a": numpy.array([1.0, NAN])}),
    ({"a": numpy.array([1.0, 2.0])}, {"a": numpy.array([1.0, 3.0])}),
    ({"a": numpy.array([0.0])}, {"a": numpy.array([-0.0])}),
    ({"a": numpy.array([1, 2], numpy.int32)}, {"a": numpy.array([1, 2], numpy.int64)}),
    ({"a": numpy.array([1, 2])}, {"a": numpy.array([[1, 2]])}),
    ({"a": numpy.array(NAN)}, {"a": NAN}),
    ({"a": numpy.float32(1.0)}, {"a": 1.0}),
]


@pytest.mark.parametrize("a, b", CASES)
def test_attrs_equal_is_attrs_key_equality(a, b):
    assert attrs_equal(a, b) == (attrs_key(a) == attrs_key(b))
    assert attrs_equal(b, a) == attrs_equal(a, b)


def test_nan_is_nan_and_signed_zeros_differ():
    assert attrs_equal({"value": numpy.array(NAN)}, {"value": numpy.array(NAN)})
    assert attrs_equal({"x": NAN}, {"x": float("nan")})
    assert not attrs_equal({"x": 0.0}, {"x": -0.0})


@pytest.mark.usefixtures("clean_runtime", "fresh_cutter")
def test_a_step_making_a_nan_constant_is_cut_per_step():
    """np.nanmax records a NaN constant every step (its reduction's start):
    the step cutter compared it with NaN != NaN and never learned the step
    (one graph for all ten steps, run at the read); now one program a step."""
    rng = numpy.random.default_rng(0)
    Xh = rng.standard_normal((64, 8)).astype(numpy.float32)
    yh = rng.standard_normal(64).astype(numpy.float32)
    X, y, w = lnp.asarray(Xh), lnp.asarray(yh), lnp.asarray(numpy.zeros(8, numpy.float32))
    lc.mark_step(wait=True)
    per_step, wh = [], numpy.zeros(8, numpy.float32)
    for _ in range(10):
        e0 = metrics.counters()["executions"]
        e = X @ w - y
        err = e - lnp.nanmax(e)
        w -= 0.1 * (X.T @ err / 64)
        per_step.append(metrics.counters()["executions"] - e0)
        eh = Xh @ wh - yh
        wh -= 0.1 * (Xh.T @ (eh - numpy.nanmax(eh)) / 64)
    first = per_step.index(1) if 1 in per_step else None
    assert first is not None and 1 <= first <= 4, per_step
    assert per_step[first:] == [1] * (10 - first), per_step
    numpy.testing.assert_allclose(numpy.asarray(w), wh, rtol=1e-5, atol=1e-6)
