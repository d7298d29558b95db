"""A ``momentum`` that OneCycleLR or CyclicLR cycles (``cycle_momentum``) is an
input of SGD's and RMSprop's step, not a reason to trace it again: a whole
training step under ``lazycore.torch.capture`` replays from its third call,
with eager's parameters (lazycore.frontends.torch.optim). torch's step asks
the momentum in Python whether to take its momentum branch (SGD
``momentum != 0``, RMSprop ``momentum > 0``): a captured step guards that
answer, so a momentum that reaches 0 or starts there traces once more and runs
eager's branch (no buffer made, the one there left untouched), and a
recording is kept for each answer. CI runs each optimizer under one of the
two schedules, or, for two of them, only where the momentum crosses zero;
``LAZYCORE_TEST_FULL=1`` under both."""

import os
import sys

import numpy as np
import pytest
import torch

import lazycore.torch as ltorch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _cycling  # noqa: E402
from _bits import BY_HAND, FULL  # noqa: E402 (tests/ is on the path)

O = torch.optim
STEPS = 10

CASES = {
    "sgd": (O.SGD, dict(lr=0.1, momentum=0.9)),
    "sgd_nesterov_decay": (O.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "sgd_dampening_maximize_foreach": (O.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3, maximize=True,
                                                   foreach=True)),
    "sgd_fused": (O.SGD, dict(lr=0.1, momentum=0.9, fused=True)),
    "rmsprop": (O.RMSprop, dict(lr=0.01, momentum=0.5)),
    "rmsprop_centered_foreach": (O.RMSprop, dict(lr=0.01, momentum=0.5, centered=True, foreach=True)),
}


def _train(dev, make, kwargs, captured, schedule, dtype=torch.float32):
    """(losses, parameters, each step's momentum, the step function)."""
    *out, opt = _cycling.train(dev, make, kwargs, captured, schedule, STEPS,
                               lambda opt: opt.param_groups[0]["momentum"], dtype)
    assert all(type(g["momentum"]) is float for g in opt.param_groups)  # (the user's number, between steps)
    return out


def _one_cycle(opt):
    return O.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=STEPS + 1, cycle_momentum=True)


def _cyclic(opt):
    return O.lr_scheduler.CyclicLR(opt, base_lr=1e-3, max_lr=1e-2, step_size_up=3, cycle_momentum=True,
                                   base_momentum=0.8, max_momentum=0.95)


def _cases():
    schedules = [("onecycle", _one_cycle), ("cyclic", _cyclic)]
    if FULL:
        return [pytest.param(n, s, id=f"{n}-{i}") for n in CASES for i, s in schedules]
    # CI (these two): test_a_momentum_of_zero_runs_eagers_branch[<each>-crosses_zero] (a new momentum every captured call)
    by_hand = ("sgd_nesterov_decay", "sgd_dampening_maximize_foreach")
    return [pytest.param(n, schedules[k % 2][1], id=f"{n}-{schedules[k % 2][0]}", marks=BY_HAND if n in by_hand else ())
            for k, n in enumerate(CASES)]


@pytest.mark.parametrize("name,schedule", _cases())
def test_a_cycled_momentum_is_an_input_and_the_step_replays(dev, name, schedule):
    make, kwargs = CASES[name]
    eager = _train(torch.device("cpu"), make, kwargs, False, schedule)
    traced = _train(dev, make, kwargs, False, schedule)
    got = _train(dev, make, kwargs, True, schedule)
    assert len(set(eager[2])) > 3  # (the schedule does cycle the momentum)
    assert got[2] == eager[2]
    assert (got[3].traces, got[3].replays) == (2, STEPS - 2), got[3].why
    # a replay computes what tracing computes
    for u, v in zip(got[1], traced[1]):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6)
    # eager's float32 parameters, as far as float32 rounding lets two correct programs agree:
    # XLA contracts buf * momentum + grad into one fused multiply-add, which eager rounds
    # twice; eager's sqrt is not correctly rounded here and XLA's log is 1.1 ulp; RMSprop
    # divides by sqrt(v), which magnifies an ulp of a small gradient. So: within 1e-5 of
    # eager, or no further from the float64 run's parameters than twice eager's own distance
    truth = _train(torch.device("cpu"), make, kwargs, False, schedule, torch.float64)
    for u, v, t in zip(got[1], eager[1], truth[1]):
        if not np.allclose(u, v, rtol=1e-5, atol=1e-7):
            assert np.abs(u - t).max() <= 2 * np.abs(v - t).max(), (np.abs(u - t).max(), np.abs(v - t).max())
            np.testing.assert_allclose(u, v, rtol=1e-4)


MOMENTA = {
    # 0 in the middle: eager's step leaves the buffer as it is and updates by the gradient
    "crosses_zero": [0.9, 0.0, 0.5, 0.95, 0.0, 0.0, 0.7, 0.8, 0.85, 0.0, 0.6, 0.9],
    # 0 first: SGD makes its buffer at the first step whose momentum is not 0
    "starts_at_zero": [0.0, 0.0, 0.9, 0.0, 0.5, 0.95, 0.0, 0.0, 0.7, 0.8, 0.85, 0.6],
}


