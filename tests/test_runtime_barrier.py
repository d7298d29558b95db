"""Barriers: live tensors, in-place updates, donation, counters, bounded state."""


import numpy as np
import pytest

import lazycore as lc
from lazycore.observe import metrics
from lazycore.runtime import pjrt

from test_runtime_core import MiniArray


pytestmark = pytest.mark.usefixtures("clean_runtime")


def buffer_of(arr: MiniArray):
    return arr.t.value.node.buffer


def test_paper_hazard_read_twice_after_in_place_update(capsys):
    x = np.arange(4, dtype=np.float32)
    a = MiniArray.from_numpy(x)
    a += 1
    print(a)
    print(a)
    first, second = capsys.readouterr().out.splitlines()
    assert first == second == repr(MiniArray.from_numpy(x + 1))
    np.testing.assert_array_equal(a.numpy(), x + 1)


def test_paper_hazard_value_computed_before_in_place_update(capsys):
    x = np.arange(4, dtype=np.float32)
    a = MiniArray.from_numpy(x)
    b = a + 2
    a += 1
    print(a)
    print(b)
    np.testing.assert_array_equal(a.numpy(), x + 1)
    np.testing.assert_array_equal(b.numpy(), x + 2)
    # a's first read ran one program for both: b was pending and live
    assert metrics.counters()["executions"] == 1


def test_step_loop_donates_the_overwritten_weights(rng):
    w0, g0 = rng.standard_normal((8, 8)).astype(np.float32), rng.standard_normal((8, 8)).astype(np.float32)
    w, g = MiniArray.from_numpy(w0), MiniArray.from_numpy(g0)
    ref = w0.copy()
    g_buffer = buffer_of(g)
    for i in range(4):
        lr = 0.01 * (i + 2)
        old = buffer_of(w)
        w -= lr * g
        ref = ref - np.float32(lr) * g0
        lc.mark_step()
        assert old.is_deleted()  # its storage became the new w
        assert not buffer_of(w).is_deleted()
    assert not g_buffer.is_deleted()  # g is live: never donated
    assert metrics.counters()["donated_buffers"] == 4
    assert metrics.counters()["compiles"] == 1
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5)


def test_a_buffer_the_user_handed_in_is_never_donated():
    mine = pjrt.to_device(np.ones((3,), np.float32))
    a = MiniArray(lc.from_buffer(mine))
    a -= 0.5
    lc.mark_step()
    assert not mine.is_deleted()
    np.testing.assert_array_equal(np.asarray(mine), np.ones((3,), np.float32))
    np.testing.assert_array_equal(a.numpy(), np.full((3,), 0.5, np.float32))
    assert metrics.counters()["donated_buffers"] == 0


def test_a_buffer_a_live_handle_holds_is_never_donated():
    a = MiniArray.from_numpy(np.ones((3,), np.float32))
    b = a * 3.0  # a keeps its buffer; b has the same type
    lc.mark_step()
    assert not buffer_of(a).is_deleted()
    assert metrics.counters()["donated_buffers"] == 0
    np.testing.assert_array_equal(b.numpy(), np.full((3,), 3, np.float32))


def test_an_exported_buffer_is_never_donated():
    a = MiniArray.from_numpy(np.ones((3,), np.float32))
    exported = lc.to_buffer(a.t)
    a += 2.0
    lc.mark_step()
    assert not exported.is_deleted()
    assert metrics.counters()["donated_buffers"] == 0


def test_host_copy_survives_donation():
    a = MiniArray.from_numpy(np.zeros((3,), np.float32))
    a += 2.0
    host = a.numpy()
    a += 5.0
    lc.mark_step()
    assert metrics.counters()["donated_buffers"] == 2
    np.testing.assert_array_equal(host, np.full((3,), 2, np.float32))


def test_handles_sharing_a_value_get_an_output_each():
    """Two handles holding one value (a copy into a live array) come out as
    two buffers, as eager's copy gives: the steps after it, which write both,
    then run one program (with one output for both, the next step read them
    as one parameter and the step after as two: a program more)."""
    a = MiniArray.from_numpy(np.arange(3, dtype=np.float32))
    b = a * 2.0
    c = MiniArray.from_numpy(np.zeros((3,), np.float32))
    c.t.assign(b.t)
    lc.mark_step()
    assert c.t.value.node is not b.t.value.node and buffer_of(c) is not buffer_of(b)
    np.testing.assert_array_equal(c.numpy(), np.arange(3, dtype=np.float32) * 2)
    compiles = metrics.counters()["compiles"]
    for _ in range(3):
        b += 1.0
        c -= b
        lc.mark_step()
    assert metrics.counters()["compiles"] == compiles + 1
    np.testing.assert_array_equal(b.numpy(), np.arange(3, dtype=np.float32) * 2 + 3)
    np.testing.assert_array_equal(c.numpy(), np.array([-6, -10, -14], np.float32))


