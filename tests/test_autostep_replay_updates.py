"""A captured step's replay tells the automatic step barrier its updates at
once (StepCutter.updated_many): first updates are kept as they come, and
what learning reads is the same as hearing them one by one."""

import numpy as np
import pytest

import lazycore as lc
from lazycore.ir.context import TRACE
from lazycore.runtime import autostep
from lazycore.trace import capture

pytestmark = pytest.mark.usefixtures("fresh_cutter")  # (what learning reads, from no earlier test's updates)

K = 6


def _step(states, x):
    """Each state <- state * 0.5 + x; returns the sum of their tanh."""
    for s in states:
        lc.assign(s, lc.apply("add", lc.apply("mul", s, lc.broadcast_to(lc.scalar(0.5), s.shape)), x))
    out = lc.apply("tanh", states[0])
    for s in states[1:]:
        out = lc.apply("add", out, lc.apply("tanh", s))
    return out


def _recorded(states):
    x = lc.from_numpy(np.zeros(3, np.float32))
    watch = capture.begin([x])
    out = _step(states, x)
    return capture.finish(watch, [out])


def _state(cutter) -> tuple:
    """What learning a step reads, with handles by their place in ``order``."""
    return (list(cutter.updates), list(cutter.locs), list(cutter.starts), dict(cutter.last),
            sorted(cutter.handles), sorted(cutter.after), cutter.repeated, cutter.rule is None)


def test_a_replays_first_updates_are_kept_not_heard_one_by_one():
    states = [lc.from_numpy(np.full(3, i, np.float32)) for i in range(K)]
    rec = _recorded(states)
    lc.mark_step()
    cutter = TRACE.cutter
    (value,) = rec.replay([lc.from_numpy(np.ones(3, np.float32))])
    # each update entered at once filled these: K entries each, per replay
    assert (len(cutter.updates), len(cutter.after), len(cutter.last)) == (0, 0, 0)
    assert cutter.pending is not None and len(cutter.pending[1]) == K
    lc.mark_step()
    np.testing.assert_allclose(lc.to_numpy(states[2]), [1.5, 1.5, 1.5])


def _run(batched: bool, monkeypatch, before: bool, after: str):
    """A replay's updates in a segment, with an update of another handle
    ``before`` it, and ``after`` it: "other" (another handle), "same" (one
    the replay updated: learning needs the replay's), or "none"."""
    if not batched:
        def per_handle(self, handles, values):  # what the replay did before: updated() per handle
            for h, v in zip(handles, values):
                self.updated(h, v)

        monkeypatch.setattr(autostep.StepCutter, "updated_many", per_handle)
    states = [lc.from_numpy(np.full(3, i, np.float32)) for i in range(K)]
    other = lc.from_numpy(np.zeros(3, np.float32))
    rec = _recorded(states)
    lc.mark_step()
    cutter = TRACE.cutter
    ids = {id(h): f"s{i}" for i, h in enumerate(states)} | {id(other): "other"}
    if before:
        lc.assign(other, lc.apply("add", other, other))
    rec.replay([lc.from_numpy(np.ones(3, np.float32))])
    if after == "other":
        lc.assign(other, lc.apply("tanh", other))
    elif after == "same":
        lc.assign(states[3], lc.apply("tanh", states[3]))
    if cutter.pending is not None:
        cutter._settle()  # what learning would read now
    updates, locs, starts, last, handles, after_keys, repeated, no_rule = _state(cutter)
    named = ([(p, ids[h]) for p, h in updates], len(locs), [ids[h] for h in starts],
             sorted((ids[h], p) for h, p in last.items()), sorted(ids[h] for h in handles), len(after_keys),
             repeated, no_rule)
    lc.mark_step()
    return named, [lc.to_numpy(s).tolist() for s in states + [other]]


@pytest.mark.parametrize("before", [False, True])
@pytest.mark.parametrize("after", ["none", "other", "same"])
def test_kept_updates_are_entered_where_they_came(monkeypatch, before, after):
    with monkeypatch.context() as m:
        want = _run(False, m, before, after)
    got = _run(True, monkeypatch, before, after)
    assert got == want
