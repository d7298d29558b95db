"""lazycore.capture through the core API alone: what a frontend's capture wrapper builds on."""

import gc

import numpy as np
import pytest

import lazycore as lc
from lazycore.trace import capture


def _step(state, x):
    """state <- state * 0.5 + x; returns tanh(state)."""
    lc.assign(state, lc.apply("add", lc.apply("mul", state, lc.broadcast_to(lc.scalar(0.5), state.shape)), x))
    return lc.apply("tanh", state)


def _record(state, x):
    watch = capture.begin([x])
    out = _step(state, x)
    return capture.finish(watch, [out]), out


@pytest.mark.parametrize("calls", [False, True])
def test_a_replay_makes_what_the_traced_call_made_on_new_inputs(calls):
    with lc.config.override(capture_calls=calls):
        _replays_what_the_traced_call_made(calls)


def _replays_what_the_traced_call_made(calls):
    rng = np.random.default_rng(0)
    s_np = rng.standard_normal((3, 4)).astype(np.float32)
    state = lc.from_numpy(s_np)
    rec, out = _record(state, lc.from_numpy(np.zeros((3, 4), np.float32)))
    lc.mark_step()
    s_np = s_np * 0.5
    for i in range(3):
        x_np = rng.standard_normal((3, 4)).astype(np.float32)
        x = lc.from_numpy(x_np)
        traced_digest = _step(lc.from_numpy(s_np), x).value.node.digest
        (value,) = rec.replay([x])
        if calls:  # one call node holding the recorded graph (its own digest)
            assert value.node.op == "call" and x.value in value.node.operands[0]
        else:
            assert value.node.digest == traced_digest  # the traced call's very graph
        out = lc.LazyTensor(value, state.device)
        s_np = s_np * 0.5 + x_np
        np.testing.assert_allclose(lc.to_numpy(state), s_np, rtol=1e-6)
        np.testing.assert_allclose(lc.to_numpy(out), np.tanh(s_np), rtol=1e-6)


def test_every_replay_runs_the_recordings_generated_code():
    with lc.config.override(capture_calls=False):
        state = lc.from_numpy(np.ones(2, np.float32))
        rec, _ = _record(state, lc.from_numpy(np.zeros(2, np.float32)))
        lc.mark_step()
        made = []
        for i in range(3):
            x = lc.from_numpy(np.full(2, i, np.float32))
            (value,) = rec.replay([x])
            made.append((rec.fragment.fast is not None, _ops_and_digests(value.node)))
            lc.mark_step()
        assert [generated for generated, _ in made] == [True, True, True]  # one way to replay (issue 42)
        assert made[0][1] == made[1][1] == made[2][1]
        assert [op for op, _ in made[0][1]] == ["tanh", "add", "mul", "broadcast_in_dim", "scalar"]
        np.testing.assert_allclose(lc.to_numpy(state), [2.5625, 2.5625])  # traced once, then 3 replays: x = 0, 0, 1, 2


def _ops_and_digests(node):
    out, todo = [], [node]
    while todo:
        n = todo.pop(0)
        out.append((n.op, n.digest))
        todo += [v.node for v in n.operands if type(v.node).__name__ != "Data"]
    return out


def test_a_recording_is_keyed_by_the_scalar_values_it_baked():
    state = lc.from_numpy(np.ones(2, np.float32))
    x = lc.from_numpy(np.ones(2, np.float32))
    a, _ = _record(state, x)
    lc.mark_step()
    b, _ = _record(state, x)
    lc.mark_step()
    watch = capture.begin([x])
    lc.assign(state, lc.apply("add", lc.apply("mul", state, lc.broadcast_to(lc.scalar(0.25), state.shape)), x))
    c = capture.finish(watch, [])
    assert a.key == b.key and a.key != c.key


@pytest.mark.parametrize("calls", [False, True])
def test_an_input_of_another_structure_replays_with_the_digests_a_trace_would_give(calls):
    with lc.config.override(capture_calls=calls):
        _replays_another_structure(calls)


