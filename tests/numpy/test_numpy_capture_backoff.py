"""A captured NumPy step whose recordings are refused again and again stops
recording (lazycore.trace.capture.Backoff, as lazycore.torch.capture): its
calls are traced plainly and give NumPy's values, it says so once at the
calling line, and a change that lifts the refusal is still found."""

import warnings

import numpy as np

import lazycore
import lazycore.numpy as lnp
from lazycore.trace.capture import LONGEST_WAIT, REFUSALS_BEFORE_BACKOFF, CaptureWarning

from _backoff_scaffold import Stash, capture_warnings, first_replay, number_changing_for_a_while

CALLS = 40


def _data(seed=0, n=32, d=6):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.standard_normal((n, 1)).astype(np.float32)


def _train(xp, calls=CALLS, stash_until=None, wrap=lambda f: f, on_call=None):
    """SGD steps on ``xp`` (numpy or lazycore.numpy) that keep each error array in
    a list outside the step (a refusal) for the calls before ``stash_until``
    (all: None); (losses, the final weights, the step)."""
    xs, ys = _data()
    w = xp.asarray(np.zeros((6, 1), np.float32))
    x, y = xp.asarray(xs), xp.asarray(ys)
    stash = Stash(stash_until)

    def step(w, x, y, lr):
        err = x @ w - y
        w -= lr * (x.T @ err) / len(x)
        stash.keep(err)
        return (err ** 2).mean()

    fn = wrap(step)
    losses = []
    for i in range(calls):
        stash.before_call(i)
        losses.append(fn(w, x, y, 0.05))
        if xp is lnp:
            lazycore.mark_step()
        if on_call is not None:
            on_call(i, fn)
    return [float(l) for l in losses], np.asarray(w), fn


def test_a_refused_step_records_a_few_calls_and_gives_numpys_values():
    with capture_warnings() as said:
        losses, w, fn = _train(lnp, wrap=lnp.capture)
    assert fn.traces == CALLS and fn.replays == 0
    assert "keeps 1 tensor(s)" in fn.why, fn.why
    # three in a row, then one after each wait of 1, 2, 4, 8, 16 plain calls
    assert fn.recordings <= REFUSALS_BEFORE_BACKOFF + 5, fn.recordings
    assert len(said) == 1, [str(w.message) for w in said]
    assert said[0].filename == __file__  # the user's line that calls the step
    assert "stopped recording" in str(said[0].message) and fn.why in str(said[0].message)
    traced_losses, traced_w, _ = _train(lnp)
    assert losses == traced_losses  # bitwise: the plain calls trace the same step
    np.testing.assert_array_equal(w, traced_w)
    numpy_losses, numpy_w, _ = _train(np)
    np.testing.assert_allclose(losses, numpy_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, numpy_w, rtol=1e-5, atol=1e-6)


def test_without_the_backoff_every_call_would_be_recorded():
    # the same step stopped from stashing at once records two calls and replays the rest
    losses, _, fn = _train(lnp, calls=10, stash_until=0, wrap=lnp.capture)
    assert (fn.recordings, fn.replays) == (2, 8), (fn.recordings, fn.replays, fn.why)


def test_a_step_fixed_later_replays_again_within_the_longest_wait():
    fixed = 30  # calls before: refused; after: it could replay
    on_call, first = first_replay()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        losses, w, fn = _train(lnp, calls=fixed + LONGEST_WAIT + 10, stash_until=fixed, wrap=lnp.capture,
                               on_call=on_call)
    assert first, (fn.traces, fn.why)
    # waiting at most the current wait (16 by call 30), then two recordings that agree
    assert first[0] <= fixed + 16 + 2, first
    assert fn.replays == len(losses) - first[0]  # every call from then on replays
    assert fn.why is None
    numpy_losses, numpy_w, _ = _train(np, calls=len(losses), stash_until=fixed)
    np.testing.assert_allclose(losses, numpy_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, numpy_w, rtol=1e-5, atol=1e-6)


def test_a_python_number_that_changes_every_call_stops_recording_and_is_found_again_when_it_stops():
    a = lnp.asarray(np.arange(4.0, dtype=np.float32))
    got, said, step = number_changing_for_a_while(lnp.capture, a, lambda out: np.asarray(out).tolist())
    assert got == [[v * (float(i) if i < 30 else 7.0) for v in range(4)] for i in range(60)]
    assert len(said) == 1 and "differed" in str(said[0].message), [str(w.message) for w in said]
    assert step.replays > 0 and step.recordings < 20, (step.recordings, step.replays)
