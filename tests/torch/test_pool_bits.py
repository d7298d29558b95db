"""Max and average pooling, forward and input gradient, are eager's CPU kernels' bits (issue 39).

Where windows overlap (stride under the kernel), an input element gets
several output gradients. Eager's pooling backward kernels add them into the
input gradient output position by output position, row-major; lazycore adds
one kernel offset's contributions at a time, so it takes the offsets last
first, which reads each input element's outputs in eager's order. Taken
first to last, 30-905 of 4,374-9,248 gradients a case were an ulp or more
off (float32, a 3x3 window of stride 2). Average pooling of float16 and
bfloat16 sums and divides in float32 and rounds once, as eager's kernels do
(summed in the type, 1-5% of the averages were off)."""

import pytest
import torch
import torch.nn.functional as F

from _bits import BY_HAND  # (tests/ is on the path)

CASES = {
    "max2d 3x3/2": lambda x: F.max_pool2d(x, 3, 2, 1),
    "max2d 3x3/1": lambda x: F.max_pool2d(x, 3, 1, 1),
    "max2d dilated": lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2),
    "max2d ceil": lambda x: F.max_pool2d(x, 3, 2, 0, ceil_mode=True),
    "max2d channels-last": lambda x: F.max_pool2d(x.contiguous(memory_format=torch.channels_last), 3, 2, 1),
    "max1d": lambda x: F.max_pool1d(x.flatten(2), 3, 2, 1),
    "max3d": lambda x: F.max_pool3d(x.unflatten(-1, (4, -1)), 3, 2, 1),
    "avg2d": lambda x: F.avg_pool2d(x, 3, 2, 1),
    "avg2d without padding in the count": lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    "avg2d ceil": lambda x: F.avg_pool2d(x, 3, 2, 0, ceil_mode=True),
    "avg2d channels-last": lambda x: F.avg_pool2d(x.contiguous(memory_format=torch.channels_last), 3, 2, 1),
    "avg1d": lambda x: F.avg_pool1d(x.flatten(2), 3, 2, 1),
    "avg3d": lambda x: F.avg_pool3d(x.unflatten(-1, (4, -1)), 3, 2, 1),
}


def _input(dtype):
    g = torch.Generator().manual_seed(0)
    shape = (3, 5, 16, 16)
    # half the values on a coarse grid: ties inside windows, which eager's max pooling breaks by the first
    coarse = (torch.randn(shape, generator=g) * 3).round(decimals=1)
    return torch.where(torch.rand(shape, generator=g) < 0.5, coarse, torch.randn(shape, generator=g)).to(dtype)


# CI: every case in float32. The cases that only shape the window (stride 1, dilation, ceil mode, padding left out
# of the count) run in float32 alone: the lowerings take every type's window alike. The others run in float64 and
# float16 too, and in bfloat16 but for max3d (float16 keeps the half types' path there: average pooling sums them
# in float32, max pooling compares them as they are)
_GEOMETRY = ("max2d 3x3/1", "max2d dilated", "max2d ceil", "avg2d without padding in the count", "avg2d ceil")
_BY_HAND_TYPES = {torch.float64: _GEOMETRY, torch.float16: _GEOMETRY, torch.bfloat16: _GEOMETRY + ("max3d",)}


@pytest.mark.parametrize("case,dtype", [
    pytest.param(case, dtype, id=f"{case}-{dtype}", marks=BY_HAND if case in _BY_HAND_TYPES.get(dtype, ()) else ())
    for dtype in [torch.float32, torch.float64, torch.bfloat16, torch.float16] for case in CASES])
def test_forward_and_input_gradient_are_eagers_bits(dev, no_fallback, dtype, case):
    f = CASES[case]
    x = _input(dtype).requires_grad_()
    try:
        y = f(x)
    except NotImplementedError:
        pytest.skip("eager's CPU has no kernel for this type (half avg_pool3d): no bits to compare")
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    y.backward(g)
    lx = x.detach().to(dev).requires_grad_()
    ly = f(lx)
    assert torch.equal(ly.detach().cpu(), y.detach())
    ly.backward(g.to(dev))
    got = lx.grad.cpu()
    assert got.dtype == x.grad.dtype
    off = (got != x.grad).sum().item()
    assert off == 0, f"{off} of {x.numel()} gradients differ from eager's"


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("max")])
def test_max_pooling_with_nan_is_eagers(dev, no_fallback, case):
    """A NaN in a window is its maximum (the last NaN, as eager's loop takes it), and gets the gradient."""
    f = CASES[case]
    x = _input(torch.float32)
    x[0, 0, 2, 3] = x[1, 2, 5, 5] = x[1, 2, 5, 6] = float("nan")
    x.requires_grad_()
    y = f(x)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    y.backward(g)
    lx = x.detach().to(dev).requires_grad_()
    ly = f(lx)
    ly.backward(g.to(dev))
    assert torch.equal(ly.detach().cpu().isnan(), y.detach().isnan())
    assert torch.equal(ly.detach().cpu().nan_to_num(), y.detach().nan_to_num())
    assert torch.equal(lx.grad.cpu(), x.grad)
