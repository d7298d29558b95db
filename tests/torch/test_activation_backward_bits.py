"""``sigmoid_backward`` and ``tanh_backward`` give eager's bits in every float
type (hunt 32: a bfloat16-autocast model's gradients through SiLU and
sigmoid differed from eager's by an ulp in a quarter to half of the elements;
float32's too: lazycore multiplied ``grad * (y * (1 - y))`` and ``grad * (1 -
y * y)`` where eager's kernels compute ``(grad * (1 - y)) * y`` and ``1 - y * y``
as one fused multiply-add, bfloat16 in float32 rounded once). Both
operands are fed, so only the backward kernel is compared."""

import pytest
import torch

_OPS = {"sigmoid": torch.ops.aten.sigmoid_backward.default, "tanh": torch.ops.aten.tanh_backward.default}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("op", list(_OPS))
def test_activation_backward_is_eagers_bits(dev, no_fallback, op, dtype):
    g = torch.Generator().manual_seed(3)
    y = torch.rand(4096, generator=g, dtype=torch.float64)
    y = (y if op == "sigmoid" else y * 2 - 1).to(dtype)  # sigmoid's outputs lie in (0, 1), tanh's in (-1, 1)
    grad = torch.randn(4096, generator=g, dtype=torch.float64).to(dtype)
    want = _OPS[op](grad, y)
    got = _OPS[op](grad.to(dev), y.to(dev)).cpu()
    assert int((got != want).sum()) == 0
