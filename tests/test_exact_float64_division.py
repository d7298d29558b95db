"""A float64 divide by a broadcast on CPU is correctly rounded: eager's and NumPy's bits.

XLA rewrites ``divide(a, broadcast(b))`` into ``multiply(a, broadcast(1/b))``, and float64
has nothing wider to divide in (float32 and the half types divide in float64,
tests/test_exact_division.py): ``x / 3.0`` in float64 was one ulp off in a third of the
elements. Under lazy-to-stablehlo's ``division=exact`` (the CPU compile path) the quotient
is corrected by its exactly computed remainder. Subnormal inputs and results are left
out: XLA's CPU backend flushes them to zero, eager does not.
"""

import os
import sys

import numpy
import pytest
import torch

import lazycore.numpy as lnp
import lazycore.torch as lt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bits import bits_equal  # noqa: E402


@pytest.fixture(scope="module")
def x():
    """float64 values of magnitudes 1e-9 to 1e9 either sign."""
    g = torch.Generator().manual_seed(0)
    n = 200_000
    return torch.randn(n, generator=g, dtype=torch.float64) * torch.exp(
        torch.rand(n, generator=g, dtype=torch.float64) * 40 - 20)


@pytest.mark.parametrize("divisor", [3.0, 7.1, 1 / 3, -1e-3, 1e-280, 1e280])
def test_torch_float64_scalar_divisor(x, divisor):
    bits_equal((x.to(lt.device()) / divisor).cpu(), x / divisor)


def test_torch_float64_0d_tensor_divisor(x):
    d = torch.tensor(0.7, dtype=torch.float64)
    bits_equal((x.to(lt.device()) / d.to(lt.device())).cpu(), x / d)


def test_torch_float64_mean_and_keepdim_row_sum():
    # integer values: the sums are exact in any order, only the division is compared
    m = torch.randint(-1000, 1000, (2000, 30), generator=torch.Generator().manual_seed(1)).double()
    lazy = m.to(lt.device())
    bits_equal(lazy.mean(1).cpu(), m.mean(1))
    bits_equal((lazy / lazy.sum(1, keepdim=True)).cpu(), m / m.sum(1, keepdim=True))


def test_numpy_float64_scalar_divisor(x):
    a = x.numpy()
    bits_equal(numpy.asarray(lnp.asarray(a) / 3.0), a / 3.0)


SPECIAL = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -3.0, 1e200, -1e-200],
                       dtype=torch.float64)


@pytest.mark.parametrize("divisor", [3.0, 0.7, -2.0, -0.0, 0.0, float("inf"), -float("inf"), float("nan")])
def test_float64_special_values_as_eager(divisor):
    """Zeros, infinities and NaN (divided as XLA divides them) next to ordinary values."""
    bits_equal((SPECIAL.to(lt.device()) / divisor).cpu(), SPECIAL / divisor)
