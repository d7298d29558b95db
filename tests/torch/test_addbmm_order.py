"""``torch.addbmm`` adds its batches in eager's CPU order (LinearAlgebra.cpp's
addbmm_impl_: ``result.addmm_(b1[i], b2[i], beta, alpha)`` batch by batch, so
``beta * self + p0``, then ``+ p1``, ``+ p2`` ...), bit for bit wherever each
batch's product is eager's (the products are XLA's dots, eager's are its BLAS's:
equal on most small shapes on this CPU; a case whose products differ is not a
test of the order and is counted apart). One program per dtype holds every case."""

import os
import sys

import numpy as np
import pytest
import torch

import lazycore as lc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import INTEL_KERNELS  # noqa: E402

SHAPES = {  # (batches, rows, inner, columns)
    torch.float32: [(3, 5, 7, 2), (10, 3, 4, 5), (5, 64, 64, 64), (70, 3, 4, 5), (4, 6, 5, 3)],
    torch.float64: [(4, 8, 16, 16), (6, 16, 32, 8), (5, 64, 64, 64), (12, 4, 6, 3), (70, 3, 4, 5)],
}
SCALES = [(1, 1), (0, 1)]  # (beta, alpha): other scales eager's GEMM applies inside its kernel


@INTEL_KERNELS
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_addbmm_sums_its_batches_in_eager_order(dev, dtype):
    g = torch.Generator().manual_seed(0)
    cases = []
    for b, n, m, p in SHAPES[dtype]:
        x = torch.randn(n, p, generator=g, dtype=dtype)
        b1 = torch.randn(b, n, m, generator=g, dtype=dtype)
        b2 = torch.randn(b, m, p, generator=g, dtype=dtype)
        cases.append((x, b1, b2, torch.bmm(b1.to(dev), b2.to(dev)),
                      [torch.addbmm(x.to(dev), b1.to(dev), b2.to(dev), beta=beta, alpha=alpha)
                       for beta, alpha in SCALES]))
    lc.mark_step()
    off, tested = [], 0
    for x, b1, b2, prods, got in cases:
        if not torch.equal(prods.cpu(), torch.stack([b1[i] @ b2[i] for i in range(b1.shape[0])])):
            continue  # (the products differ already)
        tested += 1
        for (beta, alpha), g_ in zip(SCALES, got):
            want = torch.addbmm(x, b1, b2, beta=beta, alpha=alpha)
            off.append(int((g_.cpu() != want).sum()))
    print(f"{tested} of {len(cases)} shapes have eager's products")
    if not tested:
        pytest.skip("no shape whose batch products are eager's bit for bit on this CPU")
    assert off == [0] * len(off), off  # (before: one contraction, off in 4 to 3753 outputs each)


def test_addbmm_beta_zero_ignores_a_nan_self_and_no_batches_scale_self(dev):
    x = torch.full((3, 4), float("nan"))
    b1, b2 = torch.randn(5, 3, 2), torch.randn(5, 2, 4)
    want = torch.addbmm(x, b1, b2, beta=0)
    got = torch.addbmm(x.to(dev), b1.to(dev), b2.to(dev), beta=0).cpu()
    assert not torch.isnan(want).any() and not torch.isnan(got).any()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)
    y = torch.randn(3, 4).bfloat16()
    e1, e2 = torch.randn(0, 3, 2).bfloat16(), torch.randn(0, 2, 4).bfloat16()
    for beta in (0, 1, 0.3):
        want = torch.addbmm(y, e1, e2, beta=beta)
        got = torch.addbmm(y.to(dev), e1.to(dev), e2.to(dev), beta=beta).cpu()
        assert torch.equal(got, want), beta
