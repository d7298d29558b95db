"""The learned scalar policy (lazycore.trace.scalar_policy): a number that took two
values at one place of the step's graph is a program parameter from then on."""

import io

import numpy
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.observe import debug, metrics

pytestmark = pytest.mark.usefixtures("clean_runtime")


def _scaled(x, k):
    s = lc.scalar(k, "f32")
    return lc.apply("mul", x, lc.apply("broadcast_in_dim", s, dims=(), shape=x.shape))


def test_core_loop_over_k_compiles_twice_and_folds_until_it_changes():
    x = lc.from_numpy(numpy.arange(6, dtype=numpy.float32))
    for k in range(5):
        y = _scaled(x, k)
        if k == 0:
            assert y.value.node.operands[1][0].operands[0][0].op == "constant"  # a fresh place folds
        numpy.testing.assert_array_equal(lc.to_numpy(y), numpy.arange(6, dtype=numpy.float32) * k)
    # 0 baked, then 1 at the same place: a parameter from then on (today's rule compiled 0, 1, rest)
    assert metrics.counters()["compiles"] == 2


def test_a_number_that_never_changes_stays_baked():
    x = lc.from_numpy(numpy.ones(3, numpy.float32))
    for _ in range(3):
        y = _scaled(x, 1.0)
        assert y.value.node.operands[1][0].operands[0][0].op == "constant"
        lc.to_numpy(y)
    assert metrics.counters()["compiles"] == 1


def test_numpy_loop_over_k():
    a = lnp.arange(6.0)
    lc.mark_step(wait=True)
    c0 = metrics.counters()["compiles"]
    for k in range(5):
        numpy.testing.assert_array_equal(numpy.asarray(a * k), numpy.arange(6.0) * k)
        numpy.testing.assert_array_equal(numpy.asarray(a ** k), numpy.arange(6.0) ** k)
    # a * k: 0 then a parameter; a ** k: the same (2 + 2)
    assert metrics.counters()["compiles"] - c0 == 4


def test_the_debug_log_names_the_promoted_place(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(debug, "stream", out)
    x = lc.from_numpy(numpy.ones(3, numpy.float32))
    with lc.config.override(debug=1):
        for k in (0.0, 1.0, 2.0):
            lc.to_numpy(_scaled(x, k))
    lines = [ln for ln in out.getvalue().splitlines() if "a program parameter from now on" in ln]
    assert len(lines) == 1, out.getvalue()
    assert f"{__file__}:" in lines[0] and "took 0.0 then 1.0" in lines[0]


def _after(x, first, k):
    """One line making two graphs: a number at the same step-log position
    after a different op (generate()'s prompt and decoding steps through one
    attention call)."""
    y = lc.apply("neg", x) if first else lc.apply("abs", x)
    return lc.apply("mul", y, lc.apply("broadcast_in_dim", lc.scalar(k, "f32"), dims=(), shape=x.shape))


def test_two_graphs_of_one_line_keep_their_places():
    x = lc.from_numpy(numpy.arange(-3.0, 3.0, dtype=numpy.float32))
    lc.mark_step(wait=True)
    compiles = []
    for first, k in ((True, 0.5), (False, 0.0), (True, 0.5), (False, 0.0)):
        y = _after(x, first, k)
        assert (y.value.node.operands[1][0].operands[0][0].op == "constant") == (k == 0.0)
        want = (-numpy.arange(-3.0, 3.0) if first else numpy.abs(numpy.arange(-3.0, 3.0))) * k
        numpy.testing.assert_array_equal(lc.to_numpy(y), want.astype(numpy.float32))
        compiles.append(metrics.counters()["compiles"])
    # each graph compiled once: the 0.0 after abs never met the 0.5 after neg
    assert compiles[1:] == [compiles[0] + 1] * 3, compiles
