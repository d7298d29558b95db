"""``torch.nn.utils`` gradient clipping with ``foreach=True`` on the lazy
device (issue 39): eager's CPU runs it, and on the lazy device torch's
device-type check raised "foreach=True was passed, but can't use the foreach
API on lazy tensors". Now it clips as eager's, through the ``_foreach_*``
ops, with no fallback."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import lazycore
from lazycore.observe import metrics


def _clip_norm(params):
    return nn.utils.clip_grad_norm_(params, 0.3, foreach=True)


def _clip_inf_norm(params):
    return nn.utils.clip_grad_norm_(params, 0.3, norm_type=float("inf"), foreach=True)


def _clip_value(params):
    nn.utils.clip_grad_value_(params, 0.05, foreach=True)
    return nn.utils.get_total_norm([p.grad for p in params], foreach=True)


def _train(model, batches, device, clip):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    out = []
    for x in batches:
        loss = model(x.to(device)).square().mean()
        opt.zero_grad()
        loss.backward()
        norm = clip(list(model.parameters()))
        opt.step()
        out.append(torch.stack([loss.detach(), norm.detach()]))
        lazycore.mark_step()
    return [v.cpu() for v in out]


@pytest.mark.parametrize("clip", [_clip_norm, _clip_inf_norm, _clip_value], ids=["norm", "inf-norm", "value"])
def test_foreach_clipping_trains_as_eager(dev, clip):
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(4, 6, generator=g) for _ in range(3)]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    eager = copy.deepcopy(model)
    lazy = model.to(dev)
    before = sum(sum(v.values()) for v in metrics.fallbacks().values())
    got = _train(lazy, batches, dev, clip)
    assert sum(sum(v.values()) for v in metrics.fallbacks().values()) == before
    want = _train(eager, batches, "cpu", clip)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)
    for p, q in zip(lazy.parameters(), eager.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
