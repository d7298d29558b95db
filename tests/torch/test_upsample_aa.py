"""Antialiased bilinear and bicubic resampling on the lazy device, forward and
backward: ``F.interpolate(..., antialias=True)`` and torchvision v2's
``Resize``, whose default is ``antialias=True``. Without lowerings they ran
eager's kernel on the host (a counted fallback and a barrier each, issue 39).
Values within 1e-5 of eager's in float32; uint8 images go through float32
on the lazy device, as torchvision takes them off the CPU, and come out as
that path's on the CPU, within one level of eager's own uint8 kernel."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch


@pytest.fixture
def dev():
    return ltorch.device()


def _fallbacks():
    return lazycore.metrics.counters()["fallbacks"]


SIZES = [(32, 24, 7, 11), (10, 10, 23, 4), (5, 9, 5, 3), (64, 48, 16, 12), (7, 7, 1, 1)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("align_corners", [False, True], ids=["centers", "corners"])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_forward_and_backward_are_eagers(dev, mode, align_corners, dtype):
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.manual_seed(0)
    for h, w, oh, ow in SIZES:
        x = torch.randn(2, 3, h, w, dtype=dtype, requires_grad=True)
        y = F.interpolate(x, size=(oh, ow), mode=mode, align_corners=align_corners, antialias=True)
        g = torch.randn_like(y)
        y.backward(g)
        before = _fallbacks()
        xl = x.detach().to(dev).requires_grad_()
        yl = F.interpolate(xl, size=(oh, ow), mode=mode, align_corners=align_corners, antialias=True)
        yl.backward(g.to(dev))
        ltorch.mark_step()
        assert _fallbacks() == before, (h, w, oh, ow)
        torch.testing.assert_close(yl.detach().cpu(), y.detach(), rtol=tol, atol=tol)
        torch.testing.assert_close(xl.grad.cpu(), x.grad, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_scale_factors_and_infinities_as_eager(dev, mode):
    x = torch.randn(1, 2, 12, 9, generator=torch.Generator().manual_seed(1))
    x[0, 0, 3, 4] = float("inf")
    x[0, 1, 7, 2] = float("nan")
    before = _fallbacks()
    for kw in ({"size": (5, 4)}, {"scale_factor": (0.37, 0.61), "recompute_scale_factor": False}):
        want = F.interpolate(x, mode=mode, antialias=True, **kw)
        got = F.interpolate(x.to(dev), mode=mode, antialias=True, **kw).cpu()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
    assert _fallbacks() == before


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
def test_torchvision_v2_resize_of_images(dev, interpolation):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    mode = v2.InterpolationMode(interpolation)
    resize = v2.Resize((17, 24), interpolation=mode)  # antialias=True by default
    img = torch.randint(0, 256, (3, 37, 53), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    before = _fallbacks()
    got = resize(img.to(dev)).cpu()
    floats = resize(img.float().div(255).to(dev)).cpu()
    assert _fallbacks() == before
    # torchvision's path for a uint8 image off the CPU: float32, clamped (bicubic) and rounded
    f = F.interpolate(img[None].float(), size=(17, 24), mode=interpolation, antialias=True, align_corners=False)[0]
    want = (f.clamp(0, 255) if interpolation == "bicubic" else f).round().to(torch.uint8)
    assert torch.equal(got, want)
    assert (got.int() - resize(img).int()).abs().max() <= 1  # eager's own fixed-point uint8 kernel
    torch.testing.assert_close(floats, resize(img.float().div(255)), rtol=1e-5, atol=1e-5)


def test_the_half_types_raise_as_eager(dev):
    x = torch.randn(1, 1, 8, 8, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="not implemented for 'Half'"):
        F.interpolate(x, size=(3, 3), mode="bilinear", antialias=True)
    with pytest.raises(RuntimeError, match="not implemented for 'Half'"):
        F.interpolate(x.to(dev), size=(3, 3), mode="bilinear", antialias=True).cpu()
