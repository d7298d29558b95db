"""A captured step that adds a step closure (issue 43 item 2): a replay runs
no Python, so before this the closure ran only after the two traced calls
and every replayed step's was silently lost (2 of 5 losses logged). The
recording now refuses such a step, naming the closure and what to do, so
every call is traced and every closure runs with its own step's values."""

from __future__ import annotations

import warnings

import numpy as np
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as ltorch

SEEN: list = []
"""What the closures logged (a module's list, as a training script's log: the step reads no changing local)."""


def _log(v):
    SEEN.append(v.item() if isinstance(v, torch.Tensor) else float(np.asarray(v)[0]))


def test_a_torch_captured_step_that_logs_through_a_closure_logs_every_step():
    dev = ltorch.device()

    def make():
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    x = torch.randn(8, 4)
    model, opt = make()
    want = []
    for _ in range(5):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        want.append(loss.item())

    model, opt = make()
    model.to(dev)
    xl = x.to(dev)
    SEEN.clear()

    @ltorch.capture
    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        ltorch.add_step_closure(_log, (loss,))
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lazycore.capture.CaptureWarning)
        for _ in range(5):
            step(xl)
            ltorch.mark_step()
    np.testing.assert_allclose(SEEN, want, rtol=1e-5)
    assert step.replays == 0 and "step closure" in step.why, step.why


def test_a_numpy_captured_step_that_logs_through_a_closure_logs_every_step():
    SEEN.clear()

    @lnp.capture
    def step(w):
        w = w * 0.5 + 1.0
        lazycore.add_step_closure(_log, (w,))
        return w

    w = lnp.asarray(np.zeros(2, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", lazycore.capture.CaptureWarning)
        for _ in range(5):
            w = step(w)
            lazycore.mark_step()
    assert SEEN == [1.0, 1.5, 1.75, 1.875, 1.9375]
    assert step.replays == 0 and "step closure" in step.why, step.why


def test_a_closure_added_after_the_captured_call_still_replays():
    SEEN.clear()

    @lnp.capture
    def step(w):
        return w * 0.5 + 1.0

    w = lnp.asarray(np.zeros(2, np.float32))
    for _ in range(5):
        w = step(w)
        lazycore.add_step_closure(_log, (w,))
        lazycore.mark_step()
    assert SEEN == [1.0, 1.5, 1.75, 1.875, 1.9375]
    assert (step.traces, step.replays) == (2, 3), step.why
