"""``_foreach_*`` ops on lazy tensors run their single-tensor op per element:
eager's values, no fallback; an optimizer with ``foreach=True`` trains as
eager does."""

import pytest
import torch
import torch.nn.functional as F

from lazycore.observe import metrics
from _bits import BY_HAND  # (tests/ is on the path)


def _lists(dev, n=3):
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(2 + i, 3, generator=g) for i in range(n)]
    ys = [torch.randn(2 + i, 3, generator=g) for i in range(n)]
    return xs, ys, [x.to(dev) for x in xs], [y.to(dev) for y in ys]


def _close(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", [
    lambda xs, ys: torch._foreach_mul(xs, 1.5),
    lambda xs, ys: torch._foreach_mul(xs, ys),
    lambda xs, ys: torch._foreach_mul(xs, [2.0, 3.0, 4.0]),
    lambda xs, ys: torch._foreach_add(xs, ys, alpha=0.5),
    lambda xs, ys: torch._foreach_sqrt(torch._foreach_abs(xs)),
    lambda xs, ys: torch._foreach_norm(xs),
    lambda xs, ys: torch._foreach_norm(xs, 1),
    lambda xs, ys: torch._foreach_lerp(xs, ys, 0.25),
    lambda xs, ys: torch._foreach_addcmul(xs, ys, ys, value=0.5),
    lambda xs, ys: torch._foreach_pow(2.0, xs),
    lambda xs, ys: torch._foreach_maximum(xs, ys),
], ids=["mul-scalar", "mul-list", "mul-scalarlist", "add-alpha", "sqrt-abs", "norm", "norm-1", "lerp",
        "addcmul", "pow-scalar-base", "maximum"])
def test_functional_foreach_matches_eager(dev, op):
    xs, ys, lxs, lys = _lists(dev)
    f0 = metrics.counters()["fallbacks"]
    _close(op(lxs, lys), op(xs, ys))
    assert metrics.counters()["fallbacks"] == f0, metrics.fallbacks()


def test_inplace_foreach_matches_eager(dev):
    xs, ys, lxs, lys = _lists(dev)
    for a, b in ((xs, ys), (lxs, lys)):
        torch._foreach_mul_(a, 0.5)
        torch._foreach_add_(a, b, alpha=2.0)
        torch._foreach_addcdiv_(a, b, [torch.ones_like(t) * 4 for t in b], value=0.25)
        torch._foreach_mul_(a, torch.tensor(3.0) if a is xs else torch.tensor(3.0).to(dev))
        torch._foreach_zero_(b[:1])
    _close(lxs, xs)
    _close(lys, ys)


# CI: test_optim_corners.py's adamw_amsgrad_foreach variants and test_clip_grad_foreach.py[norm] take the same path
@BY_HAND
def test_foreach_optimizer_trains_as_eager(dev):
    def run(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
        g = torch.Generator().manual_seed(1)
        for _ in range(4):
            x, y = torch.randn(5, 6, generator=g).to(device), torch.randint(0, 3, (5,), generator=g).to(device)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    f0 = metrics.counters()["fallbacks"]
    _close(run(dev), run("cpu"))
    assert metrics.counters()["fallbacks"] == f0, metrics.fallbacks()
