"""searchsorted, pdist, unique_consecutive and rrelu (eval and training) on the lazy
device: eager's values, and no fallback (each ran eager's CPU kernel on materialized
inputs, a counted fallback and a barrier, before ``frontends/torch/real_code_ops.py``)."""

import pytest
import torch

import lazycore as lc
from lazycore.observe import metrics

NAN = float("nan")


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()
    yield


def _same(got, want):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) if want.is_floating_point() else True
    ok = ~torch.isnan(want) if want.is_floating_point() else torch.ones_like(want, dtype=torch.bool)
    assert torch.equal(got[ok], want[ok]), (got, want)


def test_searchsorted_is_eagers_binary_search_without_fallback(dev):
    g = torch.Generator().manual_seed(0)
    seq = torch.sort(torch.randn(11, generator=g)).values
    vals = torch.cat([torch.randn(6, generator=g), seq[[0, 4, 4, 10]], torch.tensor([NAN, -1e9, 1e9])])
    with_nan = torch.tensor([1.0, 2.0, 2.0, NAN])  # no total order: a count of the smaller ones is not eager's
    rows = torch.sort(torch.randn(3, 7, generator=g), dim=-1).values
    row_vals = torch.randn(3, 4, generator=g)
    perm = torch.randperm(11, generator=g)
    shuffled, sorter = seq[perm], torch.argsort(seq[perm])
    shuffled_rows = torch.randn(3, 7, generator=g)  # each row searched through its own sorter
    cases = [
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(s, v),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(s, v, side="right", out_int32=True),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(w, torch.tensor([1.5, 2.0, 3.0, NAN], device=w.device)),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(w, torch.tensor([1.5, 2.0, 3.0, NAN], device=w.device),
                                                              right=True),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(r, rv),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(sh, v, sorter=so),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(s, 0.25),
        lambda s, v, w, r, rv, sh, so, sr: torch.searchsorted(sr, rv, sorter=torch.argsort(sr), right=True),
    ]
    args = (seq, vals, with_nan, rows, row_vals, shuffled, sorter, shuffled_rows)
    got = [f(*(a.to(dev) for a in args)) for f in cases]
    for f, g_ in zip(cases, got):
        _same(g_, f(*args))
    assert metrics.fallbacks() == {}


def test_pdist_without_fallback(dev):
    g = torch.Generator().manual_seed(1)
    small = torch.randn(6, 3, generator=g)  # under one CPU vector: eager's sum, element by element
    small[1] = small[0]
    wide = torch.randn(5, 37, generator=g)
    small64 = small.double()
    ps = [2.0, 1.0, 0.0, float("inf"), 3.0]
    got = [(torch.pdist(small.to(dev), p), torch.pdist(small64.to(dev), p), torch.pdist(wide.to(dev), p)) for p in ps]
    for p, (gs, g64, gw) in zip(ps, got):
        for g_, x in ((gs, small), (g64, small64)):
            if p in (0.0, 1.0, 2.0, float("inf")):
                _same(g_, torch.pdist(x, p))
            else:  # (eager's pow is SLEEF's)
                torch.testing.assert_close(g_.cpu(), torch.pdist(x, p))
        torch.testing.assert_close(gw.cpu(), torch.pdist(wide, p))
    for p in (2.0, 1.0, float("inf"), 3.0):  # the backward (_pdist_backward), equal rows included
        xl, xe = small.to(dev).requires_grad_(), small.clone().requires_grad_()
        weights = torch.arange(15.0)
        (torch.pdist(xl, p) * weights.to(dev)).sum().backward()
        (torch.pdist(xe, p) * weights).sum().backward()
        torch.testing.assert_close(xl.grad.cpu(), xe.grad)
    assert metrics.fallbacks() == {}


def test_unique_consecutive_without_fallback(dev):
    x = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2])
    f = torch.tensor([0.5, NAN, NAN, 0.5, 0.5, -0.0, 0.0])  # NaN is never equal to NaN: its own run
    m = torch.tensor([[1, 1], [1, 1], [2, 3], [2, 3], [1, 1]])
    calls = [
        (x, dict()), (x, dict(return_inverse=True)), (x, dict(return_counts=True)),
        (x, dict(return_inverse=True, return_counts=True)), (x.reshape(2, 4), dict(return_inverse=True)),
        (f, dict(return_counts=True)), (m, dict(dim=0, return_counts=True)), (m, dict(dim=1)),
        (torch.tensor(5), dict(return_inverse=True, return_counts=True)),
    ]
    for t, kw in calls:
        want = torch.unique_consecutive(t, **kw)
        got = torch.unique_consecutive(t.to(dev), **kw)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for g_, w in zip(got, want):
            _same(g_, w)
    # the raw op's unrequested outputs: eager's empty ones (with dim: computed anyway)
    for kw in (dict(), dict(dim=0)):
        for g_, w in zip(torch.ops.aten.unique_consecutive(m.to(dev), **kw),
                         torch.ops.aten.unique_consecutive(m, **kw)):
            _same(g_, w)
    assert metrics.fallbacks() == {}


def test_rrelu_without_fallback(dev):
    g = torch.Generator().manual_seed(2)
    x = torch.cat([torch.randn(40, generator=g), torch.tensor([0.0, -0.0, NAN, float("inf"), -float("inf")])])
    eval_mode = torch.nn.RReLU(0.1, 0.3).eval()
    got_eval = eval_mode(x.to(dev))
    got_f = torch.nn.functional.rrelu(x.to(dev), 0.2, 0.25, training=False)
    train_mode = torch.nn.RReLU(0.1, 0.3).train()
    xl = x.to(dev).requires_grad_()
    got_train = train_mode(xl)
    got_train.sum().backward()
    _same(got_eval, eval_mode(x))
    _same(got_f, torch.nn.functional.rrelu(x, 0.2, 0.25, training=False))
    out, grad = got_train.detach().cpu(), xl.grad.cpu()  # (the lazy device's draws: not eager's)
    pos = x > 0
    assert torch.equal(out[pos], x[pos]) and torch.equal(grad[pos], torch.ones(int(pos.sum())))
    neg = (x < 0) & torch.isfinite(x)
    noise = grad[neg]  # d(x * noise)/dx
    assert ((noise >= 0.1) & (noise <= 0.3)).all() and torch.equal(out[neg], x[neg] * noise)
    assert metrics.fallbacks() == {}
