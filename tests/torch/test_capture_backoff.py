"""A captured step whose recordings are refused again and again stops recording
(lazycore.trace.capture.Backoff): its calls cost a traced call, give the
traced call's values, it says so once at the calling line, and a change that
lifts the refusal is still found."""

import warnings

import numpy as np
import torch
import torch.nn.functional as F

import lazycore.torch as ltorch
from lazycore.trace.capture import LONGEST_WAIT, REFUSALS_BEFORE_BACKOFF, CaptureWarning

from _backoff_scaffold import Stash, capture_warnings, first_replay, number_changing_for_a_while

CALLS = 40


def _setup(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(4, 8, generator=g), torch.randint(0, 4, (4,), generator=g)) for _ in range(4)]
    return model, batches


def _train(dev, wrap, calls=CALLS, stash_until=None, on_call=None):
    """AdamW steps that keep each loss in a list outside the step (a refusal)
    for the calls before ``stash_until`` (all: None); (losses, parameters, the step)."""
    model, batches = _setup(dev)
    if dev is not None:
        model = model.to(dev)
        batches = [(x.to(dev), y.to(dev)) for x, y in batches]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    stash = Stash(stash_until)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        stash.keep(loss.detach())
        return loss.detach()

    fn = wrap(step)
    losses = []
    for i in range(calls):
        stash.before_call(i)
        x, y = batches[i % len(batches)]
        losses.append(fn(x, y))
        if dev is not None:
            ltorch.mark_step()
        if on_call is not None:
            on_call(i, fn)
    return [float(l.cpu()) for l in losses], [p.detach().cpu().numpy() for p in model.parameters()], fn


def test_a_step_refused_for_good_costs_a_traced_step_and_gives_its_values(dev):
    with capture_warnings() as said:
        losses, params, fn = _train(dev, ltorch.capture)
    assert fn.traces == CALLS and fn.replays == 0
    assert "keeps 1 tensor(s)" in fn.why
    # three in a row, then after waits of 1, 2, 4, 8, 16 plain calls (the first call's
    # reason names the optimizer state it made too: one more)
    assert fn.recordings <= 1 + REFUSALS_BEFORE_BACKOFF + 5, fn.recordings
    assert len(said) == 1, [str(w.message) for w in said]
    assert said[0].filename == __file__  # the line that calls the step
    assert "stopped recording" in str(said[0].message) and fn.why in str(said[0].message)
    traced_losses, traced_params, _ = _train(dev, lambda f: f)
    assert losses == traced_losses  # bitwise: the plain calls trace the same step
    for a, b in zip(params, traced_params):
        np.testing.assert_array_equal(a, b)
    eager_losses, eager_params, _ = _train(None, lambda f: f)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_step_that_stops_being_refused_replays_again_within_the_longest_wait(dev):
    fixed = 30  # calls before: refused; after: it could replay
    on_call, first = first_replay()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureWarning)
        losses, _, fn = _train(dev, ltorch.capture, calls=fixed + LONGEST_WAIT + 10, stash_until=fixed,
                               on_call=on_call)
    assert first, (fn.traces, fn.why)
    # waiting at most the current wait (<= LONGEST_WAIT), then two recordings that agree
    assert first[0] <= fixed + 16 + 2, first
    assert fn.replays == len(losses) - first[0]  # every call after that replays
    traced_losses, _, _ = _train(dev, lambda f: f, calls=len(losses), stash_until=fixed)
    np.testing.assert_allclose(losses, traced_losses, rtol=1e-6, atol=1e-7)


def test_a_python_number_that_changes_every_call_stops_recording_and_is_found_again_when_it_stops(dev):
    x = torch.arange(4.0).to(dev)
    got, said, step = number_changing_for_a_while(ltorch.capture, x, lambda out: out.cpu().tolist())
    assert got == [[v * (float(i) if i < 30 else 7.0) for v in range(4)] for i in range(60)]
    assert len(said) == 1 and "changed between calls" in str(said[0].message), [str(w.message) for w in said]
    assert step.replays > 0 and step.recordings < 20, (step.recordings, step.replays)
