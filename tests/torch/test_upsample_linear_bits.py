"""``F.interpolate``'s linear, bilinear and trilinear forward (float32, float64) is eager's
CPU kernel's bits (issue 39): its fused multiply-adds (the source index, each axis of the
generic kernel, the four corners of the 2d channels-last kernel, in its vector order over
whole 32-byte vectors of channels and its scalar order over the rest). torch._decomp's
gathers and lerps differed in 6,568 of 10,672 values of a 16x16 -> 23x29 resize."""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.skipif(not torch.backends.cpu.get_cpu_capability().startswith("AVX"),
                                reason="eager's kernels built without fused multiply-adds: not matched")

MODE = {3: "linear", 4: "bilinear", 5: "trilinear"}

CASES = [
    # (input shape, size, scale_factor, align_corners, channels_last): which kernel in the comment
    ((2, 8, 16, 16), (23, 29), None, False, False),  # channels-last kernel (out h + w <= 128), whole vectors
    ((2, 20, 16, 16), None, (1.7, 2.3), False, False),  # channels-last: 16 channels in vectors, 4 scalar
    ((2, 3, 9, 9), (5, 7), None, True, False),  # channels-last: scalar order only
    ((1, 3, 40, 40), (100, 90), None, False, False),  # generic kernel
    ((1, 5, 20, 30), None, (2.5, 3.25), True, False),  # generic
    ((1, 6, 40, 40), (100, 90), None, False, True),  # a channels-last input: channels-last kernel
    ((2, 4, 10), (23,), None, False, False),  # linear
    ((2, 4, 10), None, (1.7,), True, False),
    ((1, 2, 5, 6, 7), (9, 4, 11), None, False, False),  # trilinear
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("shape,size,scale,align_corners,channels_last", CASES, ids=lambda v: str(v))
def test_forward_is_eagers_bits(dev, no_fallback, dtype, shape, size, scale, align_corners, channels_last):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)

    def f(t):
        return F.interpolate(t, size=size, scale_factor=scale, mode=MODE[len(shape)], align_corners=align_corners)

    want = f(x)
    got = f(x.to(dev)).cpu()
    assert got.stride() == want.stride()
    assert torch.equal(got, want), f"{int((got != want).sum())} of {want.numel()} values differ"


def test_infinity_spreads_as_eagers(dev, no_fallback):
    # a weight of 0 times an infinity is NaN in eager's sums too (no value is skipped)
    x = torch.randn(1, 2, 6, 6, generator=torch.Generator().manual_seed(1))
    x[0, 0, 2, 3] = float("inf")
    x[0, 1, 4, 1] = float("-inf")
    for size in ((11, 6), (90, 70)):
        want = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
        got = F.interpolate(x.to(dev), size=size, mode="bilinear", align_corners=False).cpu()
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
