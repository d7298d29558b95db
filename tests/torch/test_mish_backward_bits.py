"""``mish_backward`` in bfloat16 gives eager's bits (2,311 of
4,096 bfloat16 gradients were off: lazycore ran the op's composite pieces,
each rounded to bfloat16, where eager's CPU kernel computes ``grad * (t + (x
* s) * (1 - t * t))`` in float32 with both multiply-adds fused and rounds
once). Float32 stays off in 297 of 4,096 (eager's SLEEF tanh and log1p are
not reproduced; 1,473 before), float16 in 1: not asserted here."""

import pytest
import torch

aten = torch.ops.aten

# 32 of them: every element is in eager's vectorized loop (see test_silu_backward_bits)
_SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 0.5, -0.5, 20.0, -20.0, 40.0,
            -40.0, 80.0, -80.0, 1e4, -1e4, 3e38, -3e38, 1e-3, -1e-3, 2.0, -2.0, 5.0, -5.0, 10.0, -10.0, 0.25,
            -0.25, 3.0, -3.0, 1e-30]


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_mish_backward_is_eagers_bits(dev, no_fallback, dtype):
    g = torch.Generator().manual_seed(3)
    special = torch.tensor(_SPECIAL, dtype=torch.float64)
    x = torch.cat([torch.randn(4096, generator=g, dtype=torch.float64) * 3, special]).to(dtype)
    grad = torch.cat([torch.randn(4096, generator=g, dtype=torch.float64), -special.sign() - 0.5]).to(dtype)
    want = aten.mish_backward(grad, x)
    got = aten.mish_backward(grad.to(dev), x.to(dev)).cpu()
    same = (got == want) | (got.isnan() & want.isnan())
    assert int((~same).sum()) == 0, (x[~same][:8], got[~same][:8], want[~same][:8])


def test_mish_double_backward_still_differentiates(dev, no_fallback):
    x = torch.randn(64, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    results = []
    for d in ("cpu", dev):
        v = x.to(d).requires_grad_()
        (gx,) = torch.autograd.grad(torch.nn.functional.mish(v).sum(), v, create_graph=True)
        (ggx,) = torch.autograd.grad((gx * gx).sum(), v)
        results.append((gx.detach().cpu(), ggx.cpu()))
    torch.testing.assert_close(results[1], results[0], rtol=1e-12, atol=1e-12)
