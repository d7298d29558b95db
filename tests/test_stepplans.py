"""Barrier plans recalled from the step log (lazycore.stepplans): a step like
an earlier one skips the walk, and anything that changes the program, its
arguments or its donation still reaches it."""

import numpy as np
import pytest

import lazycore as lc
from lazycore.runtime import barrier
from lazycore.ir import graph
from lazycore.observe import metrics
from lazycore.runtime.cache import CACHE
from lazycore.ir.tensor import LazyTensor

pytestmark = pytest.mark.usefixtures("clean_runtime")


@pytest.fixture
def walks(monkeypatch):
    """How many barrier walks were made."""
    made = [0]
    real = barrier.Walk

    class Counted(real):
        def __init__(self, outputs):
            made[0] += 1
            super().__init__(outputs)

    monkeypatch.setattr(barrier, "Walk", Counted)
    return made


def scaled(t, s):
    k = lc.scalar(s, dtype=t.dtype, device=t.device)
    return lc.apply("mul", t, lc.apply("broadcast_in_dim", k, dims=(), shape=t.shape))


def sgd_loop(w0, x, lrs, walks, snapshot_at=None):
    """``w -= lr * tanh(w * x)`` per step, in place, one barrier per step;
    returns the final weights and the walks made from the third step on."""
    w = lc.from_numpy(w0)
    xs = lc.from_numpy(x)
    late = 0
    for i, lr in enumerate(lrs):
        before = walks[0]
        old = LazyTensor(w.value, w.device) if i == snapshot_at else None
        expected_old = lc.to_numpy(w) if old is not None else None
        g = lc.apply("tanh", lc.apply("mul", w, xs))
        w.assign(lc.apply("sub", w, scaled(g, lr)))
        lc.mark_step()
        if old is not None:  # a handle kept on the old weights: never donated
            np.testing.assert_array_equal(lc.to_numpy(old), expected_old)
        if i >= 2:
            late += walks[0] - before
    return lc.to_numpy(w), late


def sgd_numpy(w0, x, lrs):
    w = w0.copy()
    for lr in lrs:
        w = w - np.float32(lr) * np.tanh(w * x)
    return w


def test_a_repeating_step_recalls_its_walk(rng, walks):
    w0, x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    lrs = [0.1 + 0.01 * i for i in range(8)]  # a new scalar value every step
    w, late = sgd_loop(w0, x, lrs, walks)
    np.testing.assert_allclose(w, sgd_numpy(w0, x, lrs), rtol=1e-5, atol=1e-6)
    assert late == 0  # steps 3..8 walked nothing
    c = metrics.counters()
    assert c["compiles"] == 1
    assert c["donated_buffers"] >= 6  # the old weights, every recalled step


def test_a_held_leaf_is_not_donated_under_a_recalled_plan(rng, walks):
    w0, x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    lrs = [0.25] * 7
    w, _ = sgd_loop(w0, x, lrs, walks, snapshot_at=4)
    np.testing.assert_allclose(w, sgd_numpy(w0, x, lrs), rtol=1e-5, atol=1e-6)
    assert metrics.counters()["compiles"] == 2  # step 5 donates nothing: its own program


def test_equal_digests_with_other_wiring_walk_again(rng, walks):
    x, y = rng.standard_normal((2, 4, 4)).astype(np.float32)

    def step(by_a):
        a, b = lc.from_numpy(x), lc.from_numpy(y)
        # the same nodes and digests (leaves hash their type), other wiring
        s = lc.apply("add", a, b)
        return lc.to_numpy(lc.apply("mul", s, a if by_a else b))

    for _ in range(3):
        np.testing.assert_array_equal(step(False), (x + y) * y)
    before = walks[0]
    np.testing.assert_array_equal(step(True), (x + y) * x)
    assert walks[0] == before + 1
    np.testing.assert_array_equal(step(False), (x + y) * y)
    assert walks[0] == before + 1  # recalled again


