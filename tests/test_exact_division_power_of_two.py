"""A divide by a constant power of two is left to XLA: its quotient is eager's already.

On CPU a float divide by a broadcast takes an exact form (lazy-to-stablehlo's
``division=exact``): a divisor XLA cannot see is a broadcast (4 ops), so
that XLA divides instead of multiplying by the reciprocal. Where the divisor is a constant
``+-2**k`` whose reciprocal is a normal number, XLA's ``a * (1/b)`` multiplies
by an exact power of two and rounds once: the correctly rounded quotient.
A tiny GPT-2's prompt program divided by 64 ten times (its layer norms'
means): 858 StableHLO ops, 479 without the exact forms, every bit the same.
"""

import math
import os
import re
import sys

import ml_dtypes
import numpy
import pytest
import torch

import lazycore
import lazycore.torch as lt
from lazycore.passes.pipeline import DEFAULT_PIPELINE
from lazycore.runtime import compiler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bits import bits_equal  # noqa: E402


def _values(dtype):
    """Ordinary values, the type's extremes, zeros, infinities, NaN (a subnormal
    quotient is left out: XLA's CPU programs flush them to zero, exact form or
    not, where eager keeps them)."""
    info = torch.finfo(dtype)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=g, dtype=torch.float64) * 10
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), info.max, -info.max,
                            info.tiny, -info.tiny, info.tiny * 3, info.smallest_normal * 1.5, 1.0, -3.0],
                           dtype=torch.float64)
    return torch.cat([x, special]).to(dtype)


CASES = [
    (torch.float32, [64.0, 2.0, 0.5, -4.0, 2.0**-20, 2.0**40]),
    (torch.float64, [64.0, 0.5, -8.0, 2.0**-1000, 2.0**900]),
    (torch.float16, [2.0, 0.25, -1024.0]),
    (torch.bfloat16, [2.0, 2.0**-30, -16.0]),
]


def _same_bits(got, want):
    if got.dtype in (torch.float16, torch.bfloat16):  # (NumPy has no bfloat16: compare the bits as int16)
        nan = torch.isnan(got.float()) & torch.isnan(want.float())
        differ = (got.view(torch.int16) != want.view(torch.int16)) & ~nan
        assert not differ.any(), f"{int(differ.sum())} differ, e.g. got {got[differ][:4]} want {want[differ][:4]}"
    else:
        bits_equal(got.numpy(), want.numpy())


_TYPE = {torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64"}


def _divided(x, d):
    """``x / d`` as the CPU compile path lowers a divide by a splat constant
    (a mean's count; lazy-to-stablehlo with ``division=exact``), and its StableHLO."""
    t = f"tensor<{x.numel()}x{_TYPE[x.dtype]}>"
    text = f"""
    func.func @main(%x: {t}) -> {t} {{
      %c = "lazy.constant"() {{value = dense<{d!r}> : {t}}} : () -> {t}
      %q = "lazy.div"(%x, %c) : ({t}, {t}) -> {t}
      return %q : {t}
    }}"""
    host = x.view(torch.int16).numpy().view(ml_dtypes.bfloat16) if x.dtype is torch.bfloat16 else x.numpy()
    (out,) = compiler.run_module(text, [host])
    got = torch.from_numpy(out.view(numpy.int16).copy()).view(torch.bfloat16) if x.dtype is torch.bfloat16 else \
        torch.from_numpy(out.copy())
    module = compiler.lower(text, compiler.for_platform(DEFAULT_PIPELINE, None))
    return got, str(module)


@pytest.mark.parametrize("dtype,divisors", CASES, ids=[str(c[0]).split(".")[1] for c in CASES])
def test_quotients_are_eager_bits(dtype, divisors):
    x = _values(dtype)
    for d in divisors:
        got, stablehlo = _divided(x, d)
        # no exact form (before: a float64 divide between converts, or a remainder's correction)
        assert "stablehlo.xor" not in stablehlo and (dtype is torch.float64 or "f64" not in stablehlo)
        want = x / d
        normal = (want.abs() >= torch.finfo(dtype).tiny) | (want == 0) | ~torch.isfinite(want)
        _same_bits(got[normal], want[normal])


def test_a_mean_over_a_power_of_two():
    dev = lt.device()
    # a mean's count is a splat constant: before, float32 went through float64
    # and float64 was corrected by its remainder; a count of 3 keeps its exact form
    # integer values: their sums are exact in any order, only the division is compared
    x32 = torch.randint(-1000, 1000, (8, 64), generator=torch.Generator().manual_seed(1)).float().to(dev)
    x64 = torch.randint(-1000, 1000, (8, 64), generator=torch.Generator().manual_seed(2)).double().to(dev)
    lazycore.mark_step(wait=True)
    with lazycore.testing.capture() as cap:
        kept = (x32.mean(-1), x64.mean(-1))
        lazycore.mark_step()
    text = cap.text("stablehlo")
    # (float64's own sum has float64 pieces; nothing of float32's is widened to it)
    assert not re.search(r"xf32>\) -> tensor<[0-9x]*xf64>", text)
    assert "stablehlo.xor" not in text and "tensor<8xf32>) -> tensor<8xf64>" not in text
    bits_equal(kept[0].cpu().numpy(), x32.cpu().mean(-1).numpy())
    bits_equal(kept[1].cpu().numpy(), x64.cpu().mean(-1).numpy())
    with lazycore.testing.capture() as cap:
        kept = (x32[:, :3].mean(-1), x64[:, :3].mean(-1))
        lazycore.mark_step()
    text = cap.text("stablehlo")
    # (the exact form: a divisor XLA cannot see is a broadcast, float32 in float32)
    assert text.count("stablehlo.xor") == 2 and "tensor<8xf32>) -> tensor<8xf64>" not in text
    bits_equal(kept[0].cpu().numpy(), x32.cpu()[:, :3].mean(-1).numpy())
    bits_equal(kept[1].cpu().numpy(), x64.cpu()[:, :3].mean(-1).numpy())


def test_float64_quotients_of_the_largest_values():
    # a float64 divide by a tensor keeps its remainder's correction; its
    # halves' products overflowed for the largest dividends: max / 2**900 was -inf
    dev = lt.device()
    g = torch.Generator().manual_seed(3)
    largest = torch.tensor([torch.finfo(torch.float64).max], dtype=torch.float64)
    big = torch.cat([largest, 2.0**1020 * (1 + torch.rand(255, generator=g, dtype=torch.float64))])
    x = torch.cat([big, -big, torch.tensor([2.0**1001 * 1.37, 1e300, 3.0], dtype=torch.float64)])
    for d in (2.0**900, 2.0**-20, 3.0, 0.7, -1e-3):
        divisor = torch.tensor(d, dtype=torch.float64)
        got, want = (x.to(dev) / divisor.to(dev)).cpu(), x / divisor
        if math.log2(abs(d)).is_integer():
            bits_equal(got.numpy(), want.numpy())
        else:  # above 2**1020 the quotient is XLA's a * (1/b): within an ulp
            finite = torch.isfinite(want)
            assert torch.equal(got[~finite], want[~finite])
            ulps = (got[finite].view(torch.int64) - want[finite].view(torch.int64)).abs()
            assert int(ulps.max()) <= 1 and torch.equal(got[finite][x[finite].abs() < 2.0**1020],
                                                        want[finite][x[finite].abs() < 2.0**1020])
