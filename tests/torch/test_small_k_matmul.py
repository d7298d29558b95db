"""Small-K matrix products in eager's order (frontends/torch/ops/eager_loops.py ``gemm_chain``).

Eager's CPU GEMM computes each output of a float32/float64 ``mm``/``addmm`` of a small K with
M or N of 16 or more as one fused multiply-add per k, in k order from +0 (an ``addmm``'s bias
added after); XLA's float32 dot sums otherwise: a policy network's first layer (REINFORCE's
16 x 6 observations through ``Linear(6, 32)``) was off eager in 219-286 of 512 outputs.
Where K is 2 to 16 and the right operand's contiguous dimension (a linear layer's
``weight.t()``), float32's lowering is that chain, chosen by M's and N's buckets, or XLA's
dot of the operands laid out and fenced where that sums in the same order; elsewhere,
in float64 (where XLA's dot gives eager's bits) and in a symbolic export, the dot.
"""

import os
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazycore
import lazycore.torch as ltorch
from lazycore.observe import metrics, testing

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import INTEL_KERNELS  # noqa: E402

DEV = "lazy"

SHAPES = [(16, 32, 6), (16, 16, 2), (64, 17, 3), (200, 20, 8), (16, 256, 16), (100, 20, 5), (8, 32, 6),
          (2, 16, 4), (12, 5, 3)]


def _operands(m, n, k, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(m, k, generator=g, dtype=dtype), torch.randn(n, k, generator=g, dtype=dtype),
            torch.randn(n, generator=g, dtype=dtype))


def _stablehlo(fn):
    lazycore.mark_step()  # (an earlier test's live pending tensors would join this test's program)
    with testing.capture() as cap:
        got = fn()
        lazycore.mark_step()
    return got, cap.text(stage="stablehlo")


@INTEL_KERNELS
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_small_k_products_are_eagers_bit_for_bit(dtype):
    metrics.reset()
    pending = []  # (lazy, eager): read after one barrier
    for i, (m, n, k) in enumerate(SHAPES):
        if dtype is torch.float64 and min(m, n) < 16:
            continue  # (float64's dot is eager's order where both are 16 or more; below, neither is)
        x, w, bias = _operands(m, n, k, dtype, i)
        lx, lw, lb = x.to(DEV), w.to(DEV), bias.to(DEV)
        pending += [
            (F.linear(lx, lw, lb), F.linear(x, w, bias)),  # addmm(bias, x, w.t())
            (F.linear(lx, lw), F.linear(x, w)),  # mm of a transposed view
            (torch.addmm(lb.expand(m, n).contiguous(), lx, lw.t()), torch.addmm(bias.expand(m, n), x, w.t())),
            (torch.addmm(lb, lx, lw.t(), beta=0), torch.addmm(bias, x, w.t(), beta=0)),
        ]
        if m >= 8:  # (a column-major left operand: eager's chain from M = 8)
            pending.append((lx.t().contiguous().t() @ lw.t(), x.t().contiguous().t() @ w.t()))
    lazycore.mark_step()
    off = [(i, int((got.cpu() != want).sum()), want.numel()) for i, (got, want) in enumerate(pending)
           if not torch.equal(got.cpu(), want)]
    assert off == [], off
    assert metrics.fallbacks() == {}


@INTEL_KERNELS
def test_a_zero_sum_is_plus_zero_as_eagers():
    # -0.0 * 0.0 = -0.0, but eager's chain starts from +0: every product -0 gives +0
    for dtype in (torch.float64, torch.float32):
        x = torch.randn(16, 3, dtype=dtype)
        w = torch.randn(16, 3, dtype=dtype)
        x[0] = -0.0
        w[0] = 0.0
        want = x @ w.t()
        got = (x.to(DEV) @ w.to(DEV).t()).cpu()
        assert not torch.signbit(want[0, 0]) and torch.equal(torch.signbit(got), torch.signbit(want))
        assert torch.equal(got, want)


@pytest.mark.parametrize("m, n, k", [(16, 32, 17), (1, 32, 6), (16, 1, 6), (256, 256, 16), (200, 40, 8)])
def test_outside_the_established_orders_the_product_is_one_dot(m, n, k):
    """K above 16, M or N of 1 (eager's matrix-vector kernels, other orders) and more than 2**16
    multiply-adds by the buckets (the chain runs 1.5-3x the dot there): XLA's dot, not K
    elementwise steps."""
    x, w, bias = _operands(m, n, k, torch.float32, 0)
    got, text = _stablehlo(lambda: F.linear(x.to(DEV), w.to(DEV), bias.to(DEV)))
    assert text.count("stablehlo.dot_general") == 1 and "stablehlo.slice" not in text, text
    torch.testing.assert_close(got.cpu(), F.linear(x, w, bias))


