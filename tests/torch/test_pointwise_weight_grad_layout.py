"""A widening 1x1 convolution's weight gradient transposes the smaller operand
(issue 40: ResNet-50's step; docs/dev/cpu_program_gap.md).

``ops/conv.py`` computes a 1x1 kernel's weight gradient as one product that
contracts batch and positions of both ``x`` and the output gradient ``gy``.
XLA's CPU dot takes its left operand with the contracted dims last, so the
kernel that produces the left operand writes it transposed. With ``gy`` on the
left, a widening convolution (ResNet-50's 64 -> 256) transposed ``gy`` (4x
``x``'s elements) inside batch norm backward's full-size loop; now ``x`` is on
the left there. The test reads the optimized HLO of the program that ran: no
transpose as large as ``gy``; and the weight gradient is as near float64's as
eager's is (through batch norm's backward, eager's own float32 gradient is
up to ~1e-4 relative from float64's on a few elements)."""

import re

import pytest
import torch

import lazycore
from lazycore.runtime import pjrt

N, CIN, COUT, HW = 2, 8, 32, 8


def _launched(step) -> list[str]:
    assert pjrt.LAUNCHES.log is None
    pjrt.LAUNCHES.log = log = []
    try:
        step()
    finally:
        pjrt.LAUNCHES.log = None
    return [exe.hlo_text() for exe, *_ in log]


def _transposed_sizes(text: str) -> list[int]:
    sizes = []
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*f32\[([\d,]*)\]\S*\s+transpose\(", line)
        if m:
            n = 1
            for d in m.group(1).split(","):
                n *= int(d) if d else 1
            sizes.append(n)
    return sizes


def _chain(cin, cout, stride=1, groups=1):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Conv2d(cin, cout, 1, stride=stride, groups=groups, bias=False),
                               torch.nn.BatchNorm2d(cout), torch.nn.ReLU())


def _grads(model, x, dev=None):
    if dev == "float64":
        model, x, dev = model.double(), x.double(), None
    if dev is not None:
        model, x = model.to(dev), x.to(dev)
    (model(x) ** 2).sum().backward()
    if dev is not None:
        lazycore.mark_step(wait=True)
    return model[1].weight.grad.cpu()


def _as_near_as_eager(got, eager, exact):
    scale = exact.abs().max()
    err, eager_err = (got.double() - exact).abs().max() / scale, (eager.double() - exact).abs().max() / scale
    assert err <= 2 * eager_err + 1e-6, (float(err), float(eager_err))


def test_widening_pointwise_weight_grad_transposes_x_not_gy(dev):
    x = torch.randn(N, CIN, HW, HW)
    want, exact = _grads(_chain(CIN, COUT), x), _grads(_chain(CIN, COUT), x, "float64")
    model = _chain(CIN, COUT).to(dev)
    got = []
    texts = _launched(lambda: got.append(_grads(model, x, dev)))
    largest = max(s for t in texts for s in _transposed_sizes(t))
    assert largest < N * COUT * HW * HW, f"a transpose of {largest} elements: gy is the product's left operand"
    _as_near_as_eager(got[0], want, exact)


@pytest.mark.parametrize("cin, cout, stride, groups", [(8, 32, 2, 1), (8, 32, 1, 2)])
def test_pointwise_weight_grad_is_eager(dev, cin, cout, stride, groups):
    x = torch.randn(N, cin, HW, HW)
    want = _grads(_chain(cin, cout, stride, groups), x)
    exact = _grads(_chain(cin, cout, stride, groups), x, "float64")
    got = _grads(_chain(cin, cout, stride, groups), x, dev)
    _as_near_as_eager(got, want, exact)
