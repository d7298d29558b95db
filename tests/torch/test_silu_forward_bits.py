"""``F.silu`` gives eager's CPU bits in float32, bfloat16 and float16 (issue 39:
11,995 of 49,152 float32 values of 2 * N(0, 1) were an ulp off). Eager's kernel
(``Activation.cpp``, ``silu_kernel``) computes ``x / (1 + exp(-x))``: SLEEF's
exp in its vector loop, glibc's ``expf`` in the scalar tail (the last elements
short of two vectors of each loop call: a row's end, a thread's chunk), the
half types in float32 rounded once. Float64 is not claimed."""

import pytest
import torch
import torch.nn.functional as F

_SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 0.5, -0.5, 20.0, -20.0, 88.0,
            88.7, 89.0, 100.0, -87.0, -88.0, -88.7, -89.0, -104.0, -150.0, 1e4, -1e4, 3e38, -3e38, 1e-30,
            -1e-30, 1e-5, -1e-5, 40.0, -40.0, 2.0**-20]


def _x(n, seed, dtype):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g, dtype=torch.float64) * 6).to(dtype)


def _off(got, want):
    same = (got == want) | (got.isnan() & want.isnan())
    return int((~same).sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(4096,), (64, 768), (33,), (17,), (5,), (3, 1000), (40001,)])
def test_silu_is_eagers_bits(dev, no_fallback, dtype, shape):
    n = 1
    for s in shape:
        n *= s
    x = _x(n, n, dtype)
    x[: len(_SPECIAL)] = torch.tensor(_SPECIAL[:n], dtype=torch.float64).to(dtype)  # (in the vector loop)
    x[-min(n, 8):] = torch.tensor(_SPECIAL[-min(n, 8):], dtype=torch.float64).to(dtype)  # (in the tail)
    x = x.reshape(shape)
    want = F.silu(x)
    got = F.silu(x.to(dev)).cpu()
    assert got.dtype == want.dtype
    assert _off(got, want) == 0, (x[got != want][:8], got[got != want][:8], want[got != want][:8])


def test_silu_of_a_strided_view_is_eagers_bits(dev, no_fallback):
    """A view whose rows are 17 elements apart in memory: eager's loop runs
    per row, 16 in the vector loop and one in the scalar tail."""
    x = _x(64 * 768, 7, torch.float32).reshape(64, 768)
    want = F.silu(x[:, :17])
    got = F.silu(x.to(dev)[:, :17]).cpu()
    assert _off(got, want) == 0


def test_silu_still_differentiates(dev, no_fallback):
    x = _x(100, 3, torch.float32)
    grads = []
    for d in ("cpu", dev):
        v = x.to(d).detach().requires_grad_()
        F.silu(v).sum().backward()
        grads.append(v.grad.cpu())
    assert _off(grads[1], grads[0]) == 0
