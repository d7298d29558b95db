"""``torch.nn.utils`` parametrizations on the lazy device (issue 39): a
model whose layers carry ``parametrizations.weight_norm`` (or the older
``nn.utils.weight_norm`` hook) trains as eager's, with no fallback and one
program a step. ``_weight_norm_interface_backward`` had no lowering and no
decomposition: it fell back every step, a read of its inputs mid-step that
cut the step in two."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations

import lazycore
from lazycore.observe import metrics

STEPS, WARMUP = 4, 2


def _new_weight_norm(m, dim):
    return parametrizations.weight_norm(m, dim=dim)


def _old_weight_norm(m, dim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (deprecated for the parametrization)
        return nn.utils.weight_norm(m, dim=dim)


def _model(wrap):
    torch.manual_seed(0)
    return nn.Sequential(wrap(nn.Conv1d(3, 4, 3), 0), nn.Tanh(), nn.Flatten(),
                         wrap(nn.Linear(16, 5), 1), nn.ReLU(), wrap(nn.Linear(5, 2), 0))


def _train(model, batches, device, counts=None):
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for x in batches:
        before = metrics.counters()
        loss = model(x.to(device)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if counts is not None:
            lazycore.mark_step()
            after = metrics.counters()
            counts.append({k: after.get(k, 0) - before.get(k, 0) for k in ("compiles", "executions", "fallbacks")})
    return [float(v.cpu()) for v in losses]


@pytest.mark.parametrize("wrap", [_new_weight_norm, _old_weight_norm], ids=["parametrizations", "nn.utils"])
def test_a_weight_normed_model_trains_as_eager(dev, wrap):
    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(2, 3, 6, generator=g) for _ in range(STEPS)]
    eager = _model(wrap)  # (made twice: the old hook's weight is no leaf, which deepcopy refuses)
    lazy = _model(wrap).to(dev)
    counts: list = []
    got = _train(lazy, batches, dev, counts)
    want = _train(eager, batches, "cpu")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=0)
    for (name, p), q in zip(lazy.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
    assert all(c["fallbacks"] == 0 for c in counts), counts
    assert all(c["compiles"] == 0 and c["executions"] == 1 for c in counts[WARMUP:]), counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape, gshape, dim", [((5, 3, 2), (5, 1, 1), 0), ((5, 3), (1, 3), 1), ((6,), (6,), 0)])
def test_the_weight_norm_backward_is_eagers(dev, dtype, shape, gshape, dim):
    backward = torch.ops.aten._weight_norm_interface_backward.default
    g = torch.Generator().manual_seed(0)
    v, gain, grad = (torch.randn(s, generator=g).to(dtype) for s in (shape, gshape, shape))
    _, norms = torch._weight_norm_interface(v, gain, dim)
    want = backward(grad, v, gain, norms, dim)
    got = backward(grad.to(dev), v.to(dev), gain.to(dev), norms.to(dev), dim)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a.cpu(), b, rtol=1e-6, atol=1e-6)
