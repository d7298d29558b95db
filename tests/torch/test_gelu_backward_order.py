"""``gelu_backward`` in eager's CPU kernel's order. approximate='tanh' in
float32: eager computes ``inner = beta * fma(kappa, x**3, x)``, ``t =
tanh(inner)``, ``grad * ((0.5 * x * fma(-t, t, 1)) * (beta * fma(3 * kappa,
x**2, 1)) + 0.5 * (1 + t))`` (probed over the fused/unfused choices);
torch._decomp's form was 1,461 of 4,096 gradients off. What is left (27) is
eager's SLEEF tanh against lazycore's float64 one (near t = -1 eager's
saturates, lazycore's may not: up to 3.1e-6 absolute): a bound, not bits.
approximate='none' stays off in most float32 elements (eager's erf is
SLEEF's; XLA's is 5.5 ulp off): not asserted."""

import torch

aten = torch.ops.aten


def test_gelu_tanh_backward_is_eagers_but_for_tanh(dev, no_fallback):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4096, generator=g, dtype=torch.float64) * 3).float()
    grad = torch.randn(4096, generator=g, dtype=torch.float64).float()
    want = aten.gelu_backward(grad, x, approximate="tanh")
    got = aten.gelu_backward(grad.to(dev), x.to(dev), approximate="tanh").cpu()
    assert int((got != want).sum()) <= 40  # 27 measured; 1,461 in torch._decomp's order


def test_gelu_backward_special_values(dev, no_fallback):
    # (not large negative x: where eager's SLEEF tanh/erf saturate to -1 lazycore's may not, leaving a
    # gradient of ~1e-22 where eager's is 0)
    special = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e4, 3e38, 10.0, 1e-30, 1.0, -1.0, 2.0]
    x = torch.tensor(special * 3, dtype=torch.float32)
    grad = torch.ones_like(x)
    for approximate in ("tanh", "none"):
        want = aten.gelu_backward(grad, x, approximate=approximate)
        got = aten.gelu_backward(grad.to(dev), x.to(dev), approximate=approximate).cpu()
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-30, equal_nan=True)
