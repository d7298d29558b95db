"""Automatic step barriers over several loops (lazycore.runtime.autostep): a cut
learned on one loop is that loop's. A generator's state, which every draw
advances, tells no step; a learned rule stops at the first update made at
another line (or a step far shorter than the learned one), and the next loop
learns its own; a long loop is still cut."""

import numpy
import pytest

import lazycore as lc
import lazycore.numpy as lnp
from lazycore.ir.config import override
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter")


def _estimates_then_walk(steps, ran):
    """A Monte Carlo program: estimates drawn in a comprehension, then a random walk
    (tests/consumers/test_numpy_programs.py's, smaller). ``ran``: the programs run
    during each loop."""
    rng = lnp.random.default_rng(0)
    e0 = metrics.counters()["executions"]
    est = [4 * lnp.mean((rng.random((500, 2)) ** 2).sum(axis=1) < 1) for _ in range(4)]
    e1 = metrics.counters()["executions"]
    walk = lnp.zeros(200)
    for _ in range(steps):
        walk += rng.standard_normal(200)
    ran.append((e1 - e0, metrics.counters()["executions"] - e1))
    return numpy.asarray(lnp.array(est)), numpy.asarray(walk)


def test_a_walk_after_estimates_is_not_cut_at_every_draw():
    """The estimates' generator updates taught a step of one draw, which then cut the
    walk at every draw: two programs an iteration. Nothing in either loop is a step."""
    ran = []
    est, walk = _estimates_then_walk(12, ran)
    assert ran == [(0, 0)], ran  # (before: 1 and 24 programs)
    with override(auto_barrier=False):
        est_off, walk_off = _estimates_then_walk(12, ran)
    # the same numbers as the program with no automatic barriers at all
    numpy.testing.assert_array_equal(est, est_off)
    numpy.testing.assert_array_equal(walk, walk_off)
    assert metrics.counters()["compiles"] == 1  # one graph, the same one both times


def _data():
    rng = numpy.random.default_rng(0)
    X = rng.standard_normal((64, 8)).astype(numpy.float32)
    y = rng.standard_normal(64).astype(numpy.float32)
    return X, y


def _descend(np, X, y, w, b, steps, per=None):
    for _ in range(steps):
        e0 = metrics.counters()["executions"]
        err = X @ w + b - y
        w -= 0.1 * (X.T @ err / 64)
        b -= 0.1 * err.mean()
        if per is not None:
            per.append(metrics.counters()["executions"] - e0)


def _momentum(np, X, y, w, b, vw, steps, per=None):
    for _ in range(steps):
        e0 = metrics.counters()["executions"]
        err = np.tanh(X @ w + b) - y
        g = X.T @ (err * (1 - np.tanh(X @ w + b) ** 2)) / 64
        vw *= 0.9
        vw += g
        w -= 0.05 * vw
        b -= 0.05 * err.mean()
        if per is not None:
            per.append(metrics.counters()["executions"] - e0)


def _start(np):
    X, y = _data()
    return (np.asarray(X), np.asarray(y), np.asarray(numpy.zeros(8, numpy.float32)),
            np.asarray(numpy.zeros(1, numpy.float32)))


def test_a_short_loop_after_a_learned_one_is_not_cut_at_every_update():
    """A decay loop after gradient descent updates the same arrays: the descent's step
    end (after ``b``'s update) does not cut it at each of its updates."""
    X, y, w, b = _start(lnp)
    lc.mark_step(wait=True)
    per = []
    _descend(lnp, X, y, w, b, 8, per)
    assert per[-3:] == [1, 1, 1]  # learned: one program a step
    e0 = metrics.counters()["executions"]
    for _ in range(40):
        w *= 0.99
        b *= 0.99
    assert metrics.counters()["executions"] - e0 <= 1  # (before: 39, one program per iteration)
    Xn, yn, wn, bn = _start(numpy)
    _descend(numpy, Xn, yn, wn, bn, 8)
    for _ in range(40):
        wn *= numpy.float32(0.99)
        bn *= numpy.float32(0.99)
    numpy.testing.assert_allclose(numpy.asarray(w), wn, rtol=1e-5, atol=1e-7)
    numpy.testing.assert_allclose(numpy.asarray(b), bn, rtol=1e-5, atol=1e-7)


def test_the_next_training_loop_learns_its_own_step():
    """Gradient descent, then a momentum loop over the same weights: the second loop
    is learned anew within a few steps, then runs one program a step."""
    X, y, w, b = _start(lnp)
    vw = lnp.asarray(numpy.zeros(8, numpy.float32))
    lc.mark_step(wait=True)
    first, second = [], []
    _descend(lnp, X, y, w, b, 6, first)
    c0 = metrics.counters()["compiles"]
    _momentum(lnp, X, y, w, b, vw, 10, second)
    assert first[-2:] == [1, 1]
    # its first op runs the descent's last step; a few steps share a program while it learns
    start = second.index(1, 1)
    assert second[0] == 1 and start <= 4 and second[start:] == [1] * (10 - start), second
    # the descent's last step, the learning steps' program, its step's program
    assert metrics.counters()["compiles"] - c0 <= 3
    Xn, yn, wn, bn = _start(numpy)
    vn = numpy.zeros(8, numpy.float32)
    _descend(numpy, Xn, yn, wn, bn, 6)
    _momentum(numpy, Xn, yn, wn, bn, vn, 10)
    numpy.testing.assert_allclose(numpy.asarray(w), wn, rtol=1e-4, atol=1e-6)
    numpy.testing.assert_allclose(numpy.asarray(b), bn, rtol=1e-4, atol=1e-6)


def test_a_long_walk_is_still_cut():
    """A walk longer than the graph bound is cut at the bound, and then at its own
    steps (its array now device data): its graphs stay bounded, with the same numbers."""
    def walk_of(steps):
        rng = lnp.random.default_rng(1)
        walk = lnp.zeros(64)
        per = []
        for _ in range(steps):
            e0 = metrics.counters()["executions"]
            walk += rng.standard_normal(64)
            per.append(metrics.counters()["executions"] - e0)
        return numpy.asarray(walk), per

    with override(auto_barrier_nodes=400):
        got, per = walk_of(60)
    assert sum(per) >= 10 and per[-5:] == [1] * 5, per
    with override(auto_barrier=False):
        want, off = walk_of(60)
    assert sum(off) == 0
    numpy.testing.assert_array_equal(got, want)


def test_a_read_late_in_some_steps_keeps_the_learned_step():
    """A value read every fifth step after ``w``'s update (a logged norm) leaves the
    rest of that step short; the learned end stays (it is not taken for a new loop)."""
    X, y, w, b = _start(lnp)
    lc.mark_step(wait=True)
    per = []
    for i in range(20):
        e0 = metrics.counters()["executions"]
        err = X @ w + b - y
        w -= 0.1 * (X.T @ err / 64)
        if i % 5 == 4:
            float((err * err).mean())
        b -= 0.1 * err.mean()
        per.append(metrics.counters()["executions"] - e0)
    # (one program a step, two in a step that reads: learning again there ran 0, 0, 1 after it)
    assert per[5:] == [1, 1, 1, 1, 2] * 3, per
