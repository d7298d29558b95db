"""uint8 ``F.interpolate`` (bilinear, bicubic) as eager's fixed-point kernel
(frontends/torch/resize_uint8.py): before, torch._decomp's float interpolation, one
level off eager in a quarter of the values (bilinear: 358 of 1,536 in the hunt's image).
With ``antialias=True`` (frontends/torch/ops/upsample.py ``_fixed_point_axis``): before,
eager's kernel on a host copy, a counted fallback per call."""

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch  # noqa: F401
from lazycore.observe import metrics

DEV = "lazy"

# (mode, channels, input size, output size or scale factor, align_corners, channels_last)
CASES = [
    ("bilinear", 3, (8, 8), (16, 16), False, False),  # up
    ("bilinear", 3, (16, 12), (8, 6), False, True),  # down, channels last (eager's AVX path reads it as is)
    ("bilinear", 1, (10, 7), (13, 21), True, False),  # a mask, align_corners
    ("bilinear", 5, (9, 5), (5, 17), False, False),  # more than 4 channels: eager's generic kernel
    ("bilinear", 4, (7, 7), (7, 3), True, False),  # one axis only
    ("bilinear", 3, (20, 15), 1.7, False, False),  # a scale factor
    ("bicubic", 3, (10, 7), (13, 21), False, False),  # four taps, past the borders
    ("bicubic", 5, (16, 12), (8, 6), True, False),
]


def test_uint8_resampling_is_eagers_bit_for_bit():
    metrics.reset()
    g = torch.Generator().manual_seed(0)
    pending = []
    for mode, c, (h, w), size, align, last in CASES:
        x = torch.randint(0, 256, (2, c, h, w), dtype=torch.uint8, generator=g)
        if last:
            x = x.contiguous(memory_format=torch.channels_last)
        kw = dict(scale_factor=size) if isinstance(size, float) else dict(size=size)
        want = F.interpolate(x, mode=mode, align_corners=align, **kw)
        pending.append((F.interpolate(x.to(DEV), mode=mode, align_corners=align, **kw), want))
    lazycore.mark_step()
    off = [(CASES[i], int((got.cpu() != want).sum()), want.numel()) for i, (got, want) in enumerate(pending)
           if not torch.equal(got.cpu(), want)]
    assert off == [], off
    assert all(got.is_contiguous(memory_format=torch.channels_last) == want.is_contiguous(
        memory_format=torch.channels_last) for got, want in pending)
    assert metrics.fallbacks() == {}


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_float_resampling_keeps_its_decomposition(mode):
    x = torch.randn(1, 3, 8, 6)
    want = F.interpolate(x, size=(13, 5), mode=mode)
    got = F.interpolate(x.to(DEV), size=(13, 5), mode=mode)
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_uint8_antialiased_resampling_is_eagers_and_lazy(mode):
    metrics.reset()
    g = torch.Generator().manual_seed(1)
    pending = []
    for c, (h, w), size in [(3, (37, 53), (17, 24)), (5, (16, 12), (8, 30)), (1, (9, 9), (9, 4))]:
        x = torch.randint(0, 256, (2, c, h, w), dtype=torch.uint8, generator=g)
        pending.append((F.interpolate(x.to(DEV), size=size, mode=mode, antialias=True),
                        F.interpolate(x, size=size, mode=mode, antialias=True)))
    lazycore.mark_step()
    assert metrics.fallbacks() == {}
    off = [(i, int((got.cpu() != want).sum())) for i, (got, want) in enumerate(pending)
           if not torch.equal(got.cpu(), want)]
    assert off == [], off
