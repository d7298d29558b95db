"""torch.var_mean and batch norm's statistics summed in float64, as eager's CPU kernels
sum them (issue 39): bitwise eager's where the sum's order cannot matter.

Eager's ``torch.var_mean`` on a float32, float16 or bfloat16 input is Welford's in
double, rounded once into the input's type; its batch-norm kernel sums a contiguous
input's channels in double (``acc_type<float>``) and rounds the mean once. A float32
sum rounds at every step: the statistics came out a few ulps off (45 ulps of a mean,
0.4 of a bfloat16 variance), and a row of 3e38s overflowed to (inf, inf) where eager
gives (0, 3e38). Channels-last inputs and (N, C) batches eager sums in float32 partial
sums per thread: those only within float32's tolerance.
"""

import pytest
import torch

import lazycore
from lazycore.frontends.torch.ops import moments

aten = torch.ops.aten

SHAPES = [  # (shape, dims): large N, small N, odd sizes, one row, leading dims only
    ((256, 64, 8, 8), (0, 2, 3)),
    ((2, 4, 3, 3), (0, 2, 3)),
    ((3, 5, 7), (0, 2)),
    ((4096,), (0,)),
    ((7, 300), (1,)),
    ((33, 9), (0,)),
]


def _x(shape, dtype, seed=0, offset=5.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 3 + offset).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("shape,ds", SHAPES, ids=[str(s) for s, _ in SHAPES])
def test_var_mean_is_eagers_bitwise(dev, shape, ds, correction, dtype):
    for seed in range(2):
        x = _x(shape, dtype, seed)
        want = torch.var_mean(x, dim=ds, correction=correction)
        got = [t.cpu() for t in torch.var_mean(x.to(dev), dim=ds, correction=correction)]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert torch.equal(g, w), (g - w).abs().max()


def _bn(x, dev, momentum=0.1):
    c = x.shape[1]
    g = torch.Generator().manual_seed(1)
    params = [torch.randn(c, generator=g), torch.randn(c, generator=g),
              torch.randn(c, generator=g), torch.rand(c, generator=g) + 0.5]
    eager = [p.clone() for p in params]
    lazy = [p.to(dev) for p in params]
    want = aten.native_batch_norm(x, *eager, True, momentum, 1e-5)
    got = aten.native_batch_norm(x.to(dev), *lazy, True, momentum, 1e-5)
    lazycore.mark_step()
    return [t.cpu() for t in got] + [p.cpu() for p in lazy[2:]], list(want) + eager[2:]


@pytest.mark.parametrize("shape", [(256, 64, 8, 8), (64, 32, 4, 4), (2, 4, 3, 3), (3, 5, 7)])
def test_batch_norm_mean_is_eagers_bitwise(dev, shape):
    """Contiguous (N, C, ...) inputs: eager sums each channel in double."""
    got, want = _bn(_x(shape, torch.float32, offset=3.0), dev)
    assert torch.equal(got[1], want[1]), (got[1] - want[1]).abs().max()
    for i in (0, 2, 3, 4):  # the output, invstd and running statistics: float32 arithmetic after the sums
        torch.testing.assert_close(got[i], want[i], rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("shape", [(4096, 8), (8, 16, 16, 16)])
def test_batch_norm_float32_partial_sums_within_tolerance(dev, shape):
    """(N, C) batches and channels-last inputs, which eager sums in float32 per thread."""
    x = _x(shape, torch.float32, offset=10.0)
    if len(shape) == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    got, want = _bn(x, dev)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _overflowing_rows(n):
    """Rows whose float32 sum overflows (not rows holding an infinity: there the mean is the
    sum's, inf, as eager's batch-norm kernel gives, where ``torch.var_mean``'s Welford gives
    NaN unless the infinity comes last)."""
    spread = torch.linspace(1e38, 3e38, n)
    with_nan = torch.full((n,), 2e38)
    with_nan[1] = float("nan")
    return torch.stack([torch.full((n,), 3e38), spread, -torch.linspace(2e38, 3.4e38, n),
                        with_nan, torch.full((n,), 2e19), torch.linspace(-2.0, 5.0, n) ** 2])


@pytest.mark.parametrize("n", [7, 64])
@pytest.mark.parametrize("kw", [dict(dim=1), dict(dim=1, correction=0), dict(dim=(1,), keepdim=True)])
def test_var_mean_of_overflowing_rows_is_eagers(dev, n, kw):
    x = _overflowing_rows(n)
    want = torch.var_mean(x, **kw)
    got = [t.cpu() for t in torch.var_mean(x.to(dev), **kw)]
    for g, w in zip(got, want):
        assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g.isinf(), w.isinf()), (g, w)
        assert torch.equal(g.nan_to_num(), w.nan_to_num()), (g, w)
    var, mean = got[0][0].item(), got[1][0].item()
    assert (var, mean) == (0.0, torch.tensor(3e38).item())


def test_batch_norm_on_a_channel_of_3e38s(dev):
    """The channel's sum overflows float32: eager's mean 3e38 and invstd 1/sqrt(eps), not
    inf and 0, and finite running statistics."""
    x = torch.randn(4, 2, 3)
    x[:, 0] = 3e38
    got, want = _bn(x, dev)
    for i in (1, 2, 3, 4):
        assert torch.isfinite(got[i]).all(), (i, got[i])
        torch.testing.assert_close(got[i], want[i], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got[0][:, 1], want[0][:, 1])


def test_statistics_sum_in_float32_where_the_platform_has_no_float64():
    assert [moments.accumulator(t, "cpu") for t in ("f32", "f16", "bf16", "f64")] == ["f64"] * 4
    assert moments.accumulator("f32", "gpu") == "f64"
    assert [moments.accumulator(t, "tpu") for t in ("f32", "f16", "bf16", "f64")] == ["f32"] * 3 + ["f64"]
