"""A learning rate a scheduler changes is a program input for SGD, RMSprop,
Adagrad, Adadelta and the fused variants (lazycore.frontends.torch.optim):
traced, a new rate compiles nothing; captured, it replays instead of tracing
again; either way the values are eager's, step by step, from a warm-up that
starts at lr 0 (and at lr 0 throughout, with a NaN and an infinite gradient)."""

import math

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics
from _bits import BY_HAND, FULL  # (tests/ is on the path)

O = torch.optim
STEPS = 8

OPTIMIZERS = {
    "sgd": lambda ps: O.SGD(ps, lr=0.1),
    "sgd_foreach": lambda ps: O.SGD(ps, lr=0.1, foreach=True),
    "sgd_nesterov_decay": lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2),
    "sgd_dampening_maximize": lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5, maximize=True),
    "rmsprop": lambda ps: O.RMSprop(ps, lr=0.01),
    "rmsprop_centered_momentum": lambda ps: O.RMSprop(ps, lr=0.01, centered=True, momentum=0.5, foreach=True),
    "adagrad": lambda ps: O.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=1e-2),
    "adadelta": lambda ps: O.Adadelta(ps, lr=1.0, weight_decay=1e-2),
    # fused=True: the unfused formulas run, within float tolerance of eager's fused CPU kernels
    "sgd_fused": lambda ps: O.SGD(ps, lr=0.1, fused=True),
    "sgd_momentum_fused": lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, fused=True),
    "adam_fused": lambda ps: O.Adam(ps, lr=0.01, fused=True),
    "adamw_amsgrad_fused": lambda ps: O.AdamW(ps, lr=0.01, amsgrad=True, weight_decay=0.01, fused=True),
    "adagrad_fused": lambda ps: O.Adagrad(ps, lr=0.1, fused=True),
}


def _warmup_cosine(opt):
    """Linear warm-up from 0 over two steps, then cosine decay: a new rate every step, 0 first."""
    return O.lr_scheduler.LambdaLR(
        opt, lambda s: s / 2 if s < 2 else 0.5 * (1 + math.cos(math.pi * (s - 2) / (STEPS - 2))))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)) for _ in range(STEPS)]


