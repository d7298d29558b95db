"""A product that a sum takes is rounded before the sum, as eager's two
kernels round it (issue 39): XLA's CPU backend lets LLVM contract a float
multiply feeding an add or subtract into one fused multiply-add, and
``lazy-keep-roundings`` fences the product so it cannot.

Without the pass: ``x * 0.3 + y`` differed from eager in 18% of float32 values,
``buf.mul(0.9).add(g)`` (SGD momentum) in 28%, float64 in 15%.

The pass is opt-in (``configure(pipeline=CHANNELS_LAST_PIPELINE +
",lazy-keep-roundings")``): some lowerings still rely on XLA contracting a
product into a sum to give eager's own fused multiply-adds (torch.optim's
device learning rate, ``param.add_(grad * -lr)``; float64 ``addcmul`` and
``add(alpha=)``), and the fence would round those twice."""

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from lazycore.ir import config
from lazycore.passes.pipeline import CHANNELS_LAST_PIPELINE

KEPT = CHANNELS_LAST_PIPELINE + ",lazy-keep-roundings"


@pytest.fixture(autouse=True)
def _kept():
    with config.override(pipeline=KEPT):
        yield

N = 4099  # a tail after every vector width's chunks


def _randn(n, dtype, seed):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=dtype)


CASES = {
    "x*c+y": lambda x, y, z: x * 0.3 + y,
    "y-x*c": lambda x, y, z: y - x * 0.3,
    "momentum": lambda x, y, z: x.mul(0.9).add(y),
    "x*y+z": lambda x, y, z: x * y + z,
    "-(x*y)+z": lambda x, y, z: -(x * y) + z,
    "broadcast": lambda x, y, z: (x[:1] * y).reshape(1, -1) + z.reshape(1, -1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_a_product_then_a_sum_is_eagers_bits(case, dtype):
    dev = ltorch.device()
    x, y, z = (_randn(N, dtype, s) for s in range(3))
    f = CASES[case]
    want = f(x, y, z)
    got = f(x.to(dev), y.to(dev), z.to(dev)).cpu()
    assert torch.equal(got, want), int((got != want).sum())


def test_nan_and_inf_products_stay_nan_and_inf():
    dev = ltorch.device()
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1e30, -1e-45, 2.0])
    y = torch.tensor([1.0, 0.0, 1.0, float("inf"), 1e30, 1e-45, float("nan")])
    want = x * y + 1.0
    got = (x.to(dev) * y.to(dev) + 1.0).cpu()
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.nan_to_num(0.0, 7.0, -7.0), want.nan_to_num(0.0, 7.0, -7.0))


@pytest.mark.parametrize("dtype", [torch.float32])
def test_sgd_momentum_steps_are_eagers_bits(dtype):
    """SGD with momentum's single-tensor update (torch.optim's formulas with a
    Python learning rate), several steps, each a program. (float32 only:
    float64's ``add_(alpha=)`` is eager's fused multiply-add, which the
    lowering leaves to XLA's contraction, module doc.)"""
    dev = ltorch.device()
    p, g = _randn(N, dtype, 0), _randn(N, dtype, 1)
    lp, lg = p.to(dev), g.to(dev)
    buf, lbuf = g.clone(), lg.clone()
    for step in range(4):
        if step:
            buf.mul_(0.9).add_(g)
            lbuf.mul_(0.9).add_(lg)
        p.add_(buf, alpha=-0.05)
        lp.add_(lbuf, alpha=-0.05)
        lazycore.mark_step()
        assert torch.equal(lbuf.cpu(), buf), (step, int((lbuf.cpu() != buf).sum()))
        assert torch.equal(lp.cpu(), p), (step, int((lp.cpu() != p).sum()))


def test_without_the_pass_xla_contracts():
    """What the fence prevents: the same program compiled without it fuses
    (so the test above shows the pass, not an XLA that stopped contracting)."""
    dev = ltorch.device()
    x, y = _randn(N, torch.float32, 0), _randn(N, torch.float32, 1)
    with config.override(pipeline=CHANNELS_LAST_PIPELINE):
        got = (x.to(dev) * 0.3 + y.to(dev)).cpu()
    assert not torch.equal(got, x * 0.3 + y)
