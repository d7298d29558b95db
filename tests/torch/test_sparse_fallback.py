"""Sparse tensors and the lazy device, which has no sparse layouts: a sparse
tensor moved there, or made there by an op run on the CPU, arrives densified
with eager's values, and the conversion is a counted fallback; an op given a
host sparse tensor beside lazy ones runs as a counted fallback."""

import pytest
import torch

import lazycore
from lazycore.observe import metrics


@pytest.fixture(autouse=True)
def _fresh_counts():
    lazycore.mark_step()
    metrics.reset()


def _densified(layout):
    return sum(metrics.fallbacks().get(f"to_dense ({layout} on the lazy device)", {}).values())


def test_sparse_moved_to_the_device_is_densified_and_counted(dev):
    x = torch.randn(4, 6) * (torch.rand(4, 6) > 0.5)
    sp = x.to_sparse()
    lx = sp.to(dev)
    assert lx.device.type == "lazy" and lx.layout == torch.strided
    assert (lx.shape, lx.dtype) == (sp.shape, sp.dtype)
    torch.testing.assert_close(lx.cpu(), sp.to_dense())
    assert _densified(sp.layout) == 1
    torch.testing.assert_close((lx * 2 + 1).cpu(), sp.to_dense() * 2 + 1)


def test_to_sparse_on_the_device_counts_its_fallbacks(dev):
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    got = x.to(dev).to_sparse()
    torch.testing.assert_close(got.cpu(), x)
    fell = metrics.fallbacks()
    assert any(op.startswith("aten._to_sparse") for op in fell), fell
    assert _densified(torch.sparse_coo) == 1


def test_host_sparse_beside_lazy_tensors_falls_back(dev):
    torch.manual_seed(0)
    a = torch.randn(5, 5) * (torch.rand(5, 5) > 0.5)
    csr, d = a.to_sparse_csr(), torch.randn(5, 3)
    for reduce in ("sum", "mean", "amax"):
        got = torch.sparse.mm(csr, d.to(dev), reduce)
        assert got.device.type == "lazy"
        torch.testing.assert_close(got.cpu(), torch.sparse.mm(csr, d, reduce))
    assert "aten._sparse_mm_reduce_impl.default" in metrics.fallbacks()
    m1, m2 = torch.randn(5, 4), torch.randn(4, 5)
    want = torch.sparse.sampled_addmm(csr, m1, m2, alpha=0.5, beta=0.25)
    got = torch.sparse.sampled_addmm(csr, m1.to(dev), m2.to(dev), alpha=0.5, beta=0.25)
    torch.testing.assert_close(got.cpu(), want.to_dense())
    assert _densified(torch.sparse_csr) == 1
