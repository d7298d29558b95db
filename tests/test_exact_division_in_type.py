"""A float divide by a broadcast keeps its own type on CPU (lazy-to-stablehlo's ``division=exact``).

XLA turns ``divide(a, broadcast(b))`` into a multiply by ``1/b`` (up to an ulp off eager's
quotient). The exact form divides by ``b`` in a form XLA cannot see is a broadcast (its bits
xor an iota's NaN-ness: never, though XLA cannot tell), so XLA divides element by element,
whatever the dividend (a constant or a broadcast dividend too: integer linspace's step): float32 in float32 (before: through float64, whose ops in a
float32 loop made the fusion benchmark's 4M-element program 2.7 ms slower of 7), float64
without a remainder's correction (before: 30 ops), float16/bfloat16 in float32 as eager's
kernels. Their quotients are eager's bits (tests/test_exact_division.py,
tests/test_exact_float64_division.py check them over special and random bit patterns).
"""

import os
import sys

import numpy
import pytest
import torch

import lazycore
import lazycore.numpy as lnp
import lazycore.torch as lt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bits import bits_equal  # noqa: E402


def _divided(x: torch.Tensor, divisor: float):
    lazy = x.to(lt.device())
    lazycore.mark_step(wait=True)
    with lazycore.testing.capture() as cap:
        got = lazy / divisor
        lazycore.mark_step()
    return got.cpu(), cap.text("stablehlo")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_a_narrow_float_divides_without_float64(dtype):
    x = (torch.randn(50_000, generator=torch.Generator().manual_seed(3)) * 10).to(dtype)
    got, text = _divided(x, 0.3)
    assert "f64" not in text  # before: convert -> f64 divide -> convert
    assert "stablehlo.divide" in text and "stablehlo.xor" in text
    bits_equal(got.float(), (x / 0.3).float())  # (bfloat16 has no NumPy type; widening is exact)


def test_float64_divides_without_a_remainder_correction():
    x = torch.randn(50_000, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 10
    got, text = _divided(x, 3.0)
    assert "stablehlo.and" not in text and text.count("stablehlo.multiply") == 0  # before: 7 products, 3 ands
    bits_equal(got, x / 3.0)


def test_nan_dividends_stay_nan_and_the_rest_is_the_divisors():
    # (a one-element divide: the divisor's bits flip where the dividend is NaN, quotient NaN either way)
    a = numpy.array([numpy.nan, -numpy.nan, 1.0, -0.0, 0.0, numpy.inf, -numpy.inf, 3.0], numpy.float32)
    for b in (numpy.float32(0.0), numpy.float32(-0.0), numpy.float32(numpy.inf), numpy.float32(0.3)):
        with numpy.errstate(all="ignore"):
            want = a / b
        got = numpy.asarray(lnp.asarray(a) / lnp.asarray(b))
        assert numpy.array_equal(numpy.isnan(got), numpy.isnan(want))
        bits_equal(got[~numpy.isnan(want)], want[~numpy.isnan(want)])


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
def test_a_dividend_xla_can_fold_or_broadcast_divides_exactly(dtype):
    # The divisor flagged by the dividend's NaN-ness (f4428a0) was a broadcast again where XLA
    # folds the flag (a constant dividend: integer linspace's (end - start) / (n - 1), 50 to 1
    # in 50 steps gave 24 for 25) or sinks it (a dividend broadcast as the divisor is): then
    # multiplied by 1 / b, 270 and 348 of 900 / 1200 float64 quotients off eager's before.
    g = torch.Generator().manual_seed(5)
    row = (torch.randn(1, 300, generator=g, dtype=torch.float64) * 10).to(dtype)
    by_row = (torch.rand(1, 300, generator=g, dtype=torch.float64) + 0.1).to(dtype)
    by_col = (torch.rand(300, 1, generator=g, dtype=torch.float64) + 0.1).to(dtype)
    dev = lt.device()
    with lazycore.testing.capture() as cap:
        got = (row.to(dev).expand(4, 300) / by_row.to(dev).expand(4, 300),
               torch.full((300, 3), 7.0, dtype=dtype, device=dev) / by_col.to(dev))
        lazycore.mark_step()
    assert cap.text("stablehlo").count("stablehlo.xor") == 2
    want = (row.expand(4, 300) / by_row.expand(4, 300), torch.full((300, 3), 7.0, dtype=dtype) / by_col)
    for g_, w in zip(got, want, strict=True):
        assert torch.equal(_bits(g_.cpu()), _bits(w))


def test_integer_linspace_steps_as_eager():
    dev = lt.device()
    for n in (50, 37, 101):
        for start, end in ((50, 1), (1, 50), (-49, 0)):
            got = torch.linspace(start, end, n, dtype=torch.int64, device=dev).cpu()
            assert torch.equal(got, torch.linspace(start, end, n, dtype=torch.int64)), (start, end, n)
