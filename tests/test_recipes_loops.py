"""A recorded lowering that makes a loop or a branch (lazycore.trace.recipes) is
replayed with that node as one entry holding its bodies, as a captured step's
fragment holds it: a later call of the same signature makes the region node on
its new inputs without tracing the bodies again, and hashes as a traced call
does. A loop body reading a value the recording does not know refuses the
recording, and every call is traced."""

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir.config import override
from lazycore.trace import control, recipes


@pytest.fixture
def traces(monkeypatch):
    """How many bodies were traced (lazycore.trace.control's one entry for it)."""
    count = [0]
    inner = control._trace

    def counting(*args, **kwargs):
        count[0] += 1
        return inner(*args, **kwargs)

    monkeypatch.setattr(control, "_trace", counting)
    return count


def _running_sum(x):
    """A scan along the leading axis, then an op on its result."""
    def step(carry, row):
        s = lc.apply("add", carry, row)
        return s, s

    zero = lc.apply("broadcast_in_dim", lc.scalar(0.0, dtype=x.dtype, device=x.device), dims=(), shape=x.shape[1:])
    _, out = lc.scan(step, zero, x)
    return lc.apply("mul", out, out)


@lc.replayed
def _scanned(x):
    return _running_sum(x)


@lc.replayed
def _branch(x, p):
    return lc.cond(p, lambda v: lc.apply("neg", v), lambda v: lc.apply("add", v, v), x)


@lc.replayed
def _loop_then_scan(x, n):
    """A loop and a scan in one lowering, the scan on the loop's result."""
    y = lc.fori_loop(0, n, lambda i, v: lc.apply("add", v, v), x)
    return _running_sum(y)


def _data(seed, shape=(5, 3)):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _digest(h):
    return h.value.node.digest


def test_a_scan_in_a_lowering_is_traced_once_then_replayed(traces):
    recipes._REPLAYED.clear()
    a = _data(0)
    first = _scanned(lc.from_numpy(a))
    recorded = traces[0]
    assert recorded == 3  # scan's probe, then the loop's condition and body
    with override(replay=False):
        traced = [_scanned(lc.from_numpy(_data(s))) for s in (1, 2)]
    assert traces[0] == 3 * recorded
    replays = [_scanned(lc.from_numpy(_data(s))) for s in (1, 2)]
    assert traces[0] == 3 * recorded  # the replays traced no body
    assert [_digest(r) for r in replays] == [_digest(t) for t in traced]
    for s, r in zip((0, 1, 2), [first] + replays):
        want = np.cumsum(_data(s), axis=0, dtype=np.float32)
        np.testing.assert_allclose(lc.to_numpy(r), want * want, rtol=1e-6)


def test_a_branch_and_a_loop_with_a_scan_replay(traces):
    recipes._REPLAYED.clear()
    for p, want in ((True, lambda a: -a), (False, lambda a: a + a)):
        for s in range(3):
            a = _data(s)
            out = _branch(lc.from_numpy(a), lc.from_numpy(np.asarray(p)))
            np.testing.assert_array_equal(lc.to_numpy(out), want(a))
    after_branch = traces[0]
    assert after_branch == 2  # the two branches, traced at the first call only
    for s in range(3):
        a = _data(s)
        out = _loop_then_scan(lc.from_numpy(a), 3)
        want = np.cumsum(a * 8, axis=0, dtype=np.float32)
        np.testing.assert_allclose(lc.to_numpy(out), want * want, rtol=1e-6)
    assert traces[0] == after_branch + 2 + 3  # the loop's two bodies and the scan's three, once


def test_a_body_reading_a_value_the_recording_does_not_know_is_traced_each_call(traces):
    recipes._REPLAYED.clear()
    held = lc.from_numpy(np.full((3,), 2.0, np.float32))  # not an argument: not in the call's key

    @lc.replayed
    def scaled(x):
        return lc.fori_loop(0, 2, lambda i, v: lc.apply("mul", v, held), x)

    for s in range(3):
        a = _data(s, (3,))
        np.testing.assert_array_equal(lc.to_numpy(scaled(lc.from_numpy(a))), a * 4)
    assert traces[0] == 3 * 2
    assert not any(recipes._REPLAYED.values())
