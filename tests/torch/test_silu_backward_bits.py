"""``silu_backward`` gives eager's bits in float32, bfloat16 and float16
(hunt 32: 1,842 of 4,096 float32 gradients an ulp off, bfloat16 1,923,
float16 2,237). Eager's CPU kernel computes ``s = 1 / (1 + exp(-x))`` with
SLEEF's exp and ``(grad * s) * (1 + x * (1 - s))`` with the last factor one
fused multiply-add, the half types in float32 rounded once; lazycore reached
the op's composite pieces instead (``grad * (s * (1 + x * (1 - s)))``, per op
in the type, XLA's exp). Both operands are fed, so only the backward kernel
is compared. Float64 keeps XLA's exp (215 of 4,096 off SLEEF's float64 one)."""

import pytest
import torch

aten = torch.ops.aten

# 32 of them, so every element is in eager's vectorized loop (its scalar tail,
# the last elements short of 2 vectors, calls glibc's exp). Not -87.34 > x >
# -104: there ``s`` is subnormal in eager and flushed to 0 by XLA's CPU backend.
_SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 0.5, -0.5, 20.0, -20.0, 88.0,
            88.7, 89.0, 100.0, -87.0, -86.0, -85.0, -104.0, -104.5, -150.0, 1e4, -1e4, 3e38, -3e38, 1e-30,
            -1e-30, 1e-5, -1e-5, 40.0, -40.0, 2.0**-20]


def _operands(dtype):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4096, generator=g, dtype=torch.float64) * 6
    grad = torch.randn(4096, generator=g, dtype=torch.float64)
    special = torch.tensor(_SPECIAL, dtype=torch.float64)
    x = torch.cat([x, special, special])
    grad = torch.cat([grad, torch.ones(len(_SPECIAL), dtype=torch.float64), torch.full((len(_SPECIAL),), -3.0)])
    return grad.to(dtype), x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_silu_backward_is_eagers_bits(dev, no_fallback, dtype):
    grad, x = _operands(dtype)
    want = aten.silu_backward(grad, x)
    got = aten.silu_backward(grad.to(dev), x.to(dev)).cpu()
    same = (got == want) | (got.isnan() & want.isnan())
    assert int((~same).sum()) == 0, (x[~same][:8], got[~same][:8], want[~same][:8])


def test_silu_gradient_through_autograd_is_eagers_bits(dev, no_fallback):
    grad, x = _operands(torch.float32)
    xs = [x.clone().requires_grad_(), x.to(dev).requires_grad_()]
    outs = [torch.nn.functional.silu(v) for v in xs]
    for v, out in zip(xs, outs):
        out.backward(grad.to(out.device))
    got, want = xs[1].grad.cpu(), xs[0].grad
    same = (got == want) | (got.isnan() & want.isnan())
    assert int((~same).sum()) == 0


def test_silu_double_backward_still_differentiates(dev, no_fallback):
    """With a graph to record (a gradient penalty, a Hessian-vector product)
    the op's composite pieces run, as before: their derivative is eager's."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, generator=g, dtype=torch.float64)
    results = []
    for d in ("cpu", dev):
        v = x.to(d).requires_grad_()
        (gx,) = torch.autograd.grad(torch.nn.functional.silu(v).sum(), v, create_graph=True)
        (ggx,) = torch.autograd.grad((gx * gx).sum(), v)
        results.append((gx.detach().cpu(), ggx.cpu()))
    torch.testing.assert_close(results[1], results[0], rtol=1e-12, atol=1e-12)
