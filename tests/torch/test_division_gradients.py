"""Division's gradients are eager's (issue 39): eager's autograd runs
``div_tensor_other_backward``, ``-grad * ((self / other) / other)``, as aten ops
on lazy tensors, and XLA's algebraic simplifier rewrote that divide of a divide
to ``self / (other * other)``, rounded otherwise: 368 of 1,024 float32
gradients of a 64 x 16 ``x / y`` with respect to ``y`` were off eager's.
``lazy-keep-roundings`` fences the operands XLA would rewrite a divide around
(passes/keep_roundings.py)."""

import pytest
import torch

import lazycore.torch as ltorch

FLOATS = [torch.float32, torch.float64]


def _data(dtype, *shapes):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shapes[0], generator=g, dtype=dtype)
    return [x] + [torch.rand(s, generator=g, dtype=dtype) + 0.5 for s in shapes[1:]]


def _grads(f, args, dev):
    eager = [a.clone().requires_grad_(True) for a in args]
    f(*eager).sum().backward()
    lazy = [a.to(dev).requires_grad_(True) for a in args]
    f(*lazy).sum().backward()
    return [e.grad for e in eager], [l.grad.cpu() for l in lazy]


@pytest.mark.parametrize("dtype", FLOATS)
def test_the_divisor_gradient_is_eager_s(dtype):
    want, got = _grads(lambda x, y: x / y, _data(dtype, (64, 16), (64, 16)), ltorch.device())
    for w, g in zip(want, got):
        assert torch.equal(w, g), int((w != g).sum())


QUOTIENTS = {
    "(x/y)/y": lambda x, y, z: (x / y) / y,
    "(x/y)/z": lambda x, y, z: (x / y) / z,
    "x/(y/z)": lambda x, y, z: x / (y / z),
    "(x/y)/(z/y)": lambda x, y, z: (x / y) / (z / y),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(QUOTIENTS))
def test_a_divide_of_a_divide_is_eager_s(dtype, name):
    args = _data(dtype, (64, 16), (64, 16), (64, 16))
    want = QUOTIENTS[name](*args)
    got = QUOTIENTS[name](*[a.to(ltorch.device()) for a in args]).cpu()
    assert torch.equal(want, got), int((want != got).sum())
