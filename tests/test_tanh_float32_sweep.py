"""Float32 tanh on the CPU (lowering/elementwise.py's ``_tanh_float32``) is the
correctly rounded tanh, bit for bit, over a dense sweep of float32: every 31st
bit pattern in [2**-12, 10], both signs (8.3M values; all 256M with
``LAZYCORE_TEST_FULL=1``, minutes), every 4099th below 2**-12 (subnormals
included: their tanh rounds to themselves, as eager's), all 52k from 9 to 9.05
(where it saturates: 1 - 2e**-2x crosses 1 - 2**-25 at 9.0109), zeros,
infinities and NaN. The reference is NumPy's float64 tanh rounded to float32,
decided by mpmath where it lies within 2**-45 (relative) of a rounding midpoint.
XLA's float32 tanh is 4.6 ulp off; eager's within an ulp (torch's is off the
correctly rounded value in half of them)."""

import mpmath
import numpy
import pytest
import torch

import lazycore.torch as lt
from _bits import FULL  # (tests/ is on the path)

CHUNK = 1 << 22


def lazy_tanh(x: numpy.ndarray) -> numpy.ndarray:
    out = [torch.tanh(torch.from_numpy(x[i:i + CHUNK]).to(lt.device())).cpu().numpy() for i in range(0, x.size, CHUNK)]
    return numpy.concatenate(out)


def correctly_rounded(x: numpy.ndarray) -> numpy.ndarray:
    wide = numpy.tanh(x.astype(numpy.float64))
    want = wide.astype(numpy.float32)
    with numpy.errstate(invalid="ignore"):
        up, down = (numpy.nextafter(want, numpy.float32(s)) for s in (numpy.inf, -numpy.inf))
        to_mid = numpy.minimum(numpy.abs(wide - (want.astype(numpy.float64) + up) / 2),
                               numpy.abs(wide - (want.astype(numpy.float64) + down) / 2))
        near = numpy.nonzero(to_mid <= 2.0**-45 * numpy.abs(wide))[0]
    mpmath.mp.prec = 120
    for i in near:
        exact = mpmath.tanh(mpmath.mpf(float(x[i])))
        candidates = (want[i], up[i], down[i])
        want[i] = min(candidates, key=lambda v: abs(mpmath.mpf(float(v)) - exact))
    return want


def bit_patterns(lo: float, hi: float, stride: int) -> numpy.ndarray:
    a, b = (int(numpy.float32(v).view(numpy.int32)) for v in (lo, hi))
    positive = numpy.arange(a, b + 1, stride, dtype=numpy.int32).view(numpy.float32)
    return numpy.concatenate([positive, -positive])


def check(x: numpy.ndarray):
    for i in range(0, x.size, 4 * CHUNK):  # bounded memory in full mode
        part = x[i:i + 4 * CHUNK]
        got, want = lazy_tanh(part), correctly_rounded(part)
        differ = got.view(numpy.int32) != want.view(numpy.int32)
        assert not differ.any(), (int(differ.sum()), part[differ][:4], got[differ][:4], want[differ][:4])


def test_dense_sweep_correctly_rounded():
    check(bit_patterns(2.0**-12, 10.0, 1 if FULL else 31))


@pytest.mark.skipif(not FULL, reason="every float32 above 10 (a constant 1): LAZYCORE_TEST_FULL=1")
def test_above_ten_saturates():
    check(bit_patterns(10.0, float(numpy.finfo(numpy.float32).max), 101))


def test_small_and_subnormal_values_are_themselves():
    x = bit_patterns(float(numpy.float32(1.4e-45)), numpy.nextafter(numpy.float32(2.0**-12), numpy.float32(0)), 4099)
    numpy.testing.assert_array_equal(lazy_tanh(x).view(numpy.int32), x.view(numpy.int32))
    # as eager's (torch keeps subnormals: XLA's float64 form flushed them to zero)
    tiny = numpy.array([1e-45, -1e-45, 1e-40, -3e-39, 1e-38, 2.0**-13, -(2.0**-12) * 0.99], numpy.float32)
    numpy.testing.assert_array_equal(lazy_tanh(tiny).view(numpy.int32), torch.tanh(torch.from_numpy(tiny)).numpy().view(numpy.int32))


def test_saturation_edge_and_special_values():
    edge = bit_patterns(9.0, 9.05, 1)  # 9.0109 is where the correctly rounded tanh becomes 1
    check(edge)
    assert (lazy_tanh(edge[: edge.size // 2]) == 1).any() and (lazy_tanh(edge[: edge.size // 2]) < 1).any()
    special = numpy.array([0.0, -0.0, numpy.inf, -numpy.inf, 9.5, -9.5, 20.0, 88.7, 3.4028235e38, -3.4028235e38,
                           2.0**-12, -(2.0**-12), 0.5, -0.5], numpy.float32)
    got = lazy_tanh(special)
    numpy.testing.assert_array_equal(got.view(numpy.int32), correctly_rounded(special).view(numpy.int32))
    assert numpy.signbit(got[1]) and not numpy.signbit(got[0])
    nan = numpy.array([numpy.nan, -numpy.nan], numpy.float32)
    assert numpy.isnan(lazy_tanh(nan)).all()
