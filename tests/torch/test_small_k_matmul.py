"""Small-K matrix products in eager's order (frontends/torch/ops/eager_loops.py ``gemm_chain``).

Eager's CPU GEMM computes each output of a float32/float64 ``mm``/``addmm`` with M and N of
16 or more as one fused multiply-add per k, in k order from +0 (an ``addmm``'s bias added
after); XLA's float32 dot sums otherwise: a policy network's first layer (REINFORCE's
16 x 6 observations through ``Linear(6, 32)``) was off eager in 219-286 of 512 outputs.
Where K is 2 to 16 and M * N * K at most 2**16 float32's lowering is that chain; elsewhere,
and in float64 (where XLA's dot gives eager's bits), the dot.
"""

import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch  # noqa: F401
from lazycore.observe import metrics, testing

DEV = "lazy"

SHAPES = [(16, 32, 6), (16, 16, 2), (64, 17, 3), (257, 31, 8), (16, 256, 16), (100, 20, 5)]


def _operands(m, n, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g, dtype=dtype), torch.randn(n, k, generator=g, dtype=dtype),
            torch.randn(n, generator=g, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_k_products_are_eagers_bit_for_bit(dtype):
    metrics.reset()
    pending = []  # (lazy, eager): read after one barrier
    for i, (m, n, k) in enumerate(SHAPES):
        x, w, bias = _operands(m, n, k, dtype, i)
        lx, lw, lb = x.to(DEV), w.to(DEV), bias.to(DEV)
        pending += [
            (F.linear(lx, lw, lb), F.linear(x, w, bias)),  # addmm(bias, x, w.t())
            (F.linear(lx, lw), F.linear(x, w)),  # mm of a transposed view
            (lx @ lw.t().contiguous(), x @ w.t().contiguous()),  # row-major operands
            (lx.t().contiguous().t() @ lw.t(), x.t().contiguous().t() @ w.t()),  # a column-major
            (torch.addmm(lb.expand(m, n).contiguous(), lx, lw.t()), torch.addmm(bias.expand(m, n), x, w.t())),
            (torch.addmm(lb, lx, lw.t(), beta=0), torch.addmm(bias, x, w.t(), beta=0)),
        ]
    lazycore.mark_step()
    off = [(i, int((got.cpu() != want).sum()), want.numel()) for i, (got, want) in enumerate(pending)
           if not torch.equal(got.cpu(), want)]
    assert off == [], off
    assert metrics.fallbacks() == {}


def test_a_zero_sum_is_plus_zero_as_eagers():
    # -0.0 * 0.0 = -0.0, but eager's chain starts from +0: every product -0 gives +0
    x = torch.randn(16, 3, dtype=torch.float64)
    w = torch.randn(16, 3, dtype=torch.float64)
    x[0] = -0.0
    w[0] = 0.0
    want = x @ w.t()
    got = (x.to(DEV) @ w.to(DEV).t()).cpu()
    assert not torch.signbit(want[0, 0]) and torch.equal(torch.signbit(got), torch.signbit(want))
    assert torch.equal(got, want)


@pytest.mark.parametrize("m, n, k", [(16, 32, 17), (8, 32, 6), (16, 1, 6), (256, 256, 16)])
def test_outside_the_established_orders_the_product_is_one_dot(m, n, k):
    """K above 16, M or N below 16 (other MKL kernels, other orders) and more than 2**16
    multiply-adds (the chain runs 1.5-3x the dot there): XLA's dot, not K elementwise steps."""
    x, w, bias = _operands(m, n, k, torch.float32, 0)
    with testing.capture() as cap:
        got = F.linear(x.to(DEV), w.to(DEV), bias.to(DEV))
        lazycore.mark_step()
    text = cap.text(stage="stablehlo")
    assert text.count("stablehlo.dot_general") == 1 and "stablehlo.slice" not in text, text
    torch.testing.assert_close(got.cpu(), F.linear(x, w, bias))


def test_in_the_established_orders_there_is_no_dot():
    x, w, bias = _operands(16, 32, 6, torch.float32, 0)
    with testing.capture() as cap:
        got = F.linear(x.to(DEV), w.to(DEV), bias.to(DEV))
        lazycore.mark_step()
    assert "stablehlo.dot_general" not in cap.text(stage="stablehlo")
    assert torch.equal(got.cpu(), F.linear(x, w, bias))
