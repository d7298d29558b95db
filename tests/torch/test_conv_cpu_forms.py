"""Convolutions written in the forms XLA's CPU backend runs fast, forward
and backward, against eager CPU.

- A kernel larger than its input map (ResNet's last stage at small images:
  3x3 kernels over 2x2 maps): the lowering pads such an input explicitly so
  that XLA keeps the convolution as written instead of exchanging its
  operands into a reversed convolution it runs as a naive loop
  (lit_tests/lowering/linalg.mlir shows the form).
- A 1x1 kernel's weight gradient is one matrix product over batch and
  positions, not a convolution whose window is the whole map.
"""

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.observe import metrics

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def ldev(clean_runtime):
    import lazycore.torch as ltorch

    return ltorch.device()


def _no_fallback():
    lazycore.mark_step()
    assert metrics.fallbacks() == {}


def check(fn, inputs, dev):
    """``fn`` on eager CPU leaves and on lazy copies: outputs and input gradients agree."""
    eager = [t.detach().clone().requires_grad_() for t in inputs]
    lazy = [t.detach().clone().to(dev).requires_grad_() for t in inputs]
    out_e, out_l = fn(*eager), fn(*lazy)
    torch.testing.assert_close(out_l.cpu(), out_e.detach(), **TOL)
    g = torch.randn(out_e.shape)
    out_e.backward(g)
    out_l.backward(g.to(dev))
    for a, b in zip(eager, lazy):
        torch.testing.assert_close(b.grad.cpu(), a.grad, **TOL)

CASES = [
    # (name, fn, input shape, weight shape)
    ("2d 3x3 over 2x2, pad 1", lambda x, w: F.conv2d(x, w, padding=1), (4, 16, 2, 2), (8, 16, 3, 3)),
    ("2d 3x3 over 1x1, pad 1", lambda x, w: F.conv2d(x, w, padding=1), (2, 8, 1, 1), (8, 8, 3, 3)),
    ("2d 5x5 over 3x2, pad 2, stride 2", lambda x, w: F.conv2d(x, w, padding=2, stride=2), (2, 4, 3, 2), (6, 4, 5, 5)),
    ("2d 3x3 dilated 2 over 2x2, pad 2", lambda x, w: F.conv2d(x, w, padding=2, dilation=2), (2, 4, 2, 2), (4, 4, 3, 3)),
    ("1d 7 over 3, pad 3", lambda x, w: F.conv1d(x, w, padding=3), (2, 4, 3), (5, 4, 7)),
    ("3d 3x3x3 over 2x2x2, pad 1", lambda x, w: F.conv3d(x, w, padding=1), (1, 3, 2, 2, 2), (4, 3, 3, 3, 3)),
    ("transposed 2d 4x4 over 2x2, stride 2", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
     (2, 6, 2, 2), (6, 4, 4, 4)),
    ("grouped 2d 3x3 over 2x2 (XLA does not swap grouped)", lambda x, w: F.conv2d(x, w, padding=1, groups=2),
     (2, 4, 2, 2), (6, 2, 3, 3)),
]


@pytest.mark.parametrize("name,fn,xs,ws", CASES, ids=[c[0] for c in CASES])
def test_kernel_larger_than_input_forward_and_backward(ldev, name, fn, xs, ws):
    torch.manual_seed(0)
    check(fn, [torch.randn(xs), torch.randn(ws)], ldev)
    _no_fallback()


def test_resnet_last_stage_block_at_small_images(ldev):
    """Two 3x3 convolutions with batch norm over 2x2 maps, trained one SGD step."""
    import torch.nn as nn

    torch.manual_seed(0)

    def block():
        return nn.Sequential(nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                             nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32))

    eager = block()
    lazy = block()
    lazy.load_state_dict(eager.state_dict())
    lazy.to(ldev)
    x = torch.randn(4, 32, 2, 2)
    for model, inp in ((eager, x), (lazy, x.to(ldev))):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        model(inp).square().mean().backward()
        opt.step()
    for (name, a), (_, b) in zip(eager.state_dict().items(), lazy.state_dict().items()):
        torch.testing.assert_close(b.cpu(), a, **TOL, msg=name)
    _no_fallback()


POINTWISE = [
    ("2d 1x1", lambda x, w: F.conv2d(x, w), (2, 6, 5, 4), (8, 6, 1, 1)),
    ("2d 1x1 stride 2", lambda x, w: F.conv2d(x, w, stride=2), (2, 6, 5, 5), (8, 6, 1, 1)),
    ("2d 1x1 groups 2", lambda x, w: F.conv2d(x, w, groups=2), (2, 6, 4, 4), (8, 3, 1, 1)),
    ("2d 1x1 stride (2, 3) groups 3", lambda x, w: F.conv2d(x, w, stride=(2, 3), groups=3), (3, 6, 7, 8), (9, 2, 1, 1)),
    ("1d 1", lambda x, w: F.conv1d(x, w, stride=2), (2, 4, 9), (5, 4, 1)),
    ("3d 1x1x1", lambda x, w: F.conv3d(x, w), (1, 3, 3, 4, 2), (4, 3, 1, 1, 1)),
    ("2d 1x1 padding 1 (a convolution still)", lambda x, w: F.conv2d(x, w, padding=1), (2, 3, 3, 3), (4, 3, 1, 1)),
    ("transposed 1x1 stride 2, output padding 1", lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=1),
     (2, 6, 3, 3), (6, 4, 1, 1)),
    ("transposed 1x1 groups 2", lambda x, w: F.conv_transpose2d(x, w, groups=2), (2, 6, 3, 3), (6, 2, 1, 1)),
]


@pytest.mark.parametrize("name,fn,xs,ws", POINTWISE, ids=[c[0] for c in POINTWISE])
def test_pointwise_kernel_weight_gradient(ldev, name, fn, xs, ws):
    torch.manual_seed(0)
    check(fn, [torch.randn(xs), torch.randn(ws)], ldev)
    _no_fallback()
