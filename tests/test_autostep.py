"""Automatic step barriers (lazycore.runtime.autostep) for any frontend: a loop
without mark_step is cut where its graph starts repeating the previous
step's, a stack of layers is not, and a graph past the size bound is cut
and reported at the user's line."""

import io
import warnings

import numpy
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir.config import override
from lazycore.observe import debug, metrics
from lazycore.ir.context import TRACE

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter")

STEPS = 10


def _data(np):
    rng = numpy.random.default_rng(0)
    X = np.asarray(rng.standard_normal((64, 8)).astype(numpy.float32))
    y = np.asarray(rng.standard_normal(64).astype(numpy.float32))
    w = np.asarray(numpy.zeros(8, numpy.float32))
    b = np.asarray(numpy.zeros(1, numpy.float32))
    return X, y, w, b


def gradient_descent(np, steps, mark=lambda i: False, per_step=None):
    """Linear regression by gradient descent, updating w and b in place;
    ``mark(i)``: whether step ``i`` ends with ``mark_step()``."""
    X, y, w, b = _data(np)
    if np is lnp:
        lc.mark_step(wait=True)
    for i in range(steps):
        e0 = metrics.counters()["executions"]
        err = X @ w + b - y
        w -= 0.1 * (X.T @ err / 64)
        b -= 0.1 * err.mean()
        if mark(i):
            lc.mark_step()
        if per_step is not None:
            per_step.append(metrics.counters()["executions"] - e0)
    return numpy.asarray(w), numpy.asarray(b)


def test_gradient_descent_without_barriers_runs_one_program_per_step():
    ref = gradient_descent(numpy, STEPS)
    hand = []
    got_hand = gradient_descent(lnp, STEPS, mark=lambda i: True, per_step=hand)
    compiles_hand = metrics.counters()["compiles"]
    assert hand == [1] * STEPS and compiles_hand == 1
    TRACE.cutter.reset()  # (the hand-placed loop's marks taught it nothing; start clean all the same)
    auto = []
    got = gradient_descent(lnp, STEPS, per_step=auto)
    # the first steps share a program until the repetition is seen; then one program a step,
    # the very program the hand-placed loop compiled (no compile after the first cut)
    first = auto.index(1)
    assert 1 <= first <= 4, auto
    assert auto[first:] == [1] * (STEPS - first), auto
    assert metrics.counters()["compiles"] == compiles_hand + 1
    for a, b, c in zip(got, got_hand, ref):
        numpy.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)
        numpy.testing.assert_allclose(b, c, rtol=1e-5, atol=1e-6)


def test_learned_step_end_is_kept_from_then_on():
    """Reading a value in between (a logged loss) does not make it learn again."""
    X, y, w, b = _data(lnp)
    lc.mark_step(wait=True)

    def step(w, b):
        err = X @ w + b - y
        w -= 0.1 * (X.T @ err / 64)
        b -= 0.1 * err.mean()
        return err

    for _ in range(6):
        step(w, b)
    numpy.asarray(w)
    c0 = dict(metrics.counters())
    per = []
    for _ in range(4):
        e0 = metrics.counters()["executions"]
        step(w, b)
        per.append(metrics.counters()["executions"] - e0)
    # a step's program starts when the next step records its first op (its
    # temporaries are dead by then), the last one at the barrier after the loop
    assert per == [0, 1, 1, 1]
    lc.mark_step()
    assert metrics.counters()["executions"] - c0["executions"] == 4
    assert metrics.counters()["compiles"] == c0["compiles"]


def test_off_switch_keeps_one_graph():
    with override(auto_barrier=False):
        per = []
        got = gradient_descent(lnp, 6, per_step=per)
    assert per == [0] * 6  # nothing ran until the read
    ref = gradient_descent(numpy, 6)
    numpy.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)


def test_explicit_marks_every_few_steps_are_respected():
    """A program that marks every 4th step itself fuses 4 steps per program once it has marked."""
    runs = []
    gradient_descent(lnp, 16, mark=lambda i: i % 4 == 3, per_step=runs)
    assert TRACE.cutter.off  # its marks enclosed the same number of learned steps twice
    assert runs[-4:] == [0, 0, 0, 1]


def test_an_occasional_mark_step_changes_nothing():
    """A mark_step before an evaluation: the learned step end stays."""
    runs = []
    gradient_descent(lnp, 30, mark=lambda i: i in (9, 19), per_step=runs)
    assert not TRACE.cutter.off
    assert runs[-5:] == [1] * 5


