"""1x1 convolutions as matrix products on the CPU (``lazy-channels-last{products=true}``,
passes/conv_layout.py ``_pointwise``; opt-in: ``CHANNELS_LAST_PRODUCTS_PIPELINE``).

XLA's CPU backend runs a ``dot_general`` with YNNPACK's matrix kernels and a
convolution with a convolution library (YNNPACK's or Eigen's); ResNet's
bottleneck and downsample convolutions are 1x1. The pass gives their
forwards and input gradients as products (a window stride as a strided
slice first, the input gradient's base dilation as a zero pad after); their
weight gradients already are (frontends/torch/ops/conv.py
``_pointwise_weight_grad``). Values are eager's, forward and backward; the
StableHLO the program gives XLA holds no convolution for them.
"""

import pytest
import torch
import torch.nn.functional as F

import lazycore
from lazycore.observe import metrics, testing

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(autouse=True)
def products_pipeline():
    from lazycore.ir import config
    from lazycore.passes.pipeline import CHANNELS_LAST_PRODUCTS_PIPELINE

    with config.override(pipeline=CHANNELS_LAST_PRODUCTS_PIPELINE):
        yield

CASES = [
    ("1x1", lambda x, w: F.conv2d(x, w), (2, 6, 7, 7), (5, 6, 1, 1)),
    ("1x1 stride 2 (the downsample)", lambda x, w: F.conv2d(x, w, stride=2), (2, 6, 8, 8), (5, 6, 1, 1)),
    ("1x1 stride 2, odd map", lambda x, w: F.conv2d(x, w, stride=2), (2, 6, 7, 9), (5, 6, 1, 1)),
    # with edge padding the weight gradient is still a convolution (ops/conv.py's
    # _weight_grad takes the product form without padding only): counted below
    ("1x1 stride (3, 2), padding 1", lambda x, w: F.conv2d(x, w, stride=(3, 2), padding=1), (2, 4, 8, 7),
     (3, 4, 1, 1)),
    ("1-d pointwise, stride 2", lambda x, w: F.conv1d(x, w, stride=2), (3, 4, 9), (6, 4, 1)),
]


def _convolutions(text: str) -> int:
    return sum(1 for line in text.splitlines() if "stablehlo.convolution" in line and "=" in line)


@pytest.mark.parametrize("name,fn,xs,ws", CASES, ids=[c[0] for c in CASES])
def test_pointwise_is_a_product_with_eagers_values(clean_runtime, name, fn, xs, ws):
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    x, w = torch.randn(xs), torch.randn(ws) * 0.3
    xe, we = x.clone().requires_grad_(), w.clone().requires_grad_()
    xl, wl = x.to(dev).requires_grad_(), w.to(dev).requires_grad_()
    g = torch.randn(fn(xe, we).shape)
    out_e = fn(xe, we)
    out_e.backward(g)
    with testing.capture() as cap:
        out_l = fn(xl, wl)
        out_l.backward(g.to(dev))
        lazycore.mark_step()
    torch.testing.assert_close(out_l.cpu(), out_e.detach(), **TOL)
    torch.testing.assert_close(xl.grad.cpu(), xe.grad, **TOL)
    torch.testing.assert_close(wl.grad.cpu(), we.grad, **TOL)
    assert metrics.fallbacks() == {}
    text = cap.text(stage="stablehlo")
    assert _convolutions(text) == (1 if "padding" in name else 0), text
    assert "stablehlo.dot_general" in text


def test_spatial_and_grouped_stay_convolutions(clean_runtime):
    """A 3x3 kernel and a grouped 1x1 are still convolutions (forward and input gradient)."""
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    x = torch.randn(2, 4, 6, 6, device=dev, requires_grad=True)
    w3 = torch.randn(4, 4, 3, 3, device=dev, requires_grad=True)
    wg = torch.randn(4, 2, 1, 1, device=dev, requires_grad=True)
    with testing.capture() as cap:
        y3, yg = F.conv2d(x, w3, padding=1), F.conv2d(x, wg, groups=2)
        (y3.sum() + yg.sum()).backward()
        lazycore.mark_step()
    # the two forwards, the two input gradients and the 3x3 weight gradient
    # (a 1x1 kernel's weight gradient is a product in ops/conv.py, groups a batch dimension)
    assert _convolutions(cap.text(stage="stablehlo")) == 5


def test_nonfinite_weights_as_eager(clean_runtime):
    """An inf in the kernel: the product gives eager's infs and NaNs, and the
    strided input gradient's untouched positions are zeros, as eager's."""
    import lazycore.torch as ltorch

    dev = ltorch.device()
    torch.manual_seed(0)
    x, w = torch.randn(1, 3, 4, 4), torch.randn(2, 3, 1, 1)
    w[1, 2] = float("inf")
    g = torch.randn(1, 2, 2, 2)
    xe = x.clone().requires_grad_()
    F.conv2d(xe, w, stride=2).backward(g)
    xl = x.to(dev).requires_grad_()
    out = F.conv2d(xl, w.to(dev), stride=2)
    out.backward(g.to(dev))
    lazycore.mark_step()
    torch.testing.assert_close(out.cpu(), F.conv2d(x, w, stride=2), equal_nan=True)
    torch.testing.assert_close(xl.grad.cpu(), xe.grad, equal_nan=True)
