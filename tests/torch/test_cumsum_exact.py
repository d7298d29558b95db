"""Float cumsum, cumprod and logcumsumexp on the lazy CPU device give eager CPU's bits (issue 39).

Eager's CPU kernel adds one element after another, carrying float32 in float64 and the half
types in float32, and rounds each output from the carry. The lowering's tree order
(Hillis-Steele) gave other bits, and a running sum of non-negative terms could go down by an
ulp (helper 8's reproducer below; scikit-learn's ``roc_auc_score`` raised on it in NumPy).
A program for a platform that does not take eager CPU's order (``scans.in_order``: GPUs and
TPUs) keeps the tree.
"""

import os
import sys

import numpy
import pytest
import torch

import lazycore
from lazycore.runtime.device import Device
from lazycore.trace import scans

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import bits_equal  # noqa: E402

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _data(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 3).to(dtype)


def _same(lazy, eager):
    assert lazy.dtype == eager.dtype and lazy.shape == eager.shape
    bits_equal(lazy.cpu().float().numpy() if eager.dtype is torch.bfloat16 else lazy.cpu().numpy(),
               eager.float().numpy() if eager.dtype is torch.bfloat16 else eager.numpy())


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [1, 2, 7, 200, 4097])
def test_1d_cumsum_is_eager_bit_for_bit(dev, no_fallback, dtype, n):
    x = _data(n, dtype, seed=n)
    _same(x.to(dev).cumsum(0), x.cumsum(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_2d_cumsum_along_each_dim(dev, no_fallback, dtype, dim):
    x = _data((37, 300), dtype, seed=1)
    _same(x.to(dev).cumsum(dim), x.cumsum(dim))


def test_non_contiguous_inputs(dev, no_fallback):
    x = _data((40, 6, 50), seed=2)
    lazy = x.to(dev)
    _same(lazy.transpose(0, 2).cumsum(1), x.transpose(0, 2).cumsum(1))
    _same(lazy[::3, :, 1::2].cumsum(0), x[::3, :, 1::2].cumsum(0))
    _same(lazy.permute(2, 0, 1)[:, 5].cumsum(-1), x.permute(2, 0, 1)[:, 5].cumsum(-1))
    _same(torch.cumsum(lazy, 1), torch.cumsum(x, 1))


def test_dtype_argument_casts_first_then_scans(dev, no_fallback):
    x = _data((3, 500), seed=3)
    _same(x.to(dev).cumsum(1, dtype=torch.float64), x.cumsum(1, dtype=torch.float64))
    _same(x.half().to(dev).cumsum(1, dtype=torch.float32), x.half().cumsum(1, dtype=torch.float32))
    # integers beyond float32's 2**24 round to float32 before the float64 carry adds them
    i = torch.randint(-2**40, 2**40, (2000,), generator=torch.Generator().manual_seed(4))
    _same(i.to(dev).cumsum(0, dtype=torch.float32), i.cumsum(0, dtype=torch.float32))
    # integer scans stay integer (exact in any order)
    _same(i.to(dev).cumsum(0), i.cumsum(0))


def test_in_place_and_out_forms(dev, no_fallback):
    x = _data((5, 301), seed=5)
    lazy = x.to(dev)
    lazy.cumsum_(1)
    _same(lazy, x.clone().cumsum_(1))
    out = torch.empty((5, 301), device=dev)
    torch.cumsum(x.to(dev), 0, out=out)
    _same(out, torch.cumsum(x, 0))


def test_special_values_as_eager(dev, no_fallback):
    inf, nan = float("inf"), float("nan")
    # (subnormals left out: XLA's CPU backend flushes them to zero, eager does not)
    for values in ([-0.0], [-0.0, -0.0, 1.0], [1.0, inf, -inf, 2.0], [nan, 1.0], [3e38, 3e38, -3e38, 1.0]):
        for dtype in (torch.float32, torch.float64):
            x = torch.tensor(values, dtype=dtype)
            _same(x.to(dev).cumsum(0), x.cumsum(0))
            _same(x.to(dev).cumprod(0), x.cumprod(0))


def test_complex_cumsum(dev, no_fallback):
    g = torch.Generator().manual_seed(6)
    x = torch.randn(1000, generator=g, dtype=torch.complex64)
    got, want = x.to(dev).cumsum(0).cpu(), x.cumsum(0)
    _same(torch.view_as_real(got), torch.view_as_real(want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_running_sums_of_non_negative_terms_never_go_down(dev, no_fallback, dtype):
    """helper 8's reproducer: half the terms 0, the tree's partial sums went down by an ulp."""
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        x = torch.rand(200, generator=g, dtype=dtype) * (torch.rand(200, generator=g, dtype=dtype) > 0.5)
        c = x.to(dev).cumsum(0).cpu()
        assert (c[1:] >= c[:-1]).all(), seed
        bits_equal(c.numpy(), x.cumsum(0).numpy())


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cumprod_is_eager_bit_for_bit(dev, no_fallback, dtype):
    x = (1 + 0.02 * _data((4, 3000), torch.float64, seed=7)).to(dtype)
    _same(x.to(dev).cumprod(1), x.cumprod(1))
    _same(x.to(dev).cumprod(0), x.cumprod(0))


def test_logcumsumexp(dev, no_fallback):
    """Eager's loop (``_log_add_exp_helper`` in the accumulator's type), its edges exactly;
    float32 rounds the float64 carry, so XLA's and glibc's exp and log1p agree there."""
    x = _data((3, 2000), seed=8)
    _same(x.to(dev).logcumsumexp(1), x.logcumsumexp(1))
    d = x.double()
    numpy.testing.assert_allclose(d.to(dev).logcumsumexp(1).cpu().numpy(), d.logcumsumexp(1).numpy(),
                                  rtol=4e-16, atol=0)
    inf, nan = float("inf"), float("nan")
    for values in ([-inf, -inf, 0.0], [inf, 1.0, inf], [1.0, nan, 2.0], [-inf, inf, -inf], [0.0, -inf]):
        e = torch.tensor(values)
        _same(e.to(dev).logcumsumexp(0), e.logcumsumexp(0))


@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum_backward_is_eager_bit_for_bit(dev, no_fallback, dim):
    """The backward is a reversed cumsum (flip, cumsum, flip) through the same lowering."""
    x = _data((50, 120), seed=9)
    w = _data((50, 120), seed=10)

    def grad(d):
        t = x.to(d).requires_grad_()
        (t.cumsum(dim) * w.to(d)).sum().backward()
        return t.grad

    _same(grad(dev), grad("cpu"))


def test_cumprod_backward_matches_eager(dev):
    x = 1 + 0.05 * _data((8, 60), seed=11)
    w = _data((8, 60), seed=12)

    def grad(d):
        t = x.to(d).requires_grad_()
        (t.cumprod(1) * w.to(d)).sum().backward()
        return t.grad.cpu()

    numpy.testing.assert_allclose(grad(dev).numpy(), grad("cpu").numpy(), rtol=1e-5, atol=1e-6)


def test_the_order_is_the_platforms():
    assert scans.in_order(Device("cpu", 0))
    assert not scans.in_order(Device("gpu", 0))
    assert not scans.in_order(Device("tpu", 0))


def test_another_platform_keeps_the_tree(dev, monkeypatch):
    """With the CPU taken out of the in-order platforms (as a GPU's program is lowered),
    the lowering makes no loop and gives the tree's float32 sums."""
    x = _data(333, seed=13)

    def lazy_cumsum():
        lazycore.cache.clear()  # (lowered again, not a recorded lowering)
        try:
            with lazycore.testing.capture() as cap:
                got = x.to(dev).cumsum(0).cpu()
            return got, cap.text("lazy")
        finally:
            lazycore.cache.clear()

    got, text = lazy_cumsum()
    assert "stablehlo.while" in text and "xf64>" in text
    bits_equal(got.numpy(), x.cumsum(0).numpy())
    monkeypatch.setattr(scans, "IN_ORDER_PLATFORMS", frozenset())
    got, text = lazy_cumsum()
    assert "while" not in text and "f64" not in text and "lazy.pad" in text
    h = x.numpy()  # the tree on the host: log2(n) shifted copies added in float32
    k = 1
    while k < h.size:
        h = h + numpy.concatenate([numpy.zeros(k, numpy.float32), h[:-k]])
        k *= 2
    bits_equal(got.numpy(), h)
    assert (got.numpy() != x.cumsum(0).numpy()).any()  # the orders differ on this data
