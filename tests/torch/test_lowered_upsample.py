"""``F.interpolate``'s backward on the lazy device (issue 39): the upsampling
backward ops (nearest, nearest-exact, linear, bilinear, trilinear, bicubic)
have no decomposition in torch, so a segmentation head's training step
(torchvision's lraspp) ran eager's kernel on the host every step. Forward
values and input gradients are eager's, with no fallback."""

import pytest
import torch
import torch.nn.functional as F

from _bits import BY_HAND  # (tests/ is on the path)

SIZES = [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.6), dict(size=(9, 4))]
MODES = [("nearest", None), ("nearest-exact", None), ("bilinear", False), ("bilinear", True),
         ("bicubic", False), ("bicubic", True)]


def _both(dev, x, grad_seed=1, **kw):
    """Forward values and input gradients, eager's and lazy's."""
    xe = x.clone().requires_grad_()
    ye = F.interpolate(xe, **kw)
    g = torch.randn(ye.shape, generator=torch.Generator().manual_seed(grad_seed), dtype=x.dtype)
    ye.backward(g)
    xl = x.clone().to(dev).requires_grad_()
    yl = F.interpolate(xl, **kw)
    yl.backward(g.to(dev))
    return (ye.detach(), xe.grad), (yl.detach().cpu(), xl.grad.cpu())


def _kwargs(mode, align_corners, size):
    kw = dict(mode=mode, **size)
    if align_corners is not None:
        kw["align_corners"] = align_corners
    return kw


def _size_id(size):
    return "-".join(f"{k}={v}" for k, v in size.items())


# CI: test_2d_values_and_gradients_are_eagers keeps per mode the sizes that pick its branches: a scale given (1.7)
# and none (size=(9, 4)) where align_corners is False, one size where it is True (the ratio ignores the scale), and
# for nearest the exact doubling (scale_factor=2, its own taps); 0.6 (a scale under 1) and the other 2s take those
_SIZES_BY_HAND = {"nearest": ("scale_factor=0.6",), "nearest-exact": ("scale_factor=2", "scale_factor=0.6"),
                  False: ("scale_factor=2", "scale_factor=0.6"),
                  True: ("scale_factor=2", "scale_factor=0.6", "size=(9, 4)")}


@pytest.mark.parametrize("mode,align_corners,size", [
    pytest.param(mode, align_corners, size, id=f"{mode}-{align_corners}-{_size_id(size)}",
                 marks=BY_HAND if _size_id(size) in _SIZES_BY_HAND[mode if align_corners is None else align_corners]
                 else ())
    for size in SIZES for mode, align_corners in MODES])
def test_2d_values_and_gradients_are_eagers(dev, no_fallback, mode, align_corners, size):
    _check_2d(dev, mode, align_corners, size, torch.float64)


@pytest.mark.parametrize("mode,align_corners", MODES, ids=lambda m: str(m))
def test_2d_in_float32(dev, no_fallback, mode, align_corners):
    _check_2d(dev, mode, align_corners, dict(size=(5, 7)), torch.float32)