def _layers(np, n_layers, width=16):
    rng = numpy.random.default_rng(1)
    return [np.asarray((rng.standard_normal((width, width)) / width).astype(numpy.float32)) for _ in range(n_layers)]


def test_layer_loop_with_inplace_buffer_is_not_cut_per_layer():
    """Each layer updates one device buffer in place: the op stream repeats per
    layer, but every layer reads other weights, so no layer is taken for a step."""
    def forward(np, steps):
        Ws = _layers(np, 6)
        h = np.asarray(numpy.ones((4, 16), numpy.float32))
        if np is lnp:
            lc.mark_step(wait=True)
        for _ in range(steps):
            for W in Ws:
                h[...] = np.tanh(h @ W)
        return h

    h = forward(lnp, 3)
    assert metrics.counters()["executions"] == 0  # one graph, not a program per layer
    numpy.testing.assert_allclose(numpy.asarray(h), forward(numpy, 3), rtol=1e-5, atol=1e-6)
    assert metrics.counters()["executions"] == 1


def test_training_step_with_a_layer_loop_is_cut_per_step():
    """A step whose forward loops over layers through an in-place buffer, then
    updates every layer's weights: one program per step, not per layer."""
    def train(np, steps, per=None):
        Ws = _layers(np, 4)
        x = np.asarray(numpy.linspace(-1, 1, 64, dtype=numpy.float32).reshape(4, 16))
        h = np.asarray(numpy.zeros((4, 16), numpy.float32))
        if np is lnp:
            lc.mark_step(wait=True)
        for _ in range(steps):
            e0 = metrics.counters()["executions"]
            h[...] = x
            for W in Ws:
                h[...] = np.tanh(h @ W)
            for W in Ws:  # a made-up update that reads the output, as a gradient would
                W -= 0.01 * (h.T @ h)
            if per is not None:
                per.append(metrics.counters()["executions"] - e0)
        return [numpy.asarray(W) for W in Ws]

    per = []
    got = train(lnp, 10, per)
    assert set(per[5:]) == {1}, per
    for a, b in zip(got, train(numpy, 10)):
        numpy.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_a_loop_of_a_few_inplace_ops_is_no_step():
    """``x += b`` a hundred times repeats one node: a loop body, not a training
    step, so it stays one graph (it ran 98 programs of one node each)."""
    x = lnp.asarray(numpy.zeros(16, numpy.float32))
    b = lnp.asarray(numpy.ones(16, numpy.float32))
    lc.mark_step(wait=True)
    c0 = metrics.counters()["executions"]
    h0 = metrics.counters()["host_reads"]
    for _ in range(100):
        x += b
    assert metrics.counters()["executions"] == c0
    numpy.testing.assert_array_equal(numpy.asarray(x), numpy.full(16, 100.0, numpy.float32))
    # the read is one graph: one program, or answered from the uploads' host copies (runtime/hostreads.py)
    assert metrics.counters()["executions"] - c0 + metrics.counters()["host_reads"] - h0 == 1


def test_bound_cuts_and_reports_the_line_once(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(debug, "stream", out)
    a = lnp.asarray(numpy.ones(4, numpy.float32))
    lc.mark_step(wait=True)
    with override(auto_barrier_nodes=50, debug=1), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(60):
            a = a * 1.5 + 0.25  # the line reported
    ran = metrics.counters()["executions"]
    assert ran >= 2  # cut at the bound, more than once
    mine = [w for w in caught if "without a barrier" in str(w.message)]
    assert len(mine) == 1 and mine[0].filename == __file__
    assert "the graph reached" in out.getvalue() and __file__ in out.getvalue()
    ref = numpy.ones(4, numpy.float32)
    for _ in range(60):
        ref = ref * numpy.float32(1.5) + numpy.float32(0.25)
    numpy.testing.assert_allclose(numpy.asarray(a), ref, rtol=1e-5)


def test_bound_setting_is_checked():
    with pytest.raises(ValueError, match="auto_barrier_nodes"):
        lc.config.configure(auto_barrier_nodes=200_000)


def test_the_debug_log_says_where_a_learned_step_ends(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(debug, "stream", out)
    with override(debug=1):
        gradient_descent(lnp, 6)
    learned = [ln for ln in out.getvalue().splitlines() if "automatic barrier: a step of" in ln]
    assert len(learned) == 1 and f"{__file__}:" in learned[0], out.getvalue()
