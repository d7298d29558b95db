"""``torch.arange`` with a float step gives eager CPU's values, bit for bit.

Eager's ``arange_kernel`` writes two vectors at a time, each from a base
``start + step * i0`` rounded to the result's type with its lanes at
``base + l * step``, and the rest of each ``at::parallel_for`` chunk one by
one, every multiply-add fused. ``start + step * i`` in double (lazycore's
form before) differed from it in 5,171 of 18,847 float64 values and in a
fifth of the float32 values of ``arange(-3, 3, 0.013)``.
"""

import numpy as np
import pytest
import torch

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    off = (a.view(-1) != b.view(-1)).nonzero().flatten()
    assert off.numel() == 0, f"{off.numel()} of {a.numel()} differ, first at {off[:5].tolist()}"


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("start, end, step", [(-3, 3, 0.013), (0.001, 2.0, 0.001), (-1.7, 100.3, 0.0071),
                                              (0.5, 7.3, 0.37), (5.0, -2.0, -0.0123), (0, 10, 1 / 3)])
def test_float_step(dev, dtype, start, end, step):
    if dtype in (torch.float16, torch.bfloat16) and max(abs(start), abs(end)) > 50:
        pytest.skip("past the half types' spacing")
    _same(torch.arange(start, end, step, dtype=dtype), torch.arange(start, end, step, dtype=dtype, device=dev).cpu())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_random_ranges(dev, dtype):
    rng = np.random.default_rng(0)
    for _ in range(12):
        start = float(rng.uniform(-100, 100))
        step = float(rng.choice([1, -1]) * 10 ** rng.uniform(-3, 1))
        n = int(rng.integers(1, 3000))
        end = start + step * n + step / 2
        _same(torch.arange(start, end, step, dtype=dtype), torch.arange(start, end, step, dtype=dtype, device=dev).cpu())


@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_chunks(dev, threads):
    """Past ``GRAIN_SIZE`` (32,768) elements each thread's chunk starts its own vectors."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for dtype in (torch.float32, torch.float64):
            _same(torch.arange(-1.3, 13.0, 0.00037, dtype=dtype),
                  torch.arange(-1.3, 13.0, 0.00037, dtype=dtype, device=dev).cpu())
    finally:
        torch.set_num_threads(before)
