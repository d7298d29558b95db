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


def _gcn(device, adj, feats, labels, steps=3):
    """Kipf and Welling's GCN as pygcn writes it: a sparse normalised adjacency
    moved to the device once, ``torch.spmm`` in every layer, Adam."""
    torch.manual_seed(0)
    w1, w2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)
    w1.to(device), w2.to(device)
    opt = torch.optim.Adam([*w1.parameters(), *w2.parameters()], lr=1e-2)
    adj, feats, labels = adj.to(device), feats.to(device), labels.to(device)
    losses, counts = [], []
    for _ in range(steps):
        before = metrics.counters()
        opt.zero_grad()
        h = torch.relu(torch.spmm(adj, w1(feats)))
        out = torch.sparse.mm(adj, w2(h))
        loss = torch.nn.functional.cross_entropy(out, labels)
        loss.backward()
        opt.step()
        lazycore.mark_step()
        losses.append(float(loss.detach().cpu()))
        after = metrics.counters()
        counts.append((after["fallbacks"] - before["fallbacks"], after["executions"] - before["executions"]))
    return losses, [p.detach().cpu() for p in (*w1.parameters(), *w2.parameters())], counts


def test_a_gcn_over_a_sparse_adjacency_moved_once_runs_on_the_device(dev):
    g = torch.Generator().manual_seed(3)
    n = 10
    edges = torch.randint(0, n, (2, 24), generator=g)
    edges = torch.cat([edges, torch.arange(n).repeat(2, 1)], 1)
    adj = torch.sparse_coo_tensor(edges, torch.rand(edges.shape[1], generator=g), (n, n)).coalesce()
    feats, labels = torch.randn(n, 6, generator=g), torch.randint(0, 3, (n,), generator=g)
    eager_losses, eager_params, _ = _gcn("cpu", adj, feats, labels)
    losses, params, counts = _gcn(dev, adj, feats, labels)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=1e-5, atol=1e-6)
    for p, e in zip(params, eager_params):
        torch.testing.assert_close(p, e, rtol=1e-5, atol=1e-6)
    assert _densified(torch.sparse_coo) == 1  # the move, once
    assert counts[1:] == [(0, 1)] * (len(counts) - 1), counts  # no fallback, one program a step


def test_host_coo_beside_lazy_tensors_falls_back_in_every_spelling(dev):
    i = torch.tensor([[0, 1, 1, 2], [2, 0, 2, 1]])
    a = torch.sparse_coo_tensor(i, torch.tensor([3.0, 4.0, 5.0, 6.0]), (3, 3))
    x = torch.randn(3, 4)
    for f in (torch.sparse.mm, torch.spmm, torch.mm, torch.matmul, lambda p, q: p @ q):
        got = f(a, x.to(dev))
        assert got.device.type == "lazy"
        torch.testing.assert_close(got.cpu(), f(a, x))
