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
- ``linearize`` traces its jvp with ``make_fx``, which recorded lazycore's
  meta and host tensors and kept each lazy result as a constant: its jvp
  function returned zeros for every tangent, silently.
- Forward AD asks ``_has_same_storage_numel`` at every dual it makes and
  ``_new_zeros_with_same_feature_meta`` for a tangent of another layout:
  both fell back, each a read of its inputs mid-step.
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn
from torch.func import functional_call, hessian, jacfwd, jacrev, jvp, linearize

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


def test_forward_ad_dual_through_a_module(dev):
    def fn(d):
        m = _model(d)
        x = torch.linspace(-1, 1, 12).reshape(3, 4).to(d)
        params = {k: v.detach() for k, v in m.named_parameters()}
        with fwAD.dual_level():
            dual = {k: fwAD.make_dual(p, torch.ones_like(p)) for k, p in params.items()}
            primal, tangent = fwAD.unpack_dual(functional_call(m, dual, (x,)))
            return primal, tangent

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


def test_linearize_gives_the_jvp_of_each_tangent(dev):
    def fn(d):
        x = torch.linspace(-1, 1, 5).to(d)
        lin = nn.Linear(5, 3).to(d)
        _, jf = linearize(lambda v: lin(torch.tanh(v) * v.exp()), x)
        return [jf(torch.full((5,), s).to(d)) for s in (1.0, -2.0)]

    got, want, fallbacks = _both(fn, dev)
    assert not torch.equal(want[0], torch.zeros(3))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert fallbacks == 0


def test_jvp_reads_nothing_mid_step(dev):
    def fn(d):
        x = torch.linspace(-1, 1, 6).to(d)
        return jvp(lambda v: torch.tanh(v) * v.exp(), (x,), (torch.ones(6).to(d),))

    lazycore.mark_step()
    before = metrics.counters().get("executions", 0)
    got, want, fallbacks = _both(fn, dev)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)
    assert fallbacks == 0
    assert metrics.counters().get("executions", 0) - before == 1  # the mark_step's program


def test_a_tangent_of_a_view_is_laid_out_as_eagers(dev):
    """A view's storage is its base's: eager answers for the base's, and lays
    the zero tangent out over a storage that large."""
    same = torch.ops.aten._has_same_storage_numel.default
    zeros_like = torch.ops.aten._new_zeros_with_same_feature_meta.default
    for d in ("cpu", dev):
        base = torch.arange(16.0).reshape(4, 4).to(d)
        view = base[1:2]
        assert same(view, base) and not same(view, torch.ones(4).to(d))
        z = zeros_like(torch.ones(3, 4).to(d), view, self_num_batch_dims=1)
        assert (tuple(z.shape), z.stride(), z.storage_offset()) == ((3, 1, 4), (16, 4, 1), 4)
        assert torch.equal(z.cpu(), torch.zeros(3, 1, 4))
