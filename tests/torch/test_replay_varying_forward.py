"""A replayed step whose inputs were made by a different graph each call (issue 39).

A training loop whose forward makes a different number of ops from step to
step (random teacher forcing in a seq2seq decoder, an early exit) hands the
optimizer gradients made by a different backward graph each step. The
optimizer's step is the same function of them every time, so its replay
(:mod:`lazycore.frontends.torch.optim_replay`) and the clipping's must
record from their second traced call as they do for a fixed-length forward:
what decides whether two traced calls agree is what they did, not how their
inputs were made (a recording's key used to hold each node's digest, which
hashes the inputs' whole history). The values stay eager's.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.frontends.torch import optim_replay
from lazycore.trace.capture import CaptureWarning

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter")

EXTRAS = [3, 0, 2, 4, 1, 3, 0, 2]
"""Ops the forward adds at each step: no two traced steps in a row make one graph."""

OPTIMIZERS = {
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
}


def _train(device, make_opt, extras, clip=False):
    """(losses, parameters, the optimizer) after one step per entry of ``extras``."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(device)
    opt = make_opt(model.parameters())
    x = torch.randn(5, 4).to(device)
    losses = []
    for e in extras:
        h = model(x)
        for _ in range(e):
            h = h.relu() * 1.5
        loss = h.sum()
        opt.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.detach())
        if device != "cpu":
            ltorch.mark_step()
    return [float(v) for v in losses], [p.detach().cpu() for p in model.parameters()], opt


def _counts(opt):
    captured = optim_replay._REPLAYED[opt].captured
    return captured.traces, captured.replays


# CI (adam): test_the_clipping_replays_whatever_the_forward_length asserts Adam's same counts over the same forwards
@pytest.mark.parametrize("name", [pytest.param("adam", marks=BY_HAND), "sgd_momentum"])
def test_the_step_replays_from_its_third_call_whatever_the_forward_length(name):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        _, _, opt = _train(ltorch.device(), OPTIMIZERS[name], EXTRAS)
    # the first step runs plainly (it makes the state), the next two are traced and agree
    assert _counts(opt) == (2, len(EXTRAS) - 3), optim_replay._REPLAYED[opt].captured.why


# CI: test_the_clipping_replays_whatever_the_forward_length takes the same path (Adam's (2, 5) over a varying forward)
@BY_HAND
def test_a_varying_forward_replays_as_a_fixed_one_does():
    _, _, fixed = _train(ltorch.device(), OPTIMIZERS["adam"], [2] * len(EXTRAS))
    _, _, varying = _train(ltorch.device(), OPTIMIZERS["adam"], EXTRAS)
    assert _counts(varying) == _counts(fixed)


def test_the_clipping_replays_whatever_the_forward_length():
    total = torch.nn.utils.clip_grad._get_total_norm.replayed.captured
    scaling = torch.nn.utils.clip_grad._clip_grads_with_norm_.replayed.captured
    before = total.replays, scaling.replays
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        _, _, opt = _train(ltorch.device(), OPTIMIZERS["adam"], EXTRAS, clip=True)
    assert _counts(opt) == (2, len(EXTRAS) - 3)
    # traced at most at the first three steps, replayed at the rest
    assert total.replays - before[0] >= len(EXTRAS) - 3
    assert scaling.replays - before[1] >= len(EXTRAS) - 3


# CI (adam): [sgd_momentum] takes the same path (the replays over a varying forward against eager's values)
@pytest.mark.parametrize("name", [pytest.param("adam", marks=BY_HAND), "sgd_momentum"])
def test_the_replayed_steps_give_eager_values(name):
    eager_losses, eager_params, _ = _train("cpu", OPTIMIZERS[name], EXTRAS, clip=True)
    losses, params, opt = _train(ltorch.device(), OPTIMIZERS[name], EXTRAS, clip=True)
    assert _counts(opt)[1] == len(EXTRAS) - 3
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=1e-5, atol=1e-6)
    for p, e in zip(params, eager_params):
        torch.testing.assert_close(p, e, rtol=1e-5, atol=1e-6)


def test_a_captured_function_replays_on_inputs_made_by_other_graphs():
    """The same at the core: ``capture``'s recordings agree on what the call did."""
    @ltorch.capture
    def f(x, w):
        return (x * w + 1.0).tanh().sum(0)

    dev = ltorch.device()
    a, w = torch.randn(3, 4).to(dev), torch.randn(4).to(dev)
    makers = [lambda t: t.relu(), lambda t: t.exp() - 1.0, lambda t: t.sin().cos(), lambda t: t * 2.0,
              lambda t: t.abs(), lambda t: -t]
    got, want = [], []
    for make in makers:
        x = make(a)
        got.append(f(x, w))
        want.append((make(a.cpu()) * w.cpu() + 1.0).tanh().sum(0))
    ltorch.mark_step()
    assert (f.traces, f.replays) == (2, len(makers) - 2), f.why
    for g, e in zip(got, want):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-6, atol=1e-6)