@INTEL_KERNELS
def test_where_xlas_dot_sums_in_that_order_it_is_one_fenced_dot():
    """16 x 6 by 6 x 32 (the REINFORCE layer) and an LSTM step's 2 x 16 by 16 x 64: XLA's dot of
    the weight laid out K by N sums as eager's chain, one op instead of K slices and
    multiply-adds (an unrolled LSTM's program compiled 6x faster)."""
    for m, n, k in [(16, 32, 6), (2, 64, 16), (64, 2, 8)]:
        x, w, bias = _operands(m, n, k, torch.float32, 0)
        got, text = _stablehlo(lambda: F.linear(x.to(DEV), w.to(DEV), bias.to(DEV)))
        assert text.count("stablehlo.dot_general") == 1 and "stablehlo.slice" not in text, text
        assert torch.equal(got.cpu(), F.linear(x, w, bias))


@INTEL_KERNELS
def test_where_it_does_not_the_product_is_eagers_chain():
    """16 x 6 by 6 x 16: XLA's dot sums otherwise in either orientation (N and M below 32), so
    the chain: no dot, eager's bits."""
    x, w, bias = _operands(16, 16, 6, torch.float32, 0)
    got, text = _stablehlo(lambda: F.linear(x.to(DEV), w.to(DEV), bias.to(DEV)))
    assert "stablehlo.dot_general" not in text
    assert torch.equal(got.cpu(), F.linear(x, w, bias))


def test_a_contraction_over_the_right_operands_rows_is_a_dot():
    """A weight gradient (``x.t() @ grad``: K is the batch, the right operand's rows) is the
    dimension a batch mark pads, which a chain's K steps cannot: the dot there."""
    g = torch.Generator().manual_seed(1)
    grad, x = torch.randn(12, 24, generator=g), torch.randn(12, 8, generator=g)  # a batch of 12
    got, text = _stablehlo(lambda: grad.to(DEV).t() @ x.to(DEV))  # (24 x 12) @ (12 x 8)
    assert text.count("stablehlo.dot_general") == 1, text
    torch.testing.assert_close(got.cpu(), grad.t() @ x)


@INTEL_KERNELS
def test_a_padded_batch_shares_one_program_per_bucket():
    """A batch marked dynamic (padded to its bucket, 16 here): linear layers of K 6 forward
    (chains over the batch's bucket, not its size) and backward (the weight gradient a dot
    over the padded batch) are one program for batches 9 to 16, the forward eager's bits."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3))
    lazy = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)).to(DEV)
    lazy.load_state_dict(model.state_dict())
    compiles = []
    for b in (12, 9, 16, 13):
        x = torch.randn(b, 6)
        want = model[0](x)
        lazy.zero_grad()
        lx = ltorch.dynamic(x.to(DEV), 0)
        hidden = lazy[0](lx)
        lazy[2](lazy[1](hidden)).square().mean().backward()
        before = metrics.counters()["compiles"]
        ltorch.mark_step()
        compiles.append(metrics.counters()["compiles"] - before)
        assert torch.equal(hidden.cpu(), want)
    assert compiles == [1, 0, 0, 0], compiles


def test_a_symbolic_export_keeps_the_dot_and_no_recording_crosses():
    """``lazycore.export(dynamic=)`` traces at 3, 5 and 7 times the example's batch (12, 20,
    28): a chain's structure would change with the batch, so the export's products are dots
    (TRACE.symbolic), recorded apart from the chains the same signatures take outside it."""
    torch.manual_seed(2)
    lin = torch.nn.Linear(6, 16).to(DEV)  # (16 columns: a chain, XLA's dot sums otherwise there)
    x12 = torch.randn(12, 6)
    outside, text = _stablehlo(lambda: lin(x12.to(DEV)))  # a chain recorded at batch 12 first
    assert "stablehlo.dot_general" not in text
    exported = lazycore.export(lambda x: lin(x), torch.randn(4, 6).to(DEV), dynamic={0: {0: "b"}})
    assert exported.mlir_text.count("stablehlo.dot_general") == 1
    got = exported.call(x12.numpy())[0]
    np.testing.assert_allclose(got, outside.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    again, text = _stablehlo(lambda: lin(x12.to(DEV)))  # after it: the chain again
    assert "stablehlo.dot_general" not in text and torch.equal(again.cpu(), outside.cpu())
