"""The one replayer's try policy (issue 42): a key's recordings are tried
newest first, and the one that served becomes the newest, for every user of
lazycore.ir.replayer.Replayer (the torch capture had this policy in a loop of
its own; the NumPy capture tried its plans oldest first). Consecutive calls
mostly pass the guards of the recording the last call used, so a run of
calls in one mode checks one recording per call, whichever was recorded
first."""

import numpy as np
import pytest

import lazycore
import lazycore.numpy as lnp
from lazycore.ir.memo import MEMOS
from lazycore.ir.replayer import GUARDED, Replayer

MODE = 0  # read by the NumPy step below: a guard


class _Rec:
    """A recording that holds for one mode, counting its guard checks."""

    def __init__(self, mode):
        self.mode, self.calls = mode, 0

    def attempt(self, mode):
        self.calls += 1
        return self.mode if mode == self.mode else GUARDED


def test_the_newest_recording_is_tried_first_and_the_one_that_served_becomes_newest():
    r = Replayer("test.replayer_order", 2, per_key=3)
    try:
        recs = [_Rec(m) for m in (0, 1, 2)]
        for rec in recs:
            r.add("k", rec)
        checks = []
        for mode in [2] * 3 + [0] * 3 + [1] * 3 + [0] * 3:
            before = sum(x.calls for x in recs)
            assert r.replay("k", mode) == mode
            checks.append(sum(x.calls for x in recs) - before)
        # a mode's first call checks the newer recordings first; the calls after it check one each
        assert checks == [1, 1, 1, 3, 1, 1, 3, 1, 1, 2, 1, 1]
        assert r.find("k") is recs[0] and r.get("k") == (recs[2], recs[1], recs[0])
        assert r.replay("k", 5) is GUARDED and r.get("k") == (recs[2], recs[1], recs[0])  # nothing served
        r.add("k", _Rec(3))  # three per key: the one that served longest ago goes
        assert r.get("k")[:2] == (recs[1], recs[0])
    finally:
        del MEMOS["test.replayer_order"]


def _scaled(w, x):
    w += x * (1.0 if MODE == 0 else 2.0)
    return w.sum()


@pytest.fixture
def plan_checks(monkeypatch):
    """Guard checks of NumPy captured plans (calls of their ``attempt``)."""
    import importlib

    capture = importlib.import_module("lazycore.frontends.numpy.capture")
    counts = [0]
    attempt = capture._Plan.attempt

    def counted(self, flat):
        counts[0] += 1
        return attempt(self, flat)

    monkeypatch.setattr(capture._Plan, "attempt", counted)
    return counts


def test_a_numpy_step_in_the_mode_of_its_older_plan_checks_one_plan_per_call(plan_checks):
    global MODE
    w = lnp.asarray(np.zeros(4, np.float32))
    x = lnp.asarray(np.ones(4, np.float32))
    step = lnp.capture(_scaled)
    want = np.zeros(4, np.float32)
    try:
        for mode, calls in ((0, 3), (1, 3), (0, 4)):  # a plan for mode 0, then one for mode 1
            MODE = mode
            for _ in range(calls):
                before = plan_checks[0]
                step(w, x)
                lazycore.mark_step()
                want += 1.0 if mode == 0 else 2.0
            assert plan_checks[0] - before == 1  # the last call of the run checked one plan
        assert step.traces == 4 and step.replays == 6, step.why
        np.testing.assert_array_equal(np.asarray(w), want)
    finally:
        MODE = 0
