"""In-place ``lerp_`` with a tensor weight while a forward-AD level is active
(hunt 35: a PINN's ``jacfwd`` in one thread, Adam in another). torch's meta
``lerp_`` formats the weight, which reads the dual level and failed below
autograd with an internal assert; Adam's first moment is ``exp_avg.lerp_(grad, w)``."""

import pathlib
import sys

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import lazycore.torch as ltorch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from _bits import ieee_sqrt  # noqa: E402

DEV = "lazy"


def _adam_steps(device):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(5, 3).to(device))
    opt = torch.optim.Adam([p], lr=0.1)
    for _ in range(3):
        with fwAD.dual_level():
            (p.sin() * p).sum().backward()
            opt.step()
            opt.zero_grad()
        if device == DEV:
            ltorch.mark_step()
    return p.detach().cpu()


def test_adam_under_a_dual_level_is_eagers():
    with ieee_sqrt():  # eager's denominator as IEEE's root where MKL's here is not (_bits.eager_sqrt_is_ieee)
        want = _adam_steps("cpu")
    assert torch.equal(_adam_steps(DEV), want)


def test_lerp_in_place_keeps_eagers_shape_error():
    with fwAD.dual_level():
        for device in ("cpu", DEV):
            a = torch.zeros(3, device=device)
            with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
                a.lerp_(torch.zeros(2, 3, device=device), torch.tensor(0.5, device=device))


def test_lerp_in_place_values():
    torch.manual_seed(1)
    a, b, w = torch.randn(4, 6), torch.randn(6), torch.rand(4, 1)
    want = a.clone().lerp_(b, w)
    got = a.to(DEV).lerp_(b.to(DEV), w.to(DEV))
    assert torch.equal(got.cpu(), want)
