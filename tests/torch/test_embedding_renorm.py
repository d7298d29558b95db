"""``embedding_renorm_`` (``nn.Embedding(max_norm=...)``) runs on the lazy
device as eager's CPU kernel: before, every forward fell back to eager's
kernel (a host round trip). The limit is put at a row's own norm and at the
median, so rows on both sides and at the edge of ``norm > max_norm`` decide
as eager's, and indices repeat (a row named twice is scaled once)."""

import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _bits import FULL, INTEL_KERNELS  # noqa: E402

# widths under one vector, one vector and a tail of 4 or more, several vectors and a short tail;
# the whole sweep (the tail rules of float32 and float64 at each size) with LAZYCORE_TEST_FULL=1
WIDTHS = [3, 5, 8, 13, 16, 50, 100] if FULL else [5, 13, 50]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
@pytest.mark.parametrize("width", WIDTHS)
def test_embedding_renorm_is_eagers_bits(dev, no_fallback, dtype, p, width):
    g = torch.Generator().manual_seed(width)
    w = torch.randn(300, width, generator=g, dtype=dtype)
    idx = torch.randint(0, 300, (2, 150), generator=g)
    norms = torch.stack([r.norm(p) for r in w])
    for limit in (float(norms[int(idx[0, 0])]), float(norms.median())):
        want = w.clone()
        torch.embedding_renorm_(want, idx, limit, p)
        got = w.to(dev)
        torch.embedding_renorm_(got, idx.to(dev), limit, p)
        assert int((got.cpu() != want).sum()) == 0


def test_embedding_renorm_bad_index_is_eagers_error(dev):
    w = torch.randn(5, 8).to(dev)
    torch.embedding_renorm_(w, torch.tensor([1, 7]).to(dev), 1.0, 2.0)
    with pytest.raises(IndexError, match="index 7 out of range"):
        w.cpu()


def _loop(device, linear: bool):
    """5 SGD steps of Embedding(50, 16, max_norm=1.0) (then Flatten and
    Linear(64, 3) if ``linear``), the gradient fed to ``backward``: the
    outputs, the parameters, the compile count after each step's barrier."""
    import lazycore
    from lazycore.observe import metrics

    torch.manual_seed(0)
    layers = [torch.nn.Embedding(50, 16, max_norm=1.0)]
    if linear:
        layers += [torch.nn.Flatten(), torch.nn.Linear(4 * 16, 3)]
    model = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(1)
    outs, compiles = [], []
    for _ in range(5):
        x = torch.randint(0, 50, (6, 4), generator=g).to(device)
        out = model(x)
        t = torch.randn(out.shape, generator=g).to(device)
        opt.zero_grad()
        out.backward(t)  # no loss sum: a float sum's order is not eager's on the lazy device yet
        opt.step()
        if device != "cpu":
            lazycore.mark_step()
            compiles.append(metrics.counters()["compiles"])
        outs.append(out.detach().cpu())
    return outs, [p.detach().cpu() for p in model.parameters()], compiles


def test_embedding_max_norm_sgd_loop_is_eagers_bits(dev, no_fallback):
    """The rows looked up are renormed every step (SGD pushes them past the
    limit again): outputs and weights are eager's bits, one program a step
    compiled once."""
    want_outs, want_params, _ = _loop("cpu", linear=False)
    outs, params, compiles = _loop(dev, linear=False)
    assert all(torch.equal(a, b) for a, b in zip(outs, want_outs))
    assert all(torch.equal(a, b) for a, b in zip(params, want_params))
    assert compiles[-1] == compiles[0], compiles


@INTEL_KERNELS
def test_embedding_max_norm_with_linear_loop(dev, no_fallback):
    """With a Linear after it the table is still eager's bits; the Linear's
    output and weights are within a few ulps (its 6 x 64 by 64 x 3 product
    and the bias gradient's sum are XLA's order: the same without max_norm)."""
    want_outs, want_params, _ = _loop("cpu", linear=True)
    outs, params, compiles = _loop(dev, linear=True)
    assert torch.equal(params[0], want_params[0])
    for a, b in zip(outs + params[1:], want_outs + want_params[1:]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    assert compiles[-1] == compiles[0], compiles
