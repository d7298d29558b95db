"""Automatic step barriers in torch (lazycore.runtime.autostep): a training loop
without mark_step gets one program per step, cut after optimizer.step(), with
the compiles, executions and program outputs of the hand-placed loop."""

import numpy as np
import pytest
import torch

import lazycore as lc
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.ir import events
from lazycore.ir.config import override
from lazycore.observe import metrics

pytestmark = pytest.mark.usefixtures("clean_runtime", "fresh_cutter")


STEPS = 6


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)


def _train(device, how, make_opt=lambda ps: torch.optim.Adam(ps, lr=1e-2)):
    """Train from the same start; ``how``: "eager" (CPU), "hand" (mark_step
    after each step), "auto" (no mark_step). Returns (losses, params, per-step
    executions, barriers' (nodes, outputs, params), compiles)."""
    model = _model().to(device)
    opt = make_opt(model.parameters())
    x, y = (t.to(device) for t in _data())
    lazy = how != "eager"
    if lazy:
        lc.mark_step(wait=True)
        lc.cache.clear()
        metrics.reset()
    losses, per_step = [], []
    for _ in range(STEPS):  # (a bare loop: the step is not the optimizer's call)
        e0 = metrics.counters()["executions"]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if how == "hand":
            ltorch.mark_step()
        per_step.append(metrics.counters()["executions"] - e0)
        losses.append(loss.detach())
    losses = [float(v.cpu()) for v in losses]
    graphs = list(events.EVENTS.graphs)
    compiles = metrics.counters()["compiles"]
    params = [p.detach().cpu().numpy() for p in model.parameters()]
    return losses, params, per_step, graphs, compiles


# CI (adam): [sgd_momentum] takes the same path (the cut at optimizer.step())
@pytest.mark.parametrize("optimizer", [pytest.param("adam", marks=BY_HAND), "sgd_momentum"])
def test_a_loop_without_mark_step_is_cut_after_each_optimizer_step(dev, optimizer):
    make = ((lambda ps: torch.optim.Adam(ps, lr=1e-2)) if optimizer == "adam"
            else (lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9)))
    eager = _train("cpu", "eager", make)
    hand = _train(dev, "hand", make)
    auto = _train(dev, "auto", make)
    assert hand[2] == [1] * STEPS
    # one program per step; the first starts when the second step's forward
    # reads the parameters (the loop might mark its steps itself), every later
    # one at its optimizer.step()
    assert auto[2] == [0, 2] + [1] * (STEPS - 2)
    assert auto[4] == hand[4]  # the same compiles
    # the same programs: nodes, outputs (what stays alive in memory) and inputs
    # per barrier; the first one's gradients were dropped by zero_grad() before it ran
    assert auto[3][1:] == hand[3][1:]
    assert auto[3][0][0] == hand[3][0][0] and auto[3][0][1] < hand[3][0][1]
    np.testing.assert_allclose(auto[0], eager[0], rtol=1e-5, atol=1e-6)
    for a, h, e in zip(auto[1], hand[1], eager[1]):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(a, h)


def test_work_after_the_optimizer_step_joins_its_step_and_own_marks_keep_their_programs(dev):
    """A loss logged after opt.step() belongs to the step (no second program),
    with or without a mark_step after it (as examples/debug_recompiles.py does)."""
    for mark in (False, True):
        model = _model().to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = (t.to(dev) for t in _data())
        total = torch.zeros((), device=dev)
        lc.mark_step(wait=True)
        e0 = metrics.counters()["executions"]
        for _ in range(4):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total = total + loss.detach()
            if mark:
                ltorch.mark_step()
        total.item()
        assert metrics.counters()["executions"] - e0 == 4 + (not mark)  # (+ the read's, for the sum)


def test_switched_off_the_loop_is_one_graph(dev):
    with override(auto_barrier=False):
        auto = _train(dev, "auto")
    assert auto[2] == [0] * STEPS
    assert len(auto[3]) == 1  # one program, at the first read


def test_optimizer_step_marks_once(dev):
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (t.to(dev) for t in _data())
    lc.mark_step(wait=True)
    for barrier in (True, False):
        e0 = metrics.counters()["executions"]
        torch.nn.functional.mse_loss(model(x), y).backward()
        ltorch.optimizer_step(opt, barrier=barrier)
        assert metrics.counters()["executions"] - e0 == int(barrier)
    lc.mark_step()


def test_a_cpu_optimizer_cuts_nothing(dev):
    w = torch.zeros(4, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    a = torch.ones(4, device=dev) * 3
    lc.mark_step(wait=True)
    b = a * 2  # pending
    (w * 2).sum().backward()
    e0 = metrics.counters()["executions"]
    opt.step()
    assert metrics.counters()["executions"] == e0
    np.testing.assert_array_equal(b.cpu().numpy(), np.full(4, 6.0, np.float32))


def test_a_captured_step_is_not_cut_and_replays(dev):
    model = _model().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (t.to(dev) for t in _data())

    @ltorch.capture
    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    lc.mark_step(wait=True)
    for _ in range(5):
        step(x, y)
        ltorch.mark_step()
    assert step.why is None and step.replays >= 2
