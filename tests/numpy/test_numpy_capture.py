"""``lazycore.numpy.capture`` (issue 43, item 8): a decorated NumPy step is
traced twice, then replayed with guards, and gives NumPy's answers."""

from __future__ import annotations

import numpy as np
import pytest

import lazycore
import lazycore.numpy as lnp
from lazycore.observe import metrics

SCALE = 2.0  # read by a step below: a guard


def _data(seed=0, n=64, d=8):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32)


def _sgd(w, x, y, lr):
    err = x @ w - y
    w -= lr * (x.T @ err) / len(x)
    return (err ** 2).mean()


def test_a_training_step_replays_with_numpys_answers_and_compiles_nothing_new():
    xs, ys = _data()
    w_np = np.zeros((8, 1), np.float32)
    w = lnp.asarray(w_np)
    x, y = lnp.asarray(xs), lnp.asarray(ys)
    step = lnp.capture(_sgd)
    losses = []
    for i in range(8):
        losses.append(step(w, x, y, 0.1))
        lazycore.mark_step()
        if i == 2:
            compiles = metrics.counters()["compiles"]
    assert (step.traces, step.replays) == (2, 6), step.why
    assert metrics.counters()["compiles"] == compiles  # the replays run the traced call's program
    for loss in losses:
        assert isinstance(loss, lnp.ndarray) and loss.shape == ()
        expected = _sgd(w_np, xs, ys, 0.1)  # NumPy itself, step by step (w_np updated in place too)
        np.testing.assert_allclose(float(loss), float(expected), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(w), w_np, rtol=1e-5, atol=1e-6)


def test_the_same_step_uncaptured_gives_the_same_values_bitwise():
    xs, ys = _data(1)
    w1, w2 = lnp.asarray(np.zeros((8, 1), np.float32)), lnp.asarray(np.zeros((8, 1), np.float32))
    x, y = lnp.asarray(xs), lnp.asarray(ys)
    step = lnp.capture(_sgd)
    for _ in range(5):
        a = step(w1, x, y, 0.05)
        b = _sgd(w2, x, y, 0.05)
        lazycore.mark_step()
        assert float(a) == float(b)
    assert step.replays == 3
    assert np.array_equal(np.asarray(w1), np.asarray(w2))


def test_guards_python_arguments_shapes_and_the_globals_the_step_reads():
    global SCALE

    def scaled(a, k):
        return a * SCALE + k

    step = lnp.capture(scaled)
    a = lnp.asarray(np.arange(6, dtype=np.float32))
    for _ in range(3):
        out = step(a, 1)
    assert (step.traces, step.replays) == (2, 1)
    assert np.array_equal(np.asarray(out), np.arange(6) * 2.0 + 1)
    # another Python argument: another recording, by value
    assert np.array_equal(np.asarray(step(a, 5)), np.arange(6) * 2.0 + 5)
    assert step.replays == 1
    # a global the step read changed: traced again, with the new value
    SCALE = 3.0
    try:
        out = step(a, 1)
        assert step.replays == 1 and "SCALE" in step.guard, step.guard
        assert np.array_equal(np.asarray(out), np.arange(6) * 3.0 + 1)
    finally:
        SCALE = 2.0
    # another shape: another kind of argument
    b = lnp.asarray(np.ones((2, 3), np.float32))
    assert np.array_equal(np.asarray(step(b, 1)), np.full((2, 3), 3.0))


def test_results_in_structures_and_views_of_arguments():
    def stats(a):
        m = a.mean(axis=0)
        return {"mean": m, "centered": a - m, "first": a[0], "pair": (a.max(), 7)}

    step = lnp.capture(stats)
    host = np.arange(12, dtype=np.float64).reshape(4, 3)
    a = lnp.asarray(host)
    for _ in range(3):
        out = step(a)
    assert step.replays == 1
    assert sorted(out) == ["centered", "first", "mean", "pair"]
    np.testing.assert_array_equal(np.asarray(out["mean"]), host.mean(axis=0))
    np.testing.assert_array_equal(np.asarray(out["centered"]), host - host.mean(axis=0))
    np.testing.assert_array_equal(np.asarray(out["first"]), host[0])
    assert float(out["pair"][0]) == 11.0 and out["pair"][1] == 7
    # the view shares the argument's storage, as NumPy's does
    a[0, 0] = 100.0
    assert float(out["first"][0]) == 100.0


def test_a_random_generator_advances_at_every_replay():
    def noisy(a, rng):
        return a + rng.standard_normal(a.shape)

    a = lnp.asarray(np.zeros(5))
    rng, ref_rng = lnp.random.default_rng(3), lnp.random.default_rng(3)
    step = lnp.capture(noisy)
    got = [np.asarray(step(a, rng)) for _ in range(5)]
    want = [np.asarray(noisy(a, ref_rng)) for _ in range(5)]
    assert step.replays == 3
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert not np.array_equal(got[3], got[4])


def test_a_step_that_looks_at_a_value_is_refused_and_still_right():
    def peeks(a):
        if float(a.sum()) > 0:
            return a * 2
        return a

    step = lnp.capture(peeks)
    a = lnp.asarray(np.ones(3))
    for _ in range(3):
        out = step(a)
    assert step.replays == 0 and step.traces == 3
    assert "barrier" in step.why, step.why
    assert np.array_equal(np.asarray(out), [2.0, 2.0, 2.0])


def test_a_step_that_keeps_a_new_array_outside_is_refused():
    kept = []

    def leaks(a):
        b = a + 1
        kept.append(b)
        return b * 2

    step = lnp.capture(leaks)
    a = lnp.asarray(np.ones(3))
    for _ in range(3):
        out = step(a)
    assert step.replays == 0 and "keeps" in step.why, step.why
    assert np.array_equal(np.asarray(out), [4.0, 4.0, 4.0])


def test_host_array_arguments_are_not_captured():
    step = lnp.capture(lambda a, h: a + h.sum())
    a = lnp.asarray(np.ones(3))
    for i in range(3):
        out = step(a, np.full(2, float(i)))
        assert np.array_equal(np.asarray(out), np.ones(3) + 2 * i)
    assert step.replays == 0 and "neither" in step.why


@pytest.mark.parametrize("mode", ["ignore", "raise"])
def test_errstate_is_a_guard(mode):
    step = lnp.capture(lambda a, b: a / b)
    a, b = lnp.asarray(np.ones(3)), lnp.asarray(np.array([1.0, 2.0, 4.0]))
    with np.errstate(divide=mode):
        for _ in range(3):
            out = step(a, b)
        assert step.replays == 1
    np.testing.assert_array_equal(np.asarray(out), [1.0, 0.5, 0.25])
    with np.errstate(divide="warn" if mode == "ignore" else "ignore"):
        step(a, b)
    assert step.replays == 1 and "errstate" in step.guard
