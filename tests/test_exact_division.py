"""A float divide by a broadcast on CPU gives eager's correctly rounded quotient, bit for bit.

XLA rewrites ``divide(a, broadcast(b))`` into ``multiply(a, broadcast(1/b))``: before
lazy-to-stablehlo's ``division=exact`` (which the CPU compile path sets), ``x / 0.3`` in
float32 was off eager CPU torch and NumPy in about a quarter of the elements. The inputs
where a reduction is involved have integer values, so that the sum is exact whatever the
order it is added in and only the division is compared.
"""

import os
import sys

import numpy
import pytest
import torch

import lazycore.numpy as lnp
import lazycore.torch as lt
from lazycore.passes.pipeline import DEFAULT_PIPELINE
from lazycore.runtime import compiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bits import bits_equal  # noqa: E402


@pytest.fixture
def x():
    return torch.randn(200_000, generator=torch.Generator().manual_seed(0)) * 10


@pytest.mark.parametrize("divisor", [0.3, 3.0, 7.1, -1e-3])
def test_torch_scalar_divisor(x, divisor):
    bits_equal((x.to(lt.device()) / divisor).cpu(), x / divisor)


def test_torch_0d_tensor_divisor(x):
    d = torch.tensor(0.7)
    bits_equal((x.to(lt.device()) / d.to(lt.device())).cpu(), x / d)


def integers(shape, seed, low=1, high=1000):
    """Integer-valued float32: their sums are exact in any order."""
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed)).float()


def test_torch_keepdim_row_sums():
    w = integers((384, 301), 1)
    lazy = w.to(lt.device())
    bits_equal((lazy / lazy.sum(-1, keepdim=True)).cpu(), w / w.sum(-1, keepdim=True))


def test_torch_mean():
    w = integers((256, 300), 2, -1000, 1000)
    lazy = w.to(lt.device())
    bits_equal(lazy.mean(-1).cpu(), w.mean(-1))
    bits_equal(lazy.mean(0).cpu(), w.mean(0))


def test_torch_softmax_like():
    # weights over a row, normalized by their sum (exact: integer weights)
    w = integers((128, 257), 3)
    lazy = w.to(lt.device())

    def normalized(t):
        e = (t - t.amax(-1, keepdim=True)).abs() + 1
        return e / e.sum(-1, keepdim=True)

    bits_equal(normalized(lazy).cpu(), normalized(w))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_torch_narrow_floats_by_row_sums(dtype):
    w = integers((64, 33), 4, 1, 60).to(dtype)
    lazy = w.to(lt.device())
    want = w / w.sum(-1, keepdim=True)
    got = (lazy / lazy.sum(-1, keepdim=True)).cpu()
    bits_equal(got.view(torch.int16).numpy(), want.view(torch.int16).numpy())


# XLA's CPU flushes float32 subnormals to zero (operands and results, with or
# without this rewrite: 1e-45 / 1.0 is 0 there), so none is compared here.
SPECIAL = numpy.array(
    [0.0, -0.0, numpy.inf, -numpy.inf, numpy.nan, 1.0, -1.0, 1.1754944e-38, -1.1754944e-38, 3.4028235e38,
     -3.4028235e38, 1e38, 1e-30, 7.0, 0.1, 1.5, 3.0, 0.3, 2.0 ** -126, 2.0 ** 127],
    numpy.float32,
)
TINY = numpy.finfo(numpy.float32).tiny


def random_float32(n, seed):
    """Random bit patterns over every exponent but the subnormals' (huge and tiny), NaN and inf left out."""
    bits = numpy.random.default_rng(seed).integers(0, 2**32, n, dtype=numpy.uint64).astype(numpy.uint32)
    values = bits.view(numpy.float32)
    return values[numpy.isfinite(values) & (numpy.abs(values) >= TINY)]


def test_torch_special_and_random_bit_patterns():
    a = numpy.concatenate([SPECIAL, random_float32(2_000_000, 5)])
    lazy_a = torch.from_numpy(a).to(lt.device())
    divisors = numpy.concatenate([SPECIAL, random_float32(24, 6)])
    for b in divisors:
        d = torch.tensor(b)  # a 0-d tensor: one program for every divisor
        with numpy.errstate(all="ignore"):
            want = a / b
        got = (lazy_a / d.to(lt.device())).cpu().numpy()
        normal = ~((numpy.abs(want) < TINY) & (want != 0))
        assert normal.sum() > len(a) // 2
        bits_equal(got[normal], want[normal])


def test_numpy_scalar_divisor(rng):
    a = rng.standard_normal(200_000).astype(numpy.float32) * 10
    bits_equal(numpy.asarray(lnp.asarray(a) / 3.0), a / numpy.float32(3.0))
    bits_equal(numpy.asarray(lnp.asarray(a) / 0.3), a / numpy.float32(0.3))


def test_numpy_mean(rng):
    a = rng.integers(-1000, 1000, (256, 300)).astype(numpy.float32)
    bits_equal(numpy.asarray(lnp.mean(lnp.asarray(a), axis=-1)), numpy.mean(a, axis=-1))
    bits_equal(numpy.asarray(lnp.mean(lnp.asarray(a), axis=0)), numpy.mean(a, axis=0))


def test_the_option_is_set_for_cpu_only():
    cpu = compiler.for_platform(DEFAULT_PIPELINE, "cpu")
    assert "lazy-to-stablehlo{division=exact}" in cpu.split(",")
    assert compiler.for_platform(DEFAULT_PIPELINE, None) == cpu  # compile_module's default device
    assert compiler.for_platform(DEFAULT_PIPELINE, "gpu") == DEFAULT_PIPELINE
    # a pipeline that says what it wants keeps it
    own = DEFAULT_PIPELINE.replace("lazy-to-stablehlo", "lazy-to-stablehlo{division=xla}")
    assert compiler.for_platform(own, "cpu") == own


def test_linspace_by_three():
    # tests/test_rewrites_nonfinite.py's strict xfail of XLA's A / Broadcast(B) rounding, until this
    x = torch.linspace(-1000, 1000, 999)
    bits_equal((x.to(lt.device()) / 3.0).cpu(), x / 3.0)
