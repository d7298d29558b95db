"""``torch.cdist``'s gradient (``aten._cdist_backward``) on the lazy device: eager's
per-pair formulas for every norm, no fallback. It ran eager's CPU kernel before
(frontends/torch/real_code_ops.py): a counted fallback and a barrier per operand a
step, so a Chamfer-distance autoencoder ran 2 programs a step (hunt 31t)."""

import pytest
import torch

from lazycore.observe import metrics

INF = float("inf")


def _grads(dev, p, a, b, seed):
    out = []
    for device in (dev, torch.device("cpu")):
        x1, x2 = a.to(device).requires_grad_(), b.to(device).requires_grad_()
        d = torch.cdist(x1, x2, p=p, compute_mode="donot_use_mm_for_euclid_dist")
        (d * seed.to(device)).sum().backward()
        out.append((d.detach().cpu(), x1.grad.cpu(), x2.grad.cpu()))
    return out


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, 1.5, 3.0, INF, 0.0])
@pytest.mark.parametrize("shapes", [((5, 3), (4, 3)), ((2, 5, 3), (4, 3)), ((2, 1, 4, 10), (3, 6, 10))])
def test_cdist_gradient_as_eager_without_fallback(dev, p, shapes):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(*shapes[0], generator=g), torch.randn(*shapes[1], generator=g)
    first = b.reshape(-1, b.shape[-1])
    a[..., 1, :] = first[0]  # a zero distance: eager's gradient there is 0
    a[..., 0, 0] = first[1, 0]  # a zero difference in one coordinate
    seed = torch.randn(torch.cdist(a, b).shape, generator=g)
    metrics.reset()
    (d, g1, g2), (wd, w1, w2) = _grads(dev, p, a, b, seed)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
    if p in (0.0, 1.0, 2.0, INF) and shapes[0][:-2] != (2, 1):  # x1 not broadcast
        # eager's bits: its order of each sum (the coordinates, x2's rows), its fused multiply-add
        assert torch.equal(d, wd) and torch.equal(g1, w1) and torch.equal(g2, w2), (p, g1 - w1, g2 - w2)
    else:  # |d|^(p-1) is eager's vectorized pow (Sleef; |d|^-0.5 near 0 is large), autograd's sum of a broadcast batch
        torch.testing.assert_close(d, wd, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(g1, w1, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g2, w2, rtol=1e-5, atol=1e-5)


def test_cdist_gradient_float64_and_empty(dev):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(3, 6, 4, generator=g, dtype=torch.float64), torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    seed = torch.randn(3, 6, 5, generator=g, dtype=torch.float64)
    metrics.reset()
    (_, g1, g2), (_, w1, w2) = _grads(dev, 2.0, a, b, seed)
    torch.testing.assert_close(g1, w1, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(g2, w2, rtol=1e-13, atol=1e-14)
    e1, e2 = torch.randn(0, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    (_, g1, g2), (_, w1, w2) = _grads(dev, 2.0, e1, e2, torch.ones(0, 5, dtype=torch.float64))
    assert g1.shape == w1.shape and torch.equal(g2, w2)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