def _set_by_hand(dev, make, kwargs, captured, momenta):
    """Each step's parameters and momentum buffers, the optimizer given eager's
    gradients and, before each step, the next momentum and learning rate (as a
    scheduler sets them)."""
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(33, 7, generator=g).to(dev).requires_grad_(),
              torch.randn(9, generator=g).to(dev).requires_grad_()]
    opt = make(params, **kwargs)

    def step(*grads):
        for p, grad in zip(params, grads):
            p.grad = grad.clone()
        opt.step()

    fn = ltorch.capture(step) if captured else step
    seen = []
    for i, m in enumerate(momenta):
        for group in opt.param_groups:
            group["momentum"] = m
            group["lr"] = 0.1 * (i + 1) / len(momenta)
        g = torch.Generator().manual_seed(10 + i)
        fn(*[(torch.randn(p.shape, generator=g) * 10).to(dev) for p in params])
        if dev.type == "lazy":
            ltorch.mark_step()
        bufs = [opt.state[p]["momentum_buffer"].detach().cpu().clone() if "momentum_buffer" in opt.state[p]
                else None for p in params]
        seen.append(([p.detach().cpu().clone() for p in params], bufs))
    return seen, fn


@pytest.mark.parametrize("momenta", list(MOMENTA))
@pytest.mark.parametrize("name", ["sgd", "sgd_nesterov_decay", "sgd_dampening_maximize_foreach", "rmsprop"])
def test_a_momentum_of_zero_runs_eagers_branch(dev, name, momenta):
    make, kwargs = CASES[name]
    momenta = MOMENTA[momenta]
    if make is O.RMSprop and momenta[0] == 0:
        # eager's RMSprop makes its buffer only at a first step with momentum > 0, and a later
        # step with momentum > 0 then finds none: the same KeyError on both devices
        for d in (torch.device("cpu"), dev):
            with pytest.raises(KeyError, match="momentum_buffer"):
                _set_by_hand(d, make, kwargs, d.type == "lazy", momenta)
        return
    eager, _ = _set_by_hand(torch.device("cpu"), make, kwargs, False, momenta)
    got, fn = _set_by_hand(dev, make, kwargs, True, momenta)
    for i, ((p0, b0), (p1, b1)) in enumerate(zip(eager, got)):
        assert [b is None for b in b0] == [b is None for b in b1], f"step {i}: a buffer made (or not) as eager"
        for u, v in zip(p1 + [b for b in b1 if b is not None], p0 + [b for b in b0 if b is not None]):
            torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-5, msg=lambda m, i=i: f"step {i}: {m}")
        if i and momenta[i] == 0:
            # eager's branch: the buffer is not touched (bit for bit the one the step before left)
            for u, v in zip(b1, got[i - 1][1]):
                assert (u is None) == (v is None) and (u is None or torch.equal(u, v)), f"step {i}"
    # a recording for each answer of ``momentum != 0``, two traced calls each, replayed whenever
    # the answer comes again; and the calls that make the buffers (the first, or the first whose
    # momentum is not 0: the state a recording guards changes there)
    assert fn.traces <= (5 if momenta[0] else 7), (fn.traces, fn.why)
    assert fn.replays == len(momenta) - fn.traces


def test_a_cycle_down_to_zero_replays_on_both_sides(dev):
    """CyclicLR with ``base_momentum=0``: the momentum is 0 where the rate peaks."""
    def schedule(opt):
        return O.lr_scheduler.CyclicLR(opt, base_lr=1e-3, max_lr=1e-2, step_size_up=2, cycle_momentum=True,
                                       base_momentum=0.0, max_momentum=0.9)

    make, kwargs = CASES["sgd_nesterov_decay"]
    kwargs = dict(kwargs, nesterov=False)
    eager = _train(torch.device("cpu"), make, kwargs, False, schedule)
    got = _train(dev, make, kwargs, True, schedule)
    assert 0.0 in eager[2] and got[2] == eager[2]
    assert got[3].traces <= 4 and got[3].replays == STEPS - got[3].traces, (got[3].traces, got[3].why)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6)
    for u, v in zip(got[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-7)


class _DampedSGD(O.SGD):
    """A subclass with a step of its own that computes with the momentum in
    Python: its momentum stays a number (guarded by value), never a device
    value that Python arithmetic would turn into a constant of the program."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(p.grad * (1 - group["momentum"]) * group["lr"])


class _Momenta:
    """Sets the next momentum of a list at each ``step()``, as a scheduler does."""

    def __init__(self, opt, momenta):
        self.opt, self.momenta = opt, iter(momenta)

    def step(self):
        m = next(self.momenta)
        for group in self.opt.param_groups:
            group["momentum"] = m


def test_a_subclass_with_a_step_of_its_own_reads_the_momentum_as_a_number(dev):
    # (the same momentum at the two calls a recording compares, then another: a replay here
    # would compute with the number those two calls baked in)
    def schedule(opt):
        return _Momenta(opt, [0.9, 0.9, 0.5, 0.7, 0.7, 0.7, 0.3, 0.2, 0.6, 0.1])

    eager = _train(torch.device("cpu"), _DampedSGD, dict(lr=0.1, momentum=0.9), False, schedule)
    got = _train(dev, _DampedSGD, dict(lr=0.1, momentum=0.9), True, schedule)
    assert got[2] == eager[2]
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6)
    for u, v in zip(got[1], eager[1]):
        np.testing.assert_allclose(u, v, rtol=1e-6, atol=1e-7)