def test_mark_step_runs_nothing_when_nothing_is_pending():
    a = MiniArray.from_numpy(np.ones((2,), np.float32))
    lc.mark_step()
    assert metrics.counters()["executions"] == 0
    assert not a.t.pending


def test_counters_and_timings(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    a = MiniArray.from_numpy(x)
    out = (a * 4.0).numpy()
    c = metrics.counters()
    assert c["transfers_to_device"] == 2 and c["bytes_to_device"] == x.nbytes + 4  # data and the scalar 4.0
    assert c["transfers_to_host"] == 1 and c["bytes_to_host"] == out.nbytes
    assert (c["compiles"], c["executions"], c["fallbacks"]) == (1, 1, 0)
    t = metrics.timings()
    assert all(len(t[p]) == 1 and t[p][0] > 0 for p in ("trace", "lowering", "compile", "execute"))
    metrics.reset()
    assert set(metrics.counters().values()) == {0}
    assert all(v == [] for v in metrics.timings().values())


def test_thousand_steps_keep_registry_and_cache_bounded(rng):
    w0, g0 = rng.standard_normal((4,)).astype(np.float32), rng.standard_normal((4,)).astype(np.float32)
    w, g = MiniArray.from_numpy(w0), MiniArray.from_numpy(g0)
    ref = w0.copy()
    base = lc.live_tensors()  # w, g and whatever else this process still holds
    live, cached = set(), set()
    for i in range(1000):
        lr = 0.001 * (i % 5 + 2)
        w -= lr * g
        ref = ref - np.float32(lr) * g0
        lc.mark_step()
        live.add(lc.live_tensors())
        cached.add(lc.cache.size())
    assert live == {base} and cached == {1}
    assert metrics.counters()["compiles"] == 1 and metrics.counters()["executions"] == 1000
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-4)


# --- the pipelined barrier: mark_step() returns once its program started -------------------------


def _cpu():
    from lazycore.runtime import device

    return device.get("cpu:0")


def test_mark_step_returns_with_its_program_started_and_the_one_before_finished(rng):
    w0 = rng.standard_normal((64, 64)).astype(np.float32)
    w = MiniArray.from_numpy(w0)
    w += 1
    lc.mark_step()
    first = _cpu().running
    assert first is not None  # started, not waited for
    w += 1
    lc.mark_step()
    second = _cpu().running
    assert second is not None and second is not first
    first.block_until_ready()  # the barrier waited for it already: returns at once
    lc.mark_step(wait=True)  # nothing pending: still waits for the running program
    assert _cpu().running is None
    np.testing.assert_array_equal(w.numpy(), (w0 + np.float32(1)) + np.float32(1))


def test_mark_step_wait_true_leaves_nothing_running(rng):
    a = MiniArray.from_numpy(rng.standard_normal(8).astype(np.float32))
    a += 1
    lc.mark_step(wait=True)
    assert _cpu().running is None
    assert not a.t.pending


def test_pipelined_steps_match_waited_steps_with_donation(rng):
    """A loop that never looks at a value: every step's program starts while
    the one before may still run and its buffers are donated to the next."""
    w0, g0 = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 128)).astype(np.float32)

    def train(wait):
        w, g = MiniArray.from_numpy(w0), MiniArray.from_numpy(g0)
        for i in range(30):
            w -= 0.01 * (g * w)
            w += 0.5
            lc.mark_step(wait=wait)
        return w.numpy()

    metrics.reset()
    pipelined = train(False)
    assert metrics.counters()["donated_buffers"] == 30
    waited = train(True)
    np.testing.assert_array_equal(pipelined, waited)
    ref = w0.copy()
    for i in range(30):
        ref = ref - np.float32(0.01) * (g0 * ref)
        ref = ref + np.float32(0.5)
    np.testing.assert_allclose(pipelined, ref, rtol=1e-4)


def test_reading_a_value_after_a_pipelined_barrier_waits_for_it(rng):
    x0 = rng.standard_normal((256, 256)).astype(np.float32)
    a = MiniArray.from_numpy(x0)
    for _ in range(5):
        a = a * 1.5 + 1
        lc.mark_step()
    ref = x0
    for _ in range(5):
        ref = ref * np.float32(1.5) + np.float32(1)
    np.testing.assert_allclose(a.numpy(), ref, rtol=1e-6, atol=1e-5)  # no explicit wait


def test_clearing_the_cache_while_a_program_runs_keeps_its_results(rng):
    import gc

    x0 = rng.standard_normal((512, 512)).astype(np.float32)
    a = MiniArray.from_numpy(x0)
    for _ in range(20):
        a = a * 1.5 - 0.25
    lc.mark_step()  # started, not waited for
    lc.cache.clear()
    gc.collect()  # the executable's last Python reference is gone
    ref = x0
    for _ in range(20):
        ref = ref * np.float32(1.5) - np.float32(0.25)
    np.testing.assert_allclose(a.numpy(), ref, rtol=1e-5, atol=1e-3)
