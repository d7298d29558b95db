"""Convolution, pooling and batch norm on the lazy device, forward and backward, against eager CPU."""

import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazycore
from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def ldev(clean_runtime):
    import lazycore.torch as ltorch

    return ltorch.device()


def _no_fallback():
    lazycore.mark_step()
    assert metrics.fallbacks() == {}


def _leaf(t, dev=None):
    t = t.detach().clone()
    if dev is not None:
        t = t.to(dev)
    return t.requires_grad_()


def check(fn, inputs, dev, grad=True, equal_nan=False):
    """``fn`` on eager CPU leaves and on lazy copies: outputs (and input grads) agree, nothing falls back."""
    eager = [_leaf(t) for t in inputs]
    lazy = [_leaf(t, dev) for t in inputs]
    out_e = fn(*eager)
    out_l = fn(*lazy)
    outs_e = out_e if isinstance(out_e, tuple) else (out_e,)
    outs_l = out_l if isinstance(out_l, tuple) else (out_l,)
    for a, b in zip(outs_l, outs_e):
        assert a.shape == b.shape and a.dtype == b.dtype
    if grad:
        g = torch.randn(outs_e[0].shape)
        outs_e[0].backward(g)
        outs_l[0].backward(g.to(dev))
    _no_fallback()
    for a, b in zip(outs_l, outs_e):
        torch.testing.assert_close(a.cpu(), b, equal_nan=equal_nan, **TOL)
    if grad:
        for a, b in zip(lazy, eager):
            torch.testing.assert_close(a.grad.cpu(), b.grad, **TOL)
    assert metrics.fallbacks() == {}


