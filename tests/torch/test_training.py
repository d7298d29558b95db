"""Unmodified PyTorch training loops on the lazy device: parity with eager, and compile once."""

import pytest
import torch
from torch import nn

import lazycore
import lazycore.torch as ltorch
from _bits import BY_HAND  # (tests/ is on the path)
from lazycore.observe import metrics


def mlp():
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 5))


def data(n=48):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 20, generator=g), torch.randint(0, 5, (n,), generator=g)


def train(device, make_model, make_opt, x, y, steps=20, lr_schedule=None):
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = make_opt(model.parameters())
    x, y = x.to(device), y.to(device)
    losses = []
    for i in range(steps):
        if lr_schedule is not None:
            for group in opt.param_groups:
                group["lr"] = lr_schedule(i)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if device == "cpu":
            opt.step()
        else:
            ltorch.optimizer_step(opt)
        losses.append(loss.item())
    return losses


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05),
    "sgd-momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01),
}


# CI (adam): test_later_steps_recall_the_barrier_walk trains the MLP with Adam against eager's losses
@pytest.mark.parametrize("opt", [pytest.param(o, marks=BY_HAND if o in ("adamw", "sgd-momentum", "adam") else [])
                                 for o in OPTIMIZERS])
def test_mlp_matches_eager(dev, opt, clean_runtime):
    x, y = data()
    eager = train("cpu", mlp, OPTIMIZERS[opt], x, y)
    lazy = train(dev, mlp, OPTIMIZERS[opt], x, y)
    for e, l in zip(eager, lazy):
        assert abs(e - l) <= 1e-4 * abs(e), (eager, lazy)
    assert metrics.fallbacks() == {}


# CI: test_changing_the_learning_rate_does_not_recompile takes the same path (a warmed-up loop compiles nothing)
@BY_HAND
def test_static_training_loop_compiles_once(dev, clean_runtime):
    x, y = data()
    train(dev, mlp, OPTIMIZERS["adam"], x, y, steps=2)  # warm-up: the first step and a later one
    metrics.reset()
    train(dev, mlp, OPTIMIZERS["adam"], x, y, steps=8)
    c = metrics.counters()
    # the first step of a fresh model differs (no optimizer state yet); every later one is a hit
    assert c["compiles"] == 0, c
    assert c["cache_hits"] >= 8


def test_changing_the_learning_rate_does_not_recompile(dev, clean_runtime):
    x, y = data()
    sgd = OPTIMIZERS["sgd-momentum"]
    train(dev, mlp, sgd, x, y, steps=3)
    metrics.reset()
    lazy = train(dev, mlp, sgd, x, y, steps=6, lr_schedule=lambda i: 0.05 / (i + 1.5))
    assert metrics.counters()["compiles"] == 0, metrics.counters()
    eager = train("cpu", mlp, sgd, x, y, steps=6, lr_schedule=lambda i: 0.05 / (i + 1.5))
    for e, l in zip(eager, lazy):
        assert abs(e - l) <= 1e-4 * abs(e)


def test_no_grad_and_eval(dev):
    torch.manual_seed(0)
    model = mlp()
    x, _ = data()
    with torch.no_grad():
        want = model(x)
        got = model.to(dev)(x.to(dev))
    assert not got.requires_grad
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5),
    )


def images(n=16):
    g = torch.Generator().manual_seed(2)
    return torch.randn(n, 1, 12, 12, generator=g), torch.randint(0, 5, (n,), generator=g)


# CI (sgd-momentum): [adam] takes the CNN's path; test_changing_the_learning_rate_does_not_recompile SGD with momentum's
@pytest.mark.parametrize("opt", [pytest.param("sgd-momentum", marks=BY_HAND), "adam"])
def test_cnn_matches_eager(dev, opt, clean_runtime):
    x, y = images()
    eager = train("cpu", cnn, OPTIMIZERS[opt], x, y)
    lazy = train(dev, cnn, OPTIMIZERS[opt], x, y)
    for e, l in zip(eager, lazy):
        assert abs(e - l) <= 1e-4 * abs(e), (eager, lazy)
    assert metrics.fallbacks() == {}
    # one program for the first step, one for every later step
    assert metrics.counters()["compiles"] == 2, metrics.counters()


@pytest.mark.parametrize("replay_optimizer", [False, True])
def test_later_steps_recall_the_barrier_walk(dev, clean_runtime, monkeypatch, replay_optimizer):
    """From the third step on, a training step's barrier finds its walk by
    the step log (lazycore.stepplans) and makes none; losses stay eager's.
    With the optimizer's step replayed (from the fourth step) as well: Adam's
    numbers that vary (the learning rate, ``betas[0]``) are inputs of the
    recorded trace, not constants a first replay would reuse as old nodes
    (which the log would number after the step's own, and walk once more)."""
    from lazycore.runtime import barrier

    monkeypatch.setattr(lazycore.config.settings, "replay_optimizer", replay_optimizer)
    walked = []
    real = barrier.Walk

    class Counted(real):
        def __init__(self, outputs):
            walked.append(len(losses_so_far))
            super().__init__(outputs)

    losses_so_far = []
    monkeypatch.setattr(barrier, "Walk", Counted)
    x, y = data()
    schedule = lambda i: 0.01 / (1 + 0.3 * i)  # new scalars every step
    torch.manual_seed(0)
    model = mlp().to(dev)
    opt = OPTIMIZERS["adam"](model.parameters())
    xd, yd = x.to(dev), y.to(dev)
    for i in range(8):
        for group in opt.param_groups:
            group["lr"] = schedule(i)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xd), yd)
        loss.backward()
        ltorch.optimizer_step(opt)
        losses_so_far.append(loss.item())
    assert walked == [0, 1], walked
    eager = train("cpu", mlp, OPTIMIZERS["adam"], x, y, steps=8, lr_schedule=schedule)
    for e, l in zip(eager, losses_so_far):
        assert abs(e - l) <= 1e-4 * abs(e), (eager, losses_so_far)
