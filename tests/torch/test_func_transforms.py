"""``torch.func`` and forward-mode AD on the lazy device (issue 39): the
transforms users' research code runs on their own models, against eager's
values, with no fallback.

- Forward AD gives a tensor that is not dual (a module's weight, a constant)
  a zero tangent made by ``_efficientzerotensor``: it fell back, and the
  upload of eager's ZeroTensor raised ("Cannot convert a ZeroTensor to
  numpy"), so ``jacfwd``, ``hessian`` and ``forward_ad`` through any module
  crashed.
- vmap's batching rule hands ``tanh_backward``/``sigmoid_backward`` a batched
  gradient beside an unbatched output, which eager broadcasts: ``jacrev``
  over a model's parameters (an NTK) raised a ShapeError.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.func import functional_call, hessian, jacfwd, jacrev

import lazycore
from lazycore.observe import metrics


def _fallbacks() -> int:
    return sum(sum(v.values()) for v in metrics.fallbacks().values())


def _both(fn, dev):
    """``fn(device)`` on the CPU and on ``dev``; the lazy run's results on the
    host and its fallback count."""
    torch.manual_seed(0)
    want = fn("cpu")
    torch.manual_seed(0)
    before = _fallbacks()
    got = fn(dev)
    lazycore.mark_step()
    got = torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, got)
    return got, want, _fallbacks() - before


def _model(d):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 5), nn.Sigmoid(), nn.Linear(5, 2)).to(d)


def test_jacfwd_and_hessian_through_a_module_with_weights(dev):
    def fn(d):
        m = _model(d)
        x = torch.linspace(-1, 1, 4).to(d)
        return jacfwd(m)(x), hessian(lambda v: m(v).square().sum())(x)

    got, want, fallbacks = _both(fn, dev)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert fallbacks == 0


def test_jacrev_over_a_models_parameters(dev):
    def fn(d):
        m = _model(d)
        x = torch.linspace(-1, 1, 12).reshape(3, 4).to(d)
        params = dict(m.named_parameters())
        return jacrev(lambda p: functional_call(m, p, (x,)))(params)

    got, want, fallbacks = _both(fn, dev)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert fallbacks == 0