# --- convolution ----------------------------------------------------------------------------

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize(
    "nd,stride,padding,dilation,groups,bias",
    [
        (1, 1, 0, 1, 1, True),
        (1, 2, 3, 2, 2, False),
        (2, 1, 0, 1, 1, True),
        (2, 2, 1, 1, 1, False),
        (2, (2, 1), (1, 2), (1, 2), 2, True),
        (2, 3, 2, 2, 4, True),
        (3, 1, 1, 1, 1, True),
        (3, 2, 0, (1, 2, 1), 2, False),
    ],
)
def test_conv_forward(ldev, nd, stride, padding, dilation, groups, bias):
    torch.manual_seed(0)
    cin, cout = 4, 8
    x = torch.randn((2, cin) + (9,) * nd)
    w = torch.randn((cout, cin // groups) + (3,) * nd)
    b = torch.randn(cout) if bias else None
    conv = CONV[nd]

    def fn(x):
        return conv(x, w.to(x.device), None if b is None else b.to(x.device), stride, padding, dilation, groups)

    check(fn, [x], ldev, grad=False, equal_nan=True)


def _conv_grads(dev, nd, stride, padding, dilation, groups, transposed=False, output_padding=0, size=8):
    """x.requires_grad_() and nn.Parameter weight/bias, eager vs lazy ``.grad``."""
    torch.manual_seed(1)
    cin, cout = 4, 6
    x = torch.randn((2, cin) + (size,) * nd)
    if transposed:
        w = torch.randn((cin, cout // groups) + (3,) * nd)
    else:
        w = torch.randn((cout, cin // groups) + (3,) * nd)
    b = torch.randn(cout)
    results = []
    for device in ("cpu", dev):
        xx = _leaf(x, device)
        ww = nn.Parameter(w.to(device))
        bb = nn.Parameter(b.to(device))
        if transposed:
            y = CONV_T[nd](xx, ww, bb, stride, padding, output_padding, groups, dilation)
        else:
            y = CONV[nd](xx, ww, bb, stride, padding, dilation, groups)
        g = torch.randn(y.shape, generator=torch.Generator().manual_seed(2))
        y.backward(g.to(device))
        results.append((y, xx.grad, ww.grad, bb.grad))
    _no_fallback()
    for lazy, eager in zip(results[1], results[0]):
        torch.testing.assert_close(lazy.cpu(), eager, **TOL)


# CI: the six variants in _BACKWARD_CI keep the lowering's paths (every pair of the four settings' values; the
# lowering branches on none of them, XLA's convolutions take them as attributes); the other ten repeat them
_BACKWARD_CI = [(1, 1, 0, 1), (1, 2, 1, 1), (1, 1, 1, 2), (2, 2, 0, 2), (2, 1, 1, 1), (2, 2, 1, 2)]


@pytest.mark.parametrize("groups,stride,padding,dilation", [
    c if c in _BACKWARD_CI else pytest.param(*c, marks=BY_HAND)
    for c in itertools.product((1, 2), (1, 2), (0, 1), (1, 2))])
def test_conv2d_backward(ldev, groups, stride, padding, dilation):
    _conv_grads(ldev, 2, stride, padding, dilation, groups)


@pytest.mark.parametrize("nd,stride,padding,dilation,groups", [(1, 2, 1, 2, 2), (3, 2, 1, 1, 2), (3, 1, 0, 2, 1)])
def test_conv_backward_1d_3d(ldev, nd, stride, padding, dilation, groups):
    _conv_grads(ldev, nd, stride, padding, dilation, groups, size=7)


def test_depthwise_conv_backward(ldev):
    torch.manual_seed(3)
    x = torch.randn(2, 4, 9, 9)
    w = torch.randn(8, 1, 3, 3)

    check(lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=4), [x, w], ldev)


def test_conv_weight_grad_only(ldev):
    # frozen input: convolution_backward asks for the weight (and bias) gradient alone
    torch.manual_seed(4)
    x = torch.randn(2, 3, 8, 8)
    conv_e = nn.Conv2d(3, 5, 3, stride=2, padding=1)
    conv_l = nn.Conv2d(3, 5, 3, stride=2, padding=1)
    conv_l.load_state_dict(conv_e.state_dict())
    conv_l.to(ldev)
    g = torch.randn(2, 5, 4, 4)
    conv_e(x).backward(g)
    conv_l(x.to(ldev)).backward(g.to(ldev))
    _no_fallback()
    torch.testing.assert_close(conv_l.weight.grad.cpu(), conv_e.weight.grad, **TOL)
    torch.testing.assert_close(conv_l.bias.grad.cpu(), conv_e.bias.grad, **TOL)


@pytest.mark.parametrize(
    "nd,stride,padding,dilation,groups,output_padding",
    [
        (2, 1, 0, 1, 1, 0),
        (2, 2, 1, 1, 1, 1),
        (2, 2, 0, 2, 2, 0),
        (2, 3, 2, 1, 2, 2),  # padding beyond the flipped kernel's reach: a crop
        (2, 2, 4, 1, 1, 1),
        (2, 1, 1, 2, 1, 1),  # output_padding >= stride (allowed below the dilation)
        (1, 2, 1, 2, 2, 1),
        (3, 2, 1, 1, 2, 1),
    ],
)
def test_conv_transpose(ldev, nd, stride, padding, dilation, groups, output_padding):
    _conv_grads(ldev, nd, stride, padding, dilation, groups, transposed=True, output_padding=output_padding,
                size=5)


# --- pooling -------------------------------------------------------------------------------------


def _ties(shape):
    # few distinct values: windows hold equal maxima, so the first-index rule is exercised
    return torch.randint(0, 4, shape).float() + 0.25 * torch.randn(shape).round()


@pytest.mark.parametrize(
    "kernel,stride,padding,dilation,ceil_mode",
    [
        (2, None, 0, 1, False),
        # CI: test_max_pool2d[3-2-1-1-True] (its indices) and test_pool_bits' "max2d 3x3/2" (these settings) keep it
        pytest.param(3, 2, 1, 1, False, marks=BY_HAND),
        (3, 2, 1, 1, True),
        ((3, 2), (2, 1), (1, 0), (2, 1), False),
        (3, 1, 1, 2, True),
        (2, 3, 0, 1, True),
    ],
)
def test_max_pool2d(ldev, kernel, stride, padding, dilation, ceil_mode):
    torch.manual_seed(5)
    x = _ties((2, 3, 9, 10))

    def fn(x):
        return F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)

    check(fn, [x], ldev)


def test_max_pool_plain_1d_3d(ldev):
    torch.manual_seed(6)
    check(lambda x: F.max_pool2d(x, 2), [torch.randn(2, 3, 8, 8)], ldev)
    check(lambda x: F.max_pool1d(x, 3, 2, 1), [torch.randn(2, 3, 11)], ldev)
    check(lambda x: F.max_pool3d(x, 2, return_indices=True), [_ties((2, 2, 6, 5, 4))], ldev)
    check(lambda x: F.max_pool2d(x, 2), [torch.randn(3, 6, 6)], ldev)  # unbatched


def test_max_pool_nan_and_inf(ldev):
    x = torch.randn(1, 1, 4, 4)
    x[0, 0, 0, 1] = float("nan")
    x[0, 0, 2:, 2:] = float("-inf")
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), [x], ldev, grad=False, equal_nan=True)


@pytest.mark.parametrize(
    "kernel,stride,padding,ceil_mode,count_include_pad,divisor_override",
    [
        (2, None, 0, False, True, None),
        # CI: test_pool_bits' "avg2d" and "avg2d without padding in the count" (these settings, float32, forward and
        # input gradient to the bit) keep these two
        pytest.param(3, 2, 1, False, True, None, marks=BY_HAND),
        pytest.param(3, 2, 1, False, False, None, marks=BY_HAND),
        (3, 2, 1, True, True, None),
        (3, 2, 1, True, False, None),
        ((3, 2), (1, 2), (1, 1), False, False, None),
        (2, 1, 1, False, True, 3),
    ],
)
def test_avg_pool2d(ldev, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    torch.manual_seed(7)
    x = torch.randn(2, 3, 9, 8)

    def fn(x):
        return F.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)

    check(fn, [x], ldev)


def test_avg_pool_1d_3d(ldev):
    torch.manual_seed(8)
    check(lambda x: F.avg_pool1d(x, 3, 2, 1), [torch.randn(2, 3, 10)], ldev)
    check(lambda x: F.avg_pool3d(x, 2, 2, 1, count_include_pad=False), [torch.randn(2, 2, 5, 6, 4)], ldev)


# CI: test_adaptive_avg_pool2d[size2-out2] (sizes dividing in both dims: the reshape and sum) keeps ((8, 8), 2)'s path
@pytest.mark.parametrize("size,out", [((8, 8), 1), pytest.param((8, 8), 2, marks=BY_HAND), ((8, 6), (4, 3)),
                                      ((7, 9), 3), ((5, 7), (3, 4))])
def test_adaptive_avg_pool2d(ldev, size, out):
    torch.manual_seed(9)
    check(lambda x: F.adaptive_avg_pool2d(x, out), [torch.randn((2, 3) + size)], ldev)


def test_adaptive_avg_pool3d(ldev):
    torch.manual_seed(10)
    check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), [torch.randn(2, 2, 4, 7, 5)], ldev)