def _check_2d(dev, mode, align_corners, size, dtype):
    x = torch.randn(2, 3, 6, 5, generator=torch.Generator().manual_seed(0), dtype=dtype)
    (ye, ge), (yl, gl) = _both(dev, x, **_kwargs(mode, align_corners, size))
    tol = dict(rtol=1e-12, atol=1e-12) if dtype is torch.float64 else dict(rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(yl, ye, **tol)
    torch.testing.assert_close(gl, ge, **tol)


@pytest.mark.parametrize("mode,align_corners,size", [
    ("nearest", None, dict(scale_factor=3)), ("nearest", None, dict(size=7)), ("nearest-exact", None, dict(size=7)),
    ("linear", False, dict(scale_factor=2.5)), ("linear", True, dict(size=11)), ("linear", False, dict(size=3)),
])
def test_1d(dev, no_fallback, mode, align_corners, size):
    x = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (ye, ge), (yl, gl) = _both(dev, x, **_kwargs(mode, align_corners, size))
    torch.testing.assert_close(yl, ye, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gl, ge, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode,align_corners,size", [
    ("nearest", None, dict(scale_factor=2)), ("nearest", None, dict(size=(3, 5, 7))),
    ("nearest-exact", None, dict(scale_factor=1.5)),
    ("trilinear", False, dict(scale_factor=2)), ("trilinear", True, dict(size=(3, 5, 7))),
])
def test_3d(dev, no_fallback, mode, align_corners, size):
    x = torch.randn(1, 2, 4, 3, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (ye, ge), (yl, gl) = _both(dev, x, **_kwargs(mode, align_corners, size))
    torch.testing.assert_close(yl, ye, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gl, ge, rtol=1e-12, atol=1e-12)


# CI: [nearest-None-*] in both half types, bilinear and bicubic in float16: the half types take one path (float32
# work, rounded once), so bfloat16's bilinear and bicubic repeat float16's
@pytest.mark.parametrize("mode,align_corners,dtype", [
    pytest.param(mode, align_corners, dtype, id=f"{mode}-{align_corners}-dtype{i}",
                 marks=BY_HAND if dtype == torch.bfloat16 and mode != "nearest" else ())
    for i, dtype in enumerate([torch.float16, torch.bfloat16])
    for mode, align_corners in [("nearest", None), ("bilinear", False), ("bicubic", True)]])
def test_half_types_accumulate_in_float32(dev, no_fallback, mode, align_corners, dtype):
    """Eager's CPU kernels add the half types' gradients in a float32 buffer,
    rounded once at the end: an upsampling by 8 adds 64 terms per input."""
    x = torch.randn(1, 2, 4, 4, generator=torch.Generator().manual_seed(4)).to(dtype)
    (ye, ge), (yl, gl) = _both(dev, x, **_kwargs(mode, align_corners, dict(scale_factor=8)))
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(gl.float(), ge.float(), rtol=2 * eps, atol=2 * eps)


@pytest.mark.parametrize("op,args", [
    (torch.ops.aten.upsample_bilinear2d_backward.default, ([10, 12], [2, 3, 5, 6], False, None, None)),
    (torch.ops.aten.upsample_bilinear2d_backward.default, ([10, 12], [2, 3, 5, 6], True, None, None)),
    (torch.ops.aten.upsample_bicubic2d_backward.default, ([10, 12], [2, 3, 5, 6], False, 2.0, 2.0)),
    (torch.ops.aten.upsample_nearest2d_backward.default, ([10, 12], [2, 3, 5, 6], 2.0, 2.0)),
    (torch.ops.aten.upsample_nearest2d_backward.default, ([7, 9], [2, 3, 5, 6], None, None)),
    (torch.ops.aten._upsample_nearest_exact2d_backward.default, ([7, 9], [2, 3, 5, 6], None, None)),
])
def test_the_backward_ops_called_directly(dev, no_fallback, op, args):
    g = torch.randn(2, 3, *args[0], generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    torch.testing.assert_close(op(g.to(dev), *args).cpu(), op(g, *args), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode,align_corners", [("nearest", None), ("bilinear", False), ("bicubic", False)])
def test_an_infinite_gradient_reaches_only_the_inputs_it_came_from(dev, no_fallback, mode, align_corners):
    """Only the taps of the output position holding an infinity are not
    finite, as in eager (a dense interpolation matrix would spread it, through
    0 * inf, to every input of the row)."""
    op = {"nearest": torch.ops.aten.upsample_nearest2d_backward.default,
          "bilinear": torch.ops.aten.upsample_bilinear2d_backward.default,
          "bicubic": torch.ops.aten.upsample_bicubic2d_backward.default}[mode]
    args = ([12, 12], [1, 1, 6, 6]) + ((None, None) if align_corners is None else (align_corners, None, None))
    g = torch.randn(1, 1, 12, 12, generator=torch.Generator().manual_seed(6))
    g[0, 0, 5, 7] = float("inf")
    want = op(g, *args)
    got = op(g.to(dev), *args).cpu()
    assert torch.equal(torch.isfinite(got), torch.isfinite(want))
    assert 0 < int((~torch.isfinite(want)).sum()) < 36
    fin = torch.isfinite(want)
    torch.testing.assert_close(got[fin], want[fin])


# CI: test_2d_in_float32[('bilinear', False)] takes the bilinear backward this head trains through
@BY_HAND
def test_a_segmentation_heads_training_step(dev, no_fallback):
    """lraspp's head: a low-resolution classifier upsampled bilinearly to the
    input's size, trained with cross entropy; the loss and every parameter
    after two SGD steps are eager's."""
    torch.manual_seed(7)

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = torch.nn.Conv2d(3, 8, 3, stride=4, padding=1)
            self.cls = torch.nn.Conv2d(8, 5, 1)

        def forward(self, x):
            y = self.cls(torch.relu(self.features(x)))
            return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)

    eager = Head()
    lazy = Head().to(dev)
    lazy.load_state_dict(eager.state_dict())
    x = torch.randn(2, 3, 32, 24)
    target = torch.randint(0, 5, (2, 32, 24))
    for model, d in ((eager, "cpu"), (lazy, dev)):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(2):
            opt.zero_grad()
            loss = F.cross_entropy(model(x.to(d)), target.to(d))
            loss.backward()
            opt.step()
        model.final_loss = loss.item()
    assert abs(lazy.final_loss - eager.final_loss) < 1e-6
    for (name, pe), pl in zip(eager.named_parameters(), lazy.parameters()):
        torch.testing.assert_close(pl.detach().cpu(), pe.detach(), rtol=1e-5, atol=1e-6, msg=name)
