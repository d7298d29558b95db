"""A scheduler that cycles ``betas[0]`` (OneCycleLR and CyclicLR with
``cycle_momentum``) changes an input of the captured step, not the step:
Adamax, NAdam and RAdam read their beta1 as a device value, as Adam and AdamW
do, so a whole training step under ``lazycore.torch.capture`` replays from
its third call, with eager's parameters (lazycore.frontends.torch.optim)."""

import os
import sys

import numpy as np
import pytest
import torch

import lazycore.torch as ltorch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _cycling  # noqa: E402

O = torch.optim

CASES = {
    "adamax": (O.Adamax, dict(lr=2e-3, weight_decay=0.01)),
    "nadam": (O.NAdam, dict(lr=2e-3, weight_decay=0.01)),
    "nadam_decoupled": (O.NAdam, dict(lr=2e-3, weight_decay=0.01, decoupled_weight_decay=True)),
    "radam": (O.RAdam, dict(lr=2e-3, weight_decay=0.01)),
    "radam_decoupled": (O.RAdam, dict(lr=2e-3, weight_decay=0.01, decoupled_weight_decay=True)),
    "adamw": (O.AdamW, dict(lr=2e-3, weight_decay=0.01)),
}

STEPS = 10


def _train(dev, make, kwargs, captured, schedule):
    """(losses, parameters, each step's beta1, the step function)."""
    return _cycling.train(dev, make, kwargs, captured, schedule, STEPS, lambda opt: opt.param_groups[0]["betas"][0])[:4]


def _one_cycle(opt):
    # RAdam's rho_t passes 5 at its sixth step: both of its updates are taken within the run
    return O.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=STEPS + 1, cycle_momentum=True)


def _cyclic(opt):
    return O.lr_scheduler.CyclicLR(opt, base_lr=1e-3, max_lr=1e-2, step_size_up=3, cycle_momentum=True,
                                   base_momentum=0.8, max_momentum=0.95)


@pytest.mark.parametrize("schedule", [_one_cycle, _cyclic], ids=["onecycle", "cyclic"])
@pytest.mark.parametrize("name", list(CASES))
def test_a_cycled_beta1_is_an_input_and_the_step_replays(dev, name, schedule):
    make, kwargs = CASES[name]
    eager = _train(torch.device("cpu"), make, kwargs, False, schedule)
    traced = _train(dev, make, kwargs, False, schedule)
    got = _train(dev, make, kwargs, True, schedule)
    assert len(set(eager[2])) > 3  # (the schedule does cycle beta1)
    assert got[2] == eager[2]
    assert (got[3].traces, got[3].replays) == (2, STEPS - 2), got[3].why
    # a replay computes what tracing computes
    for u, v in zip(got[1], traced[1]):
        np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-6)
    for u, v in zip(got[1], eager[1]):
        # (eager's sqrt, not correctly rounded, and its fused addcmul_ round an ulp otherwise)
        np.testing.assert_allclose(u, v, rtol=2e-6, atol=1e-7)


def _given_gradients(dev, make, kwargs, captured):
    """Each step's parameters, the optimizer given the same gradients as eager's."""
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(4, 3, generator=g).to(dev).requires_grad_(), torch.randn(5, generator=g).to(dev)
              .requires_grad_()]
    opt = make(params, **kwargs)
    sched = _one_cycle(opt)

    def step(*grads):
        for p, grad in zip(params, grads):
            p.grad = grad
        opt.step()

    fn = ltorch.capture(step) if captured else step
    seen = []
    for i in range(STEPS):
        g = torch.Generator().manual_seed(10 + i)
        fn(*[torch.randn(p.shape, generator=g).to(dev) for p in params])
        sched.step()
        if dev.type == "lazy":
            ltorch.mark_step()
        seen.append([p.detach().cpu().clone() for p in params])
    return seen, fn


def test_adamax_is_eager_bit_for_bit_under_a_cycled_beta1(dev):
    """Adamax's formulas reach no op eager's CPU kernels round otherwise: given
    eager's gradients, every step's parameters are eager's bit for bit."""
    make, kwargs = CASES["adamax"]
    eager, _ = _given_gradients(torch.device("cpu"), make, kwargs, False)
    got, fn = _given_gradients(dev, make, kwargs, True)
    assert fn.replays == STEPS - 2, fn.why
    for u, v in zip(got, eager):
        for a, b in zip(u, v):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
