"""torch.var_mean and batch norm's statistics as eager's CPU kernels round them (issue 39).

Eager's ``torch.var_mean`` on a float16 or bfloat16 input is Welford's in double,
rounded once into the input's type: the lowering sums those in float64 (float32 on a
platform without it) and gives eager's bits, where summing in the input's own type was
0.4 off a bfloat16 variance. Float32 statistics (batch norm's among them) are float64
sums on the CPU too, as eager's (moments.accumulator says why)."""

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


def test_halves_sum_in_float32_where_the_platform_has_no_float64():
    assert [moments.accumulator(t, "cpu") for t in ("f16", "bf16", "f32", "f64")] == ["f64", "f64", "f64", "f64"]
    assert moments.accumulator("bf16", "gpu") == "f64"
    assert [moments.accumulator(t, "tpu") for t in ("f16", "bf16", "f32", "f64")] == ["f32", "f32", "f32", "f64"]