def _replays_another_structure(calls):
    state = lc.from_numpy(np.ones(2, np.float32))
    rec, _ = _record(state, lc.from_numpy(np.ones(2, np.float32)))
    lc.mark_step()
    # a pending value, not device data: the recorded nodes are hashed again over it
    pending = lc.apply("add", lc.from_numpy(np.ones(2, np.float32)), lc.from_numpy(np.ones(2, np.float32)))
    twin = lc.from_numpy(np.ones(2, np.float32))
    traced_digest = _step(twin, pending).value.node.digest
    (value,) = rec.replay([pending])
    if calls:  # the pending value is the call node's operand: computed with it
        assert value.node.op == "call" and pending.value in value.node.operands[0]
    else:
        assert value.node.digest == traced_digest
    np.testing.assert_allclose(lc.to_numpy(lc.LazyTensor(value, state.device)), np.tanh([2.75, 2.75]), rtol=1e-6)  # 1.5 * 0.5 + 2
    np.testing.assert_allclose(lc.to_numpy(state), [2.75, 2.75])


def test_replay_refuses_before_changing_anything():
    state = lc.from_numpy(np.ones(2, np.float32))
    rec, _ = _record(state, lc.from_numpy(np.ones(2, np.float32)))
    lc.mark_step()
    before = state.value
    assert rec.replay([lc.from_numpy(np.ones(3, np.float32))]) is None and state.value is before  # another type
    assert rec.replay([]) is None  # another number of arguments
    # the state it updates is gone: the recording cannot stand for the call any more
    del state
    gc.collect()
    assert rec.replay([lc.from_numpy(np.ones(2, np.float32))]) is None


@pytest.mark.parametrize("case", ["barrier", "upload", "stray"])
def test_what_cannot_be_replayed_is_refused_with_a_reason(case):
    state = lc.from_numpy(np.ones(2, np.float32))
    x = lc.from_numpy(np.ones(2, np.float32))
    watch = capture.begin([x])
    out = _step(state, x)
    kept = [out]
    if case == "barrier":
        lc.to_numpy(out)
        match = "barrier"
    elif case == "upload":
        kept = [lc.apply("add", out, lc.from_numpy(np.ones(2, np.float32)))]
        match = "host data"
    else:
        kept = []  # ``out`` is still alive, and nobody said so
        match = "keeps 1 tensor"
    with pytest.raises(capture.Refused, match=match):
        capture.finish(watch, kept)


def _recorded_calls(backoff, calls, reason_at=lambda i: "kept a tensor", refused=lambda i: True):
    """The calls (1-based) ``backoff`` lets record, each refused with ``reason_at(i)`` when ``refused(i)``."""
    out = []
    for i in range(1, calls + 1):
        if backoff.records():
            out.append(i)
            if refused(i):
                backoff.refused(reason_at(i))
            else:
                backoff = capture.Backoff()  # a recording that is not refused starts over (the frontend drops it)
    return out


def test_a_refused_recording_is_retried_after_waits_that_double_up_to_a_bound():
    recorded = _recorded_calls(capture.Backoff(), 400)
    assert recorded[:9] == [1, 2, 3, 5, 8, 13, 22, 39, 72]  # 3 in a row, then waits of 1, 2, 4, ... calls
    gaps = [b - a - 1 for a, b in zip(recorded, recorded[1:])]
    assert max(gaps) == capture.LONGEST_WAIT and gaps[-1] == capture.LONGEST_WAIT
    assert len(recorded) <= 3 + 7 + 400 // (capture.LONGEST_WAIT + 1)


def test_a_new_reason_starts_the_count_again_and_only_the_third_refusal_in_a_row_says_so():
    b = capture.Backoff()
    assert [b.refused(r) for r in ("a", "a", "b", "b")] == [False, False, False, False]
    assert b.records()
    assert b.refused("b") is True  # the third "b" in a row: it stops recording, said once
    assert not b.records() and b.records()  # one plain call, then a recording
    assert b.refused("b") is False  # still stopped (wait 2), not said again
    assert [b.records() for _ in range(3)] == [False, False, True]
    assert b.refused("c") is False and b.records()  # another reason: counted from 1, recording at once
