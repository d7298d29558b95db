"""A float32 depthwise convolution (one filter per channel: MobileNet, EfficientNet,
ConvNeXt, Conformer blocks) and its input gradient give eager CPU's bits.

Eager runs them as oneDNN's depthwise kernels, which sum each output as one
fused multiply-add per kernel tap onto the bias (or zero), taps in row-major
order. XLA's grouped convolution sums in its own order: before, a third of
the outputs differed (790 of 2,496 for Conformer's Conv1d(32, 32, 3,
groups=32) over 39 steps).
"""

import pytest
import torch
import torch.nn.functional as F

CASES = [  # (input shape, kernel, stride, padding, dilation, bias)
    ((2, 32, 39), 3, 1, 1, 1, False),  # Wav2Vec2-Conformer's depthwise Conv1d
    ((2, 32, 40), 5, 2, 2, 1, True),
    ((2, 16, 15, 13), 3, 1, 1, 1, False),  # MobileNet's 3x3
    ((2, 8, 20, 20), 5, 2, 2, 1, True),  # EfficientNet's strided 5x5
    ((2, 8, 12, 12), 3, 1, 2, 2, False),  # dilated: the forward only (oneDNN's input gradient differs)
]


def _step(x, w, b, stride, padding, dilation, g):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    conv = F.conv1d if x.dim() == 3 else F.conv2d
    y = conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=x.shape[1])
    y.backward(g.to(y.device))
    return y.cpu(), x.grad.cpu()


def _off(a, b):
    return int((a.view(-1) != b.view(-1)).sum())


@pytest.mark.parametrize("shape, k, stride, padding, dilation, bias", CASES)
def test_forward_and_input_gradient(dev, shape, k, stride, padding, dilation, bias):
    g = torch.Generator().manual_seed(0)
    c, n = shape[1], len(shape) - 2
    x = torch.randn(*shape, generator=g)
    w = torch.randn(c, 1, *(k,) * n, generator=g)
    b = torch.randn(c, generator=g) if bias else None
    conv = F.conv1d if n == 1 else F.conv2d
    gy = torch.randn(conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=c).shape, generator=g)
    y, dx = _step(x, w, b, stride, padding, dilation, gy)
    ly, ldx = _step(x.to(dev), w.to(dev), None if b is None else b.to(dev), stride, padding, dilation, gy)
    assert _off(ly, y) == 0, f"{_off(ly, y)} of {y.numel()} outputs differ"
    if dilation == 1:
        assert _off(ldx, dx) == 0, f"{_off(ldx, dx)} of {dx.numel()} input-gradient values differ"
    else:
        torch.testing.assert_close(ldx, dx)


def test_module_in_train_step(dev):
    """nn.Conv2d(groups=channels) with its bias, as a model holds it: the output is eager's bits."""
    torch.manual_seed(0)
    m = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24)
    x = torch.randn(2, 24, 10, 10)
    lm = torch.nn.Conv2d(24, 24, 3, padding=1, groups=24).to(dev)
    lm.load_state_dict(m.state_dict())
    assert _off(lm(x.to(dev)).cpu(), m(x)) == 0
