"""torch.var_mean and batch norm's statistics on rows whose sum overflows float32:
eager's values, not inf and NaN.

Eager's CPU kernels take the mean as Welford's running mean, which never exceeds
the largest value: var_mean of a row of 3e38s is (0, 3e38), where a plain sum over
N overflows to inf (var_mean gave (inf, inf), and batch norm in train mode NaN
for the whole channel). The lowering shares layer norm's mean about the row's
first element (:mod:`lazycore.frontends.torch.ops.moments`).
"""

import pytest
import torch

import lazycore.torch as ltorch


@pytest.fixture(scope="module")
def dev():
    return ltorch.device()


def _rows(n):
    big = torch.full((n,), 3e38)
    spread = torch.linspace(1e38, 3e38, n)
    negative = -torch.linspace(2e38, 3.4e38, n)
    with_inf = torch.full((n,), 1e38)
    with_inf[3] = float("inf")
    with_nan = torch.full((n,), 2e38)
    with_nan[1] = float("nan")
    ordinary = torch.linspace(-2.0, 5.0, n) ** 2
    return torch.stack([big, spread, negative, with_inf, with_nan, ordinary, torch.full((n,), 2e19)])


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    assert torch.equal(got.isinf(), want.isinf()), (got, want)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("n", [7, 17, 64])
@pytest.mark.parametrize("kw", [dict(dim=1), dict(dim=1, correction=0), dict(dim=(1,), keepdim=True),
                                dict(dim=-1, correction=2)])
def test_var_mean_of_overflowing_rows_as_eager(dev, n, kw):
    x = _rows(n)
    want = torch.var_mean(x, **kw)
    got = [t.cpu() for t in torch.var_mean(x.to(dev), **kw)]
    for g, w in zip(got, want):
        _same(g, w)


def test_row_of_3e38s_is_variance_0_mean_3e38(dev):
    var, mean = (t.cpu() for t in torch.var_mean(torch.full((5,), 3e38).to(dev)))
    assert var.item() == 0.0 and mean.item() == torch.tensor(3e38).item()


def test_var_mean_over_leading_dims_and_halves(dev):
    """Rows that are columns (batch norm reduces every dim but the channel's), and
    bfloat16 (accumulated in float32, as eager does)."""
    x = _rows(9).T.contiguous()
    for kw in (dict(dim=0), dict(dim=(0,), correction=0)):
        for g, w in zip((t.cpu() for t in torch.var_mean(x.to(dev), **kw)), torch.var_mean(x, **kw)):
            _same(g, w)
    # (3.4e38 rounds to -inf in bfloat16: eager's running mean of a row whose last element is its
    # only infinity is that infinity, not NaN, an order effect of Welford's update left out here)
    xb = _rows(9).clamp(-3.3e38, 3.3e38).to(torch.bfloat16)
    for g, w in zip((t.cpu() for t in torch.var_mean(xb.to(dev), dim=1)), torch.var_mean(xb, dim=1)):
        assert g.dtype == torch.bfloat16
        _same(g.float(), w.float())


def test_batch_norm_statistics_as_eager(dev):
    """Train mode's saved mean and inverse deviation and its running statistics, with
    channels of 3e38s, of 2e19s (squares near float32's largest), spread over [-3e38, 3e38]
    (NaN in eager too: its running mean's steps overflow) and an ordinary one. (Not the
    output: eager's kernel computes it as ``x * a + (b - mean * a)``, which for a channel
    whose mean dwarfs its deviation cancels to noise such as -4.9e30 where the formula
    ``(x - mean) * invstd * w + b`` the decomposition keeps gives the bias.)"""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 3, 3, generator=g)
    x[:, 0] = 3e38
    x[:, 1] = 2e19
    x[:, 2] = torch.linspace(-3e38, 3e38, 18).reshape(2, 3, 3)
    w, b = torch.tensor([0.5, 2.0, 1.0, -1.0]), torch.tensor([0.25, -1.0, 0.0, 3.0])

    def run(device):
        rm, rv = torch.zeros(4).to(device), torch.ones(4).to(device)
        _, mean, invstd = torch.native_batch_norm(x.to(device), w.to(device), b.to(device), rm, rv, True, 0.1,
                                                  1e-5)
        return [t.cpu() for t in (mean, invstd, rm, rv)]

    names = ("save_mean", "save_invstd", "running_mean", "running_var")
    for name, got, want in zip(names, run(dev), run("cpu")):
        try:
            _same(got, want)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


def test_batch_norm_2d_train_forward_backward_as_eager(dev):
    """A channel whose sum overflows float32 (values in [5e37, 3e38]: its variance
    overflows too, so eager's inverse deviation is 0 and the output the bias), one of
    large values about 0 and an ordinary one: output, gradients and running statistics
    as eager's (the plain sum made the first channel's mean inf and all of it NaN)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 4, 4, generator=g)
    x[:, 0] = 5e37 + torch.rand(2, 4, 4, generator=g) * 2.5e38
    x[:, 1] = torch.randn(2, 4, 4, generator=g) * 1e18
    gy = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))

    def run(device):
        bn = torch.nn.BatchNorm2d(3).to(device)
        with torch.no_grad():
            bn.weight.copy_(torch.tensor([0.5, 2.0, -1.0]).to(device))
            bn.bias.copy_(torch.tensor([0.25, -1.0, 3.0]).to(device))
        xs = x.clone().to(device).requires_grad_()
        y = bn(xs)
        y.backward(gy.to(device))
        if device != "cpu":
            ltorch.mark_step(wait=True)
        return [t.detach().cpu() for t in (y, xs.grad, bn.weight.grad, bn.bias.grad, bn.running_mean,
                                            bn.running_var)]

    want = run("cpu")
    got = run(dev)
    names = ("output", "input grad", "weight grad", "bias grad", "running_mean", "running_var")
    for name, g_, w in zip(names, got, want):
        if name == "weight grad":
            # (the first channel's is sum(gy * (x - mean)) * invstd: eager sums in double, then
            # 0; the backward's decomposition sums in float32, inf * 0 = NaN; not var_mean's)
            g_, w = g_[1:], w[1:]
        try:
            _same(g_, w)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None
    assert torch.equal(got[0][:, 0], torch.full_like(got[0][:, 0], 0.25))
