"""float64 ``torch.logspace`` gives eager CPU's values, bit for bit.

Eager's loop takes ``pow(base, start + step * i)`` below ``steps // 2`` and
``pow(base, end - step * (steps - 1 - i))`` from there, each exponent's
product and sum rounded apart; ``torch._decomp``'s ``base ** linspace`` took
eager's linspace, whose multiply-adds are fused: 317 of 1,001 values of
``logspace(-3.3, 2.7, 1001)`` one ulp off.
"""

import math

import numpy as np
import pytest
import torch


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    off = int((a != b).sum())
    assert off == 0, f"{off} of {a.numel()} differ"


@pytest.mark.parametrize("start, end, steps, base", [(-3.3, 2.7, 1001, 10.0), (1, 3, 50, 10.0), (-2, 5, 7, 2.0),
                                                     (4.5, -1.25, 333, math.e), (0, 1, 2, 0.5)])
def test_eagers_values(dev, start, end, steps, base):
    _same(torch.logspace(start, end, steps, base, dtype=torch.float64),
          torch.logspace(start, end, steps, base, dtype=torch.float64, device=dev).cpu())


def test_random_ranges(dev):
    rng = np.random.default_rng(0)
    for _ in range(10):
        start, end = float(rng.uniform(-5, 3)), float(rng.uniform(-5, 5))
        steps, base = int(rng.integers(2, 400)), float(rng.choice([10.0, 2.0, math.e, 3.7]))
        _same(torch.logspace(start, end, steps, base, dtype=torch.float64),
              torch.logspace(start, end, steps, base, dtype=torch.float64, device=dev).cpu())


@pytest.mark.parametrize("steps", [0, 1])
def test_fewer_than_two_steps(dev, steps):
    _same(torch.logspace(2.0, 3.0, steps, dtype=torch.float64),
          torch.logspace(2.0, 3.0, steps, dtype=torch.float64, device=dev).cpu())


def test_other_types_unchanged(dev):
    """Integer and float32 results still come from torch._decomp's form, as before."""
    torch.testing.assert_close(torch.logspace(0, 3, 4, dtype=torch.int64, device=dev).cpu(),
                               torch.logspace(0, 3, 4, dtype=torch.int64))
    torch.testing.assert_close(torch.logspace(-2.0, 3.0, 11, device=dev).cpu(), torch.logspace(-2.0, 3.0, 11))
