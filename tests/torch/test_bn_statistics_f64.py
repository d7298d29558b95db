"""torch.var_mean and batch norm's statistics as eager's CPU kernels round them (issue 39).

Eager's ``torch.var_mean`` on a float16 or bfloat16 input is Welford's in double,
rounded once into the input's type: the lowering sums those in float64 (float32 on a
platform without it) and gives eager's bits, where summing in the input's type was 0.4
off a bfloat16 variance. Float32 rows keep their float32 sums (within a few ulps of
eager's double ones: see moments.var_mean for why not float64 throughout) except where
those overflow: a row of 3e38s is eager's (0, 3e38), not (inf, inf), and batch norm on
such a channel gives eager's statistics instead of inf and 0.
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


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("shape,ds", SHAPES, ids=[str(s) for s, _ in SHAPES])
def test_var_mean_is_eagers(dev, shape, ds, correction, dtype):
    """Bitwise for the halves; float32 within float32's tolerance."""
    for seed in range(2):
        x = _x(shape, dtype, seed)
        want = torch.var_mean(x, dim=ds, correction=correction)
        got = [t.cpu() for t in torch.var_mean(x.to(dev), dim=ds, correction=correction)]
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            if dtype == torch.float32:
                torch.testing.assert_close(g, w, rtol=2e-6, atol=2e-6)
            else:
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


@pytest.mark.parametrize("shape,channels_last", [((256, 64, 8, 8), False), ((2, 4, 3, 3), False), ((3, 5, 7), False),
                                                 ((4096, 8), False), ((8, 16, 16, 16), True)])
def test_batch_norm_statistics_within_float32_rounding(dev, shape, channels_last):
    """The output, saved mean and invstd, and running statistics: large N, small N, (N, C)
    batches and channels-last inputs (which eager sums in float32 partial sums per thread)."""
    x = _x(shape, torch.float32, offset=10.0)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    got, want = _bn(x, dev)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _overflowing_rows(n):
    """Rows whose float32 sum overflows (not rows holding an infinity: there the mean is the
    sum's, inf, as eager's batch-norm kernel gives, where ``torch.var_mean``'s Welford gives
    NaN unless the infinity comes last; nor a row of 2e19s, whose float32 sum is finite
    but its mean one ulp off, so its variance 5.6e24 where eager's is 0)."""
    spread = torch.linspace(1e38, 3e38, n)
    with_nan = torch.full((n,), 2e38)
    with_nan[1] = float("nan")
    return torch.stack([torch.full((n,), 3e38), spread, -torch.linspace(2e38, 3.4e38, n),
                        with_nan, torch.linspace(-2.0, 5.0, n) ** 2])


@pytest.mark.parametrize("n", [7, 64])
@pytest.mark.parametrize("kw", [dict(dim=1), dict(dim=1, correction=0), dict(dim=(1,), keepdim=True)])
def test_var_mean_of_overflowing_rows_is_eagers(dev, n, kw):
    x = _overflowing_rows(n)
    want = torch.var_mean(x, **kw)
    got = [t.cpu() for t in torch.var_mean(x.to(dev), **kw)]
    for g, w in zip(got, want):
        assert torch.equal(g.isnan(), w.isnan()) and torch.equal(g.isinf(), w.isinf()), (g, w)
        torch.testing.assert_close(g, w, rtol=2e-6, atol=0, equal_nan=True)
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
