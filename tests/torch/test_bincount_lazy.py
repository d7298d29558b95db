"""``torch.bincount`` on the lazy device (frontends/torch/real_code_ops.py): eager's
counts and weighted sums bit for bit (sums in the input's order, as eager's loop
adds them), eager's dtypes and errors, with one value read and no fallback. It ran
eager's kernel before (a counted fallback and a barrier a call: scikit-learn's
``f1_score`` on torch arrays took 3)."""

import pytest
import torch

from lazycore.observe import metrics


@pytest.fixture(autouse=True)
def _reset():
    metrics.reset()
    yield


def _inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 7, (300,), generator=g)
    w = torch.randn(300, generator=g) * 1e3  # many float32 sums per bin: the order shows
    return [
        ((x,), {}),
        ((x, w), {}),
        ((x.to(torch.int32), w.double()), {}),
        ((x.to(torch.uint8), w.half()), {}),  # other weights: float64 sums
        ((x.to(torch.int16), torch.randint(-3, 3, (300,), generator=g)), {}),
        ((x,), {"minlength": 12}),
        ((x[:5], w[:5]), {"minlength": 3}),  # minlength below max + 1
        ((torch.tensor([4]),), {}),
        ((torch.zeros(0, dtype=torch.int64), torch.zeros(0)), {"minlength": 3}),  # eager: int64 zeros
    ]


def test_bincount_as_eager_without_fallback(dev):
    for args, kwargs in _inputs():
        want = torch.bincount(*args, **kwargs)
        got = torch.bincount(*[a.to(dev) for a in args], **kwargs).cpu()
        assert got.dtype == want.dtype and torch.equal(got, want), (args, kwargs, got, want)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()


@pytest.mark.parametrize("case", [
    lambda d: torch.bincount(torch.tensor([[1, 2]]).to(d)),
    lambda d: torch.bincount(torch.tensor(3).to(d)),
    lambda d: torch.bincount(torch.tensor([1.0, 2.0]).to(d)),
    lambda d: torch.bincount(torch.tensor([True, False]).to(d)),
    lambda d: torch.bincount(torch.tensor([-1, 2]).to(d)),
    lambda d: torch.bincount(torch.tensor([1, 2]).to(d), minlength=-1),
    lambda d: torch.bincount(torch.tensor([1, 2]).to(d), torch.ones(3).to(d)),
    lambda d: torch.bincount(torch.tensor([1, 2]).to(d), torch.ones(2, 1).to(d)),
], ids=["2d", "0d", "float", "bool", "negative", "minlength", "weights-length", "weights-2d"])
def test_bincount_errors_as_eager(dev, case):
    with pytest.raises(Exception) as want:
        case("cpu")
    with pytest.raises(Exception) as got:
        case(dev).cpu()
    assert isinstance(got.value, type(want.value)) and str(want.value) in str(got.value)
    assert metrics.counters().get("fallbacks", 0) == 0, metrics.fallbacks()