# --- batch norm ----------------------------------------------------------------------------------


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_train_and_eval(ldev, affine):
    torch.manual_seed(11)
    bn_e = nn.BatchNorm2d(3, affine=affine, momentum=0.3)
    bn_l = nn.BatchNorm2d(3, affine=affine, momentum=0.3)
    bn_l.load_state_dict(bn_e.state_dict())
    bn_l.to(ldev)
    for step in range(2):
        x = torch.randn(4, 3, 5, 6) * 2 + 1
        xe, xl = _leaf(x), _leaf(x, ldev)
        ye, yl = bn_e(xe), bn_l(xl)
        g = torch.randn(ye.shape)
        ye.backward(g)
        yl.backward(g.to(ldev))
        _no_fallback()
        torch.testing.assert_close(yl.cpu(), ye, **TOL)
        torch.testing.assert_close(xl.grad.cpu(), xe.grad, **TOL)
    torch.testing.assert_close(bn_l.running_mean.cpu(), bn_e.running_mean, **TOL)
    torch.testing.assert_close(bn_l.running_var.cpu(), bn_e.running_var, **TOL)
    assert bn_l.num_batches_tracked.item() == bn_e.num_batches_tracked.item() == 2
    if affine:
        torch.testing.assert_close(bn_l.weight.grad.cpu(), bn_e.weight.grad, **TOL)
        torch.testing.assert_close(bn_l.bias.grad.cpu(), bn_e.bias.grad, **TOL)
    bn_e.eval()
    bn_l.eval()
    x = torch.randn(2, 3, 5, 6)
    check(lambda x: bn_e(x) if x.device.type == "cpu" else bn_l(x), [x], ldev)


def test_functional_batch_norm_without_running_stats(ldev):
    torch.manual_seed(12)
    x, w, b = torch.randn(6, 4, 3), torch.randn(4), torch.randn(4)
    check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b], ldev)


# --- a small CNN ---------------------------------------------------------------------------------


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.adaptive_avg_pool2d(F.relu(self.conv2(x)), 1)
        return self.fc(torch.flatten(x, 1))


def test_small_cnn_forward_backward(ldev):
    torch.manual_seed(13)
    eager = SmallCNN()
    lazy = SmallCNN()
    lazy.load_state_dict(eager.state_dict())
    lazy.to(ldev)
    x = torch.randn(4, 3, 16, 16)
    g = torch.randn(4, 10)
    ye = eager(x)
    ye.backward(g)
    yl = lazy(x.to(ldev))
    yl.backward(g.to(ldev))
    _no_fallback()
    torch.testing.assert_close(yl.cpu(), ye, **TOL)
    for (name, pe), (_, pl) in zip(eager.named_parameters(), lazy.named_parameters()):
        torch.testing.assert_close(pl.grad.cpu(), pe.grad, **TOL, msg=lambda m, name=name: f"{name}: {m}")