def test_nodes_made_before_the_step_are_part_of_it(rng, walks):
    """A pending node no handle holds (as recordings share constants) made
    in an earlier step: later steps log it, and an equal-shaped one with
    another scalar reads its own value."""
    x = rng.standard_normal((4, 4)).astype(np.float32)

    def shared(value):
        k = lc.scalar(value, dtype="f32")
        return lc.apply("broadcast_in_dim", k, dims=(), shape=(4, 4)).value  # no handle kept

    def step(k):
        a = lc.from_numpy(x)
        return lc.to_numpy(lc.apply("mul", a, LazyTensor(k, a.device)))

    k25 = shared(2.5)
    lc.mark_step()
    for _ in range(4):
        np.testing.assert_array_equal(step(k25), x * np.float32(2.5))
    k35 = shared(3.5)
    lc.mark_step()
    before = walks[0]
    np.testing.assert_array_equal(step(k35), x * np.float32(3.5))
    np.testing.assert_array_equal(step(k25), x * np.float32(2.5))
    assert walks[0] == before
    assert metrics.counters()["compiles"] == 1


def test_a_step_too_large_to_log_walks(rng, walks, monkeypatch):
    monkeypatch.setattr(graph, "STEP_LOG_LIMIT", 5)
    w0, x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    lrs = [0.1 + 0.01 * i for i in range(5)]
    w, late = sgd_loop(w0, x, lrs, walks)
    np.testing.assert_allclose(w, sgd_numpy(w0, x, lrs), rtol=1e-5, atol=1e-6)
    assert late == 3  # every step walked
    monkeypatch.setattr(graph, "STEP_LOG_LIMIT", 100_000)
    assert graph.LOG.on  # the next step logs again


def test_a_cleared_cache_compiles_under_a_recalled_plan(rng, walks):
    w0, x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    lrs = [0.5] * 4
    sgd_loop(w0, x, lrs, walks)
    CACHE.clear()  # the programs only: the plans stay
    w, _ = sgd_loop(w0, x, lrs, walks)
    np.testing.assert_allclose(w, sgd_numpy(w0, x, lrs), rtol=1e-5, atol=1e-6)
    assert metrics.counters()["compiles"] == 2


def test_a_new_user_lowering_reaches_a_recalled_plan(rng, walks):
    from lazycore.passes import register_lowering
    from lazycore.passes.lowering import hlo, registry

    x = rng.standard_normal((4, 4)).astype(np.float32)

    def step():
        return lc.to_numpy(lc.apply("tanh", lc.from_numpy(x)))

    try:
        for _ in range(3):
            np.testing.assert_allclose(step(), np.tanh(x), rtol=1e-6)
        register_lowering("tanh", lambda op, rewriter: hlo.splat_like(0.0, op.operands[0]))
        np.testing.assert_array_equal(step(), np.zeros_like(x))
    finally:
        registry.clear_user_patterns()
    np.testing.assert_allclose(step(), np.tanh(x), rtol=1e-6)


def test_variadic_groups_are_part_of_the_log(rng, walks):
    # over the host copies' 64 KiB: the slices are read from programs, not computed on the host
    x = rng.standard_normal((6, 3000)).astype(np.float32)

    def step(swap):
        p, q = lc.scalar(2, "i64"), lc.scalar(3, "i64")
        starts = [q, p] if swap else [p, q]
        return lc.to_numpy(lc.apply("dynamic_slice", lc.from_numpy(x), starts, sizes=(2, 2)))

    for _ in range(3):
        np.testing.assert_array_equal(step(False), x[2:4, 3:5])
    before = walks[0]
    np.testing.assert_array_equal(step(True), x[3:5, 2:4])
    np.testing.assert_array_equal(step(False), x[2:4, 3:5])
    assert walks[0] == before + 1


def test_encodings_kept_are_bounded(rng, walks, monkeypatch):
    from lazycore.runtime import stepplans

    monkeypatch.setattr(stepplans, "ITEMS_KEPT", 10)  # below one step's encoding
    w0, x = rng.standard_normal((2, 8, 8)).astype(np.float32)
    lrs = [0.1 + 0.01 * i for i in range(5)]
    w, late = sgd_loop(w0, x, lrs, walks)
    np.testing.assert_allclose(w, sgd_numpy(w0, x, lrs), rtol=1e-5, atol=1e-6)
    assert late == 3 and stepplans._items[0] == 0
