"""A learning rate given as a float32 tensor (``AdamW(lr=torch.tensor(1e-2))``)
gives eager's parameters on the lazy device.

Eager's step computes ``lr / bias_correction1`` (and NAdam's ``-lr * (1 - mu) /
(1 - mu_product)``) as tensor arithmetic in the rate's float32, each Python
number rounded to float32 first; the multi-tensor forms
(frontends/torch/optim_foreach.py) computed it in float64 and rounded once,
so every parameter element could move an ulp off eager's: 61-94 of 508
elements per step for AdamW and Adam, 118-148 for Adamax, 5-13 for NAdam
before; each 0 after (an element whose
denominator eager took from a square root that is not correctly rounded is
left out, as tests/torch/test_keep_roundings.py does)."""

import numpy
import pytest
import torch

import lazycore
import lazycore.torch as ltorch

OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(1e-2), weight_decay=0.1),
    "adam": lambda ps: torch.optim.Adam(ps, lr=torch.tensor(1e-2)),
    "adamax": lambda ps: torch.optim.Adamax(ps, lr=torch.tensor(2e-2)),
    "nadam": lambda ps: torch.optim.NAdam(ps, lr=torch.tensor(1e-2)),
}


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 24), torch.nn.Tanh(), torch.nn.Linear(24, 4))


def _sqrt_differs(state, name):
    """Where eager's own ``sqrt`` of the second moment (NAdam's: divided by its
    bias correction first) is not the correctly rounded square root."""
    v = state.get("exp_avg_sq")
    if v is None:
        return torch.zeros((), dtype=torch.bool)
    if name == "nadam":
        v = v.div(1 - 0.999 ** float(state["step"]))
    return v.sqrt() != torch.from_numpy(numpy.sqrt(v.numpy()))


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_tensor_learning_rate_steps_are_eagers(name):
    dev = ltorch.device()
    eager, lazy = _mlp(), _mlp().to(dev)
    opts = [OPTIMIZERS[name](m.parameters()) for m in (eager, lazy)]
    off = {p: torch.zeros(p.shape, dtype=torch.bool) for p in eager.parameters()}
    for step in range(3):
        g = torch.Generator().manual_seed(step)
        for p, lp in zip(eager.parameters(), lazy.parameters()):
            p.grad = torch.randn(p.shape, generator=g)
            lp.grad = p.grad.to(dev)
        for opt in opts:
            opt.step()
        lazycore.mark_step()
        wrong = 0
        for p, lp in zip(eager.parameters(), lazy.parameters()):
            off[p] |= _sqrt_differs(opts[0].state[p], name)
            got, want = lp.detach().cpu(), p.detach()
            wrong += int((got != want)[~off[p]].sum())
        assert wrong == 0, (step, wrong)