def _train(dev, make_opt, mode, make_sched=_warmup_cosine):
    """The parameters after each step (on the CPU), the compiles so far after each, and the step."""
    lazycore.cache.clear()
    metrics.reset()
    model = _model().to(dev)
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched else None

    def body(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    step = ltorch.capture(body) if mode == "captured" else body
    params, compiles = [], []
    for x, y in _batches():
        step(x.to(dev), y.to(dev))
        if sched is not None:
            sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        params.append([p.detach().cpu().clone() for p in model.parameters()])
        c = metrics.counters()
        compiles.append(c["compiles"] + c["disk_cache_hits"])
    return params, compiles, step


def _cases():
    """Each optimizer traced or captured, in turn (LAZYCORE_TEST_FULL=1: both)."""
    if FULL:
        return [(n, m) for n in OPTIMIZERS for m in ("traced", "captured")]
    # CI (adamw_amsgrad_fused): [adam_fused-captured] takes fused Adam's path (the unfused formulas)
    return [pytest.param(n, ("captured", "traced")[i % 2], marks=BY_HAND if n == "adamw_amsgrad_fused" else ())
            for i, n in enumerate(OPTIMIZERS)]


@pytest.mark.parametrize("name,mode", _cases())
def test_a_scheduled_rate_is_an_input_with_eager_values(dev, name, mode):
    eager = _train(torch.device("cpu"), OPTIMIZERS[name], "traced")[0]
    got, compiles, step = _train(dev, OPTIMIZERS[name], mode)
    for i, (a, b) in enumerate(zip(got, eager)):
        for u, v in zip(a, b):
            torch.testing.assert_close(u, v, msg=lambda m, i=i: f"step {i}: {m}")
    # the first step makes the optimizer's state; from the second on, one program for every rate
    assert compiles[-1] == compiles[1], compiles
    if mode == "captured":
        # SGD with momentum first updates its buffers on its second call: the third and fourth are compared
        assert step.why is None and step.replays >= STEPS - 4, (step.traces, step.replays, step.why)


@pytest.mark.parametrize("mode", ["traced", "captured"])
@pytest.mark.parametrize("name", ["sgd", "sgd_foreach", "sgd_fused"])
def test_sgds_scheduled_update_is_eagers_bit_for_bit(dev, name, mode):
    """Given the same gradients, SGD's update with the rate as a device
    operand, ``param + grad * float32(-lr)``, is eager's ``param.add_(grad,
    alpha=-lr)`` bit for bit (one fused multiply-add on both sides), at every
    rate of the schedule, 0 first."""
    results = []
    for d in (torch.device("cpu"), dev):
        g = torch.Generator().manual_seed(0)
        params = [torch.randn(33, 7, generator=g).to(d).requires_grad_(), torch.randn(9, generator=g).to(d)]
        params[1].requires_grad_()
        opt = OPTIMIZERS[name](params)
        sched = _warmup_cosine(opt)
        grads = [[torch.randn(p.shape, generator=g) * 10 for p in params] for _ in range(STEPS)]

        def body(*gs):
            for p, gr in zip(params, gs):
                p.grad = gr
            opt.step()

        step = ltorch.capture(body) if mode == "captured" and d.type == "lazy" else body
        seen = []
        for gs in grads:
            step(*[gr.to(d) for gr in gs])
            sched.step()
            if d.type == "lazy":
                ltorch.mark_step()
            seen.append([p.detach().cpu().clone() for p in params])
        results.append(seen)
    for i, (a, b) in enumerate(zip(*results)):
        for u, v in zip(a, b):
            assert torch.equal(u, v), f"step {i}: {(u - v).abs().max()}"
    if mode == "captured":
        assert step.replays >= STEPS - 3, (step.traces, step.why)


@pytest.mark.parametrize("name", ["sgd_nesterov_decay", "rmsprop_centered_momentum", "adagrad", "adadelta"])
def test_lr0_leaves_parameters_as_eager_does_with_nonfinite_gradients(dev, name):
    """At lr 0 throughout, a NaN or infinite gradient gives eager's NaN
    (0 times NaN or Inf is NaN), every other element stays what it was."""
    results = []
    for d in (torch.device("cpu"), dev):
        p = torch.tensor([1.0, -2.0, 3.0, 0.5]).to(d).requires_grad_()
        opt = OPTIMIZERS[name]([p])
        opt.param_groups[0]["lr"] = 0.0
        seen = []
        for i in range(3):
            grad = torch.tensor([0.0, 1.0, math.nan if i == 1 else 2.0, math.inf if i == 1 else -1.0])
            p.grad = grad.to(d)
            opt.step()
            if d.type == "lazy":
                ltorch.mark_step()
            seen.append(p.detach().cpu().clone())
        results.append(seen)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("barrier_first", [False, True])
def test_sgds_first_step_is_its_steady_program(dev, barrier_first):
    """Plain SGD makes no state: its first step, whose rate was made with the
    optimizer, is the same program as every later one with a new rate
    (benchmark 5's second row), whether or not a barrier ran between."""
    model = _model().to(dev)
    opt = O.SGD(model.parameters(), lr=0.1)
    if barrier_first:
        ltorch.mark_step()
    lazycore.cache.clear()
    metrics.reset()
    for i, (x, y) in enumerate(_batches()):
        opt.param_groups[0]["lr"] = 0.1 * (1 + 0.05 * i)
        opt.zero_grad()
        F.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
        opt.step()
        ltorch.mark_step()
    c = metrics.counters()
    assert c["compiles"] + c["disk_cache_hits"] == 1, c


def test_a_captured_first_call_makes_no_rate_of_its_own(dev):
    """The rate is made with the optimizer, not by the first captured call:
    that call keeps no tensor capture cannot see, and the calls after it
    replay (plain SGD: from the third)."""
    _, _, step = _train(dev, OPTIMIZERS["sgd"], "captured")
    assert (step.traces, step.replays, step.why) == (2, STEPS - 2, None)
