"""``lazy-channels-last`` (passes/conv_layout.py) on torch programs: the
convolutions of a program run channels-last, the ops between them stay in
that layout, and every value is eager's.

The pass is opt-in (``CHANNELS_LAST_PIPELINE``): these tests compile with it
and compare with eager CPU, forward and backward, and count the transposes
left in the StableHLO it gives XLA.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import lazycore
from lazycore import config
from lazycore.observe import metrics
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE
from _bits import BY_HAND  # (tests/ is on the path)

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture
def ldev(clean_runtime):
    import lazycore.torch as ltorch

    with config.override(pipeline=CHANNELS_LAST_PIPELINE):
        yield ltorch.device()


def check(fn, inputs, dev, tol=TOL):
    """``fn`` on eager CPU leaves and on lazy copies: outputs and input gradients agree."""
    eager = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    lazy = [t.detach().clone().to(dev).requires_grad_(t.is_floating_point()) for t in inputs]
    out_e, out_l = fn(*eager), fn(*lazy)
    torch.testing.assert_close(out_l.cpu(), out_e.detach(), **tol)
    g = torch.randn(out_e.shape)
    out_e.backward(g)
    out_l.backward(g.to(dev))
    for a, b in zip(eager, lazy):
        if a.grad is not None:
            torch.testing.assert_close(b.grad.cpu(), a.grad, **tol)
    lazycore.mark_step()
    assert metrics.fallbacks() == {}


def _bn(x, c):
    return F.batch_norm(x, None, None, torch.ones(c, device=x.device), torch.zeros(c, device=x.device), training=True)


CASES = [
    ("conv", lambda x, w: F.conv2d(x, w, padding=1), (2, 3, 8, 8), (4, 3, 3, 3)),
    ("strided conv", lambda x, w: F.conv2d(x, w, stride=2, padding=1), (2, 3, 9, 9), (4, 3, 3, 3)),
    ("1x1 strided (its weight gradient is a matrix product)", lambda x, w: F.conv2d(x, w, stride=2),
     (2, 6, 8, 8), (4, 6, 1, 1)),
    ("conv, batch norm, relu, conv, residual", lambda x, w: (lambda y: F.conv2d(y, w.transpose(0, 1)[:4], padding=1) + y)(
        F.relu(_bn(F.conv2d(x, w, padding=1), 4))), (2, 4, 8, 8), (4, 4, 3, 3)),
    ("3x3 over a 2x2 map (the explicit pad)", lambda x, w: F.relu(F.conv2d(F.relu(x), w, padding=1)) * 2,
     (4, 16, 2, 2), (8, 16, 3, 3)),
    ("depthwise", lambda x, w: F.conv2d(x, w, padding=1, groups=4), (2, 4, 8, 8), (4, 1, 3, 3)),
    ("grouped and dilated", lambda x, w: F.conv2d(x, w, padding=2, dilation=2, groups=2), (2, 4, 8, 8), (6, 2, 3, 3)),
    ("transposed", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), (2, 4, 5, 5),
     (4, 3, 3, 3)),
    ("1-d", lambda x, w: F.conv1d(x, w, padding=2), (2, 3, 10), (5, 3, 5)),
    ("3-d", lambda x, w: F.conv3d(x, w, padding=1), (1, 2, 4, 4, 4), (3, 2, 3, 3, 3)),
    ("max pool, global average, flatten", lambda x, w: F.adaptive_avg_pool2d(
        F.max_pool2d(F.conv2d(x, w, padding=1), 3, 2, 1), 1).flatten(1), (2, 3, 8, 8), (4, 3, 3, 3)),
    ("patch embedding (ViT)", lambda x, w: F.conv2d(x, w, stride=4).flatten(2).transpose(1, 2), (2, 3, 16, 16),
     (8, 3, 4, 4)),
]


@pytest.mark.parametrize("name,fn,xs,ws", CASES, ids=[c[0] for c in CASES])
def test_values_are_eagers(ldev, name, fn, xs, ws):
    torch.manual_seed(0)
    check(fn, [torch.randn(xs), torch.randn(ws) * 0.3], ldev)


# CI: test_conv_cpu_forms.py::test_resnet_last_stage_block_at_small_images trains conv+BN in this (the CPU's) pipeline
@BY_HAND
def test_a_resnet_block_trains_as_eager(ldev):
    import copy

    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    lazy = copy.deepcopy(block).to(ldev)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (block, lazy)]
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))
    for _ in range(2):
        for m, opt, dev in ((block, opts[0], "cpu"), (lazy, opts[1], ldev)):
            opt.zero_grad()
            F.cross_entropy(m(x.to(dev)), y.to(dev)).backward()
            opt.step()
        lazycore.mark_step()
    for (name, a), b in zip(block.state_dict().items(), lazy.state_dict().values()):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-4, atol=1e-5, msg=name)


def _transposes(text: str) -> int:
    return sum(1 for line in text.splitlines() if "stablehlo.transpose" in line and "=" in line)


def test_between_two_convolutions_nothing_transposes(clean_runtime):
    """conv, batch norm, ReLU, conv: with the pass the program transposes its
    input, its two kernels and its result, and nothing between the convolutions."""
    import lazycore.torch as ltorch
    from lazycore.observe import testing
    from lazycore.passes.pipeline import DEFAULT_PIPELINE

    dev = ltorch.device()
    torch.manual_seed(0)
    x, w1, w2 = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4, 4, 3, 3)

    def fn(x, w1, w2):
        return F.conv2d(F.relu(_bn(F.conv2d(x, w1, padding=1), 4)), w2, padding=1)

    counts = {}
    for name, pipeline in (("default", DEFAULT_PIPELINE), ("channels-last", CHANNELS_LAST_PIPELINE)):
        with config.override(pipeline=pipeline), testing.capture() as cap:
            out = fn(*(t.to(dev) for t in (x, w1, w2)))
            lazycore.mark_step()
        torch.testing.assert_close(out.cpu(), fn(x, w1, w2), **TOL)
        counts[name] = _transposes(cap.text(stage="stablehlo"))
    assert counts["default"] == 0  # XLA adds its own around each convolution
    assert counts["channels-last"] == 4  # x, w1, w2 and the result
