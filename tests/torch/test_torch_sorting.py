"""torch.sort, argsort, msort and topk on the lazy device: one lazy.sort
(stablehlo.sort), eager's values and indices (stable, NaN the largest), no
fallback, every real dtype."""

import pytest
import torch

from lazycore.observe import metrics

NAN = float("nan")
FLOATS = torch.tensor([[3.0, NAN, 1.0, 1.0, -0.0, 0.0], [2.0, 5.0, NAN, -1.0, 7.0, 2.0]])
DISTINCT = torch.tensor([[3.0, NAN, 1.0, 4.0, -2.0, 0.5], [2.0, 5.0, NAN, -1.0, 7.0, 2.5]])


def _inputs():
    yield "f32", FLOATS
    yield "f16", FLOATS.half()
    yield "bf16", FLOATS.bfloat16()
    yield "f64", FLOATS.double()
    yield "i64", torch.tensor([[3, 1, 1, 2], [0, -5, 7, 7]])
    yield "i32", torch.tensor([[3, 1, 1, 2], [0, -5, 7, 7]], dtype=torch.int32)
    yield "u8", torch.tensor([[3, 1, 1, 200], [0, 5, 7, 7]], dtype=torch.uint8)
    yield "bool", torch.tensor([[True, False, True], [False, False, True]])


def _same(fn, x, dev):
    want = fn(x)
    got = fn(x.to(dev))
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("name,x", list(_inputs()), ids=[n for n, _ in _inputs()])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_match_eager(dev, name, x, descending):
    metrics.reset()
    for dim in (-1, 0):
        _same(lambda t: tuple(torch.sort(t, dim=dim, descending=descending)), x, dev)
        _same(lambda t: tuple(torch.sort(t, dim=dim, descending=descending, stable=True)), x, dev)
        _same(lambda t: torch.argsort(t, dim=dim, descending=descending), x, dev)
    assert metrics.counters()["fallbacks"] == 0


def test_msort_and_a_scalar(dev):
    _same(torch.msort, FLOATS, dev)
    _same(lambda t: tuple(torch.sort(t)), torch.tensor(2.5), dev)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_eager(dev, largest):
    """Eager's topk orders equal elements as its heap leaves them (no
    guarantee torch makes), so these rows have none."""
    metrics.reset()
    _same(lambda t: tuple(torch.topk(t, 3, largest=largest)), DISTINCT, dev)
    _same(lambda t: tuple(torch.topk(t, 1, dim=0, largest=largest)), DISTINCT, dev)
    assert metrics.counters()["fallbacks"] == 0


def test_sort_gradients_match_eager(dev):
    x = torch.tensor([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]])
    grads = []
    for device in ("cpu", dev):
        t = x.clone().to(device).requires_grad_()
        v, _ = torch.sort(t, dim=1, descending=True)
        (v * torch.arange(3.0, device=device)).sum().backward()
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0])
