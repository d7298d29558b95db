"""Float torch.linspace on the lazy device gives eager's bits (issue 39).

Eager's CPU kernel (RangeFactoriesKernel.cpp, torch 2.13: a scalar loop, no
vector path) computes in the result's type: step = (end - start) / (steps - 1),
then ``start + step * i`` for the first half and ``end - step * (steps - i - 1)``
for the rest, and the compiler contracts each into one fused multiply-add for
float32 and float64 (probed: without the fma 319 of linspace(-3, 7, 1000)'s
float64 values and 340 of its float32 ones differ). float16 and bfloat16 round
to their type after every operation (c10::Half's operators compute in float
and round back; steps - 1 is converted to the type first). The values do not
depend on how at::parallel_for splits the range: each is a function of its
index alone. Before: lazycore spaced in float64 without an fma and rounded once."""

import pytest
import torch

import lazycore
from _bits import BY_HAND  # (tests/ is on the path)

ENDS = [(-3, 7), (0, 1), (1, 0), (-1e6, 3.3), (0.1, 0.7), (2.5, 2.5), (-7.25, -1e-3), (1e30, -2e30),
        (3e38, -3e38), (-1e-30, 1e-30), (123456.789, 123457.1)]
STEPS = [1, 2, 3, 17, 37, 100, 1000, 3002]
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def _same_bits(got, want):
    # bit for bit, but a NaN's sign: eager's x86 invalid operation gives the negative default NaN, and
    # XLA's constant folder the positive one (linspace(3e38, -3e38, 2) in float32: inf - inf)
    nan = want.isnan()
    if not torch.equal(got.isnan(), nan):
        return False
    ints = {torch.float64: torch.int64, torch.float32: torch.int32}.get(got.dtype, torch.int16)
    return torch.equal(got.view(ints)[~nan], want.view(ints)[~nan])


def _check(cases, make, dev):
    # every case is an output of one program: one compile for the grid
    lazy = [make(*c, device=dev) for c in cases]
    lazycore.mark_step()
    bad = []
    for c, got in zip(cases, lazy):
        want, got = make(*c, device="cpu"), got.cpu()
        assert got.dtype == want.dtype
        if not _same_bits(got, want):
            bad.append((c, int((got != want).sum())))
    assert not bad, bad


# CI: test_float_linspace_is_eagers_bit_for_bit[torch.float16] takes the same half-type path
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16,
                                   pytest.param(torch.bfloat16, marks=BY_HAND)], ids=str)
def test_float_linspace_is_eagers_bit_for_bit(dev, dtype, no_fallback):
    cases = [(s, e, n) for s, e in ENDS for n in STEPS
             if dtype is torch.float64 or max(abs(s), abs(e)) < torch.finfo(dtype).max]
    _check(cases, lambda s, e, n, device: torch.linspace(s, e, n, dtype=dtype, device=device), dev)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_float_linspace_of_tensor_ends_is_eagers_bit_for_bit(dev, dtype, no_fallback):
    def make(s, e, n, device):
        t = lambda v: torch.tensor(v, dtype=torch.float64, device=device)  # noqa: E731
        return torch.linspace(t(s), t(e), n, dtype=dtype, device=device)
    _check([(s, e, n) for s, e in ENDS[:8] for n in (2, 37, 1000)], make, dev)
