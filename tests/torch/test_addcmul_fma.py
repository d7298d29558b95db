"""addcmul and addcdiv rounded as eager's CPU kernels round them
(frontends/torch/ops/nn.py ``_addc``): addcmul is one fused multiply-add of
``value * t1`` and ``t2`` onto ``x`` (one ``lazy.fma``, on every platform),
addcdiv ``x + (value * t1) / t2`` rounded per step, halves in float32.
Adam's second moment (``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 -
beta2)``) is then eager's bit for bit at every step."""

import collections

import numpy as np
import pytest
import torch

import lazycore
import lazycore.frontends.torch.ops.nn as lazy_nn
import lazycore.torch as ltorch
from lazycore.ir import graph

N = 100_003  # (an odd length: eager's vectorized loop and its scalar tail both run)
VALUES = [1.0, 0.3, 1 - 0.999, -2.5]


def _data(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(N, generator=g).to(dtype) for _ in range(3)]


def _fma_f32(a, b, c):
    """float32 a * b + c rounded once (exact but for double rounding, 2**-29 of the cases)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("value", VALUES)
def test_eager_addcmul_is_a_fused_multiply_add_of_value_times_t1(value):
    """What the lowering reproduces: eager's float32 addcmul is fma(value * t1, t2, x),
    not the three roundings of x + value * (t1 * t2)."""
    x, a, b = (t.numpy() for t in _data(torch.float32))
    eager = torch.addcmul(*map(torch.from_numpy, (x, a, b)), value=value).numpy()
    va = np.float32(value) * a
    np.testing.assert_array_equal(eager, _fma_f32(va, b, x))
    assert (eager != x + np.float32(value) * (a * b)).sum() > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", [torch.addcmul, torch.addcdiv])
@pytest.mark.parametrize("value", VALUES)
def test_addcmul_and_addcdiv_are_eager_bit_for_bit(dev, op, dtype, value):
    x, a, b = _data(dtype)
    want = op(x, a, b, value=value)
    got = op(x.to(dev), a.to(dev), b.to(dev), value=value).cpu()
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_in_place_and_foreach_forms_are_eager_bit_for_bit(dev):
    x, a, b = _data(torch.float32, seed=1)
    want = x.clone().mul_(0.999).addcmul_(a, a, value=1 - 0.999)
    got = x.to(dev).mul_(0.999).addcmul_(a.to(dev), a.to(dev), value=1 - 0.999)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    wants = [x.clone(), a.clone()]
    torch._foreach_addcmul_(wants, [a, b], [b, x], value=0.3)
    torch._foreach_addcdiv_(wants, [b, x], [a, b], value=-0.7)
    gots = [x.to(dev), a.to(dev)]
    torch._foreach_addcmul_(gots, [a.to(dev), b.to(dev)], [b.to(dev), x.to(dev)], value=0.3)
    torch._foreach_addcdiv_(gots, [b.to(dev), x.to(dev)], [a.to(dev), b.to(dev)], value=-0.7)
    for u, v in zip(gots, wants):
        torch.testing.assert_close(u.cpu(), v, rtol=0, atol=0)


def test_fused_multiply_add_at_the_float32_edges(dev):
    """A product float32 cannot hold stays exact until the sum rounds (2e19 * 2e19 - 1e38
    is 3e38, not inf); infinities, NaN and signed zeros as eager's."""
    big, inf, nan = 2e19, float("inf"), float("nan")
    # (no subnormal results: XLA's CPU programs flush them to zero, every op's alike)
    x = torch.tensor([-1e38, 1e38, 0.0, -0.0, -0.0, 1.0, inf, 1.0, 1e-30, 1.0])
    a = torch.tensor([big, big, -0.0, -0.0, 0.0, nan, 1.0, inf, 1e-30, 3e38])
    b = torch.tensor([big, big, 1.0, 1.0, 1.0, 1.0, -inf, 0.0, 1e-30, -2.0])
    want = torch.addcmul(x, a, b)
    assert np.isfinite(want[0].item()) and want[1].item() == inf  # (eager's are fused)
    got = torch.addcmul(x.to(dev), a.to(dev), b.to(dev)).cpu()
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(got.signbit(), want.signbit())


@pytest.mark.parametrize("wide", [True, False], ids=["with float64", "without float64"])
def test_one_fused_multiply_add_on_every_platform(dev, monkeypatch, wide):
    """addcmul is one ``lazy.fma`` whether the platform has float64 (the CPU) or not
    (XLA on TPUs), and XLA's CPU programs compute it as eager does, each element
    ``fma(value * t1, t2, x)``: never ``(value * t1) * t2 + x`` rounded twice, nor
    ``x + value * (t1 * t2)``. (float32's was a float64 sum of the exact product
    where the platform has float64: 4 converts, a multiply and an add.)"""
    if not wide:
        monkeypatch.setattr(lazy_nn, "WIDE_PLATFORMS", frozenset())
    x, a, b = _data(torch.float32, seed=2)
    on_dev = [t.to(dev) for t in (x, a, b)]
    recorded = collections.Counter()
    made = graph.Node.__init__

    def spy(self, op, *args, **kwargs):
        recorded[op] += 1
        made(self, op, *args, **kwargs)

    lazycore.cache.clear()  # (lowered again)
    try:
        with monkeypatch.context() as m:
            m.setattr(graph.Node, "__init__", spy)
            out = torch.addcmul(*on_dev, value=0.3)
        got = out.cpu().numpy()
    finally:
        lazycore.cache.clear()
    # (value * t1, then the fma; the spy sees the lowering run)
    assert recorded["fma"] == 1 and not recorded["convert"], dict(recorded)
    xs, as_, bs = (t.numpy() for t in (x, a, b))
    va = np.float32(0.3) * as_
    plain, fused = va * bs + xs, _fma_f32(va, bs, xs)
    np.testing.assert_array_equal(got, torch.addcmul(x, a, b, value=0.3).numpy())
    np.testing.assert_array_equal(got, fused)
    assert (got != plain).sum() > 0 and (got != xs + np.float32(0.3) * (as_ * bs)).sum() > 0


def test_adams_second_moment_is_eager_bit_for_bit_every_step(dev):
    """Adam's exp_avg_sq was an ulp off eager's from the second step on while the lowering
    rounded addcmul three times."""

    def run(d):
        g = torch.Generator().manual_seed(0)
        params = [torch.randn(64, 32, generator=g).to(d).requires_grad_(),
                  torch.randn(301, generator=g).to(d).requires_grad_()]
        opt = torch.optim.Adam(params, lr=1e-3)
        seen = []
        for i in range(8):
            g = torch.Generator().manual_seed(100 + i)
            for p in params:
                p.grad = torch.randn(p.shape, generator=g).to(d)
            opt.step()
            if d.type == "lazy":
                ltorch.mark_step()
            seen.append([opt.state[p]["exp_avg_sq"].cpu().clone() for p in params])
        return seen

    for got, want in zip(run(dev), run(torch.device("cpu"))):
        for u, v in zip(got, want):
            torch.testing.assert_close(u, v, rtol=0, atol=0)
