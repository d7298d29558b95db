"""Float to integer casts of NaN, infinities and values out of the target's
range, as eager torch's CPU kernels give them (C casts on x86; float64 ->
uint8 goes through int64 there, unlike NumPy's). A uint32 cast's vector loop
and its scalar tail answer NaN and values out of range differently: lengths
with and without a tail."""

import pytest
import torch

SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 2.7, -2.7, 255.9, 256.0, -129.0, 300.7,
           -300.7, 65535.5, 70000.5, -70000.5, 2.0**31, -(2.0**31), 3e9 + 7, -3e9 - 9, 2.0**32, 2.0**63, 1e19,
           -1e19, 2.0**64, 1e30, 1e12 + 3, -1e12 - 5, 0.5, 4e9, -4e9, 1e5, 127.5]
SOURCES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
TARGETS = [torch.int8, torch.uint8, torch.int16, torch.uint16, torch.int32, torch.uint32, torch.int64,
           torch.uint64, torch.bool]


def _values(src):
    gen = torch.Generator().manual_seed(0)
    spread = 10.0 ** (torch.rand(200, generator=gen, dtype=torch.float64) * 23 - 1)
    spread = spread * (torch.randint(0, 2, (200,), generator=gen) * 2 - 1)
    x = torch.cat([torch.tensor(SPECIAL, dtype=torch.float64), spread])
    return x.to(torch.float32).to(src) if src in (torch.float16, torch.bfloat16) else x.to(src)


def _bits(t):
    return t.view(torch.int64) if t.dtype == torch.uint64 else t.to(torch.int64)


@pytest.mark.parametrize("src", SOURCES, ids=str)
@pytest.mark.parametrize("dst", TARGETS, ids=str)
@pytest.mark.parametrize("drop", [0, 3], ids=["whole", "tail"])
def test_out_of_range_floats_cast_as_eagers(dev, src, dst, drop):
    x = _values(src)[drop:]  # 232 elements: no tail of a 4- or 8-element vector loop; 229: a tail
    want = x.to(dst)
    got = x.to(dev).to(dst).cpu()
    assert got.dtype == want.dtype
    assert torch.equal(_bits(got), _bits(want))


def test_a_single_element_casts_as_eagers_scalar_loop(dev):
    for v in (float("nan"), -float("inf"), -3e9, 5e9):
        x = torch.tensor(v, dtype=torch.float32)
        assert x.to(dev).to(torch.uint32).cpu().item() == x.to(torch.uint32).item()


def test_an_in_place_copy_into_an_integer_tensor_casts_as_eager(dev):
    x = _values(torch.float64)
    want = torch.zeros(x.shape, dtype=torch.uint8).copy_(x)
    got = torch.zeros(x.shape, dtype=torch.uint8, device=dev).copy_(x.to(dev))
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dst", [torch.float16, torch.bfloat16], ids=str)
def test_a_double_or_an_integer_becomes_a_half_through_float_as_in_eager(dev, dst):
    """c10 makes a half from a float (``Half(float)``, ``BFloat16(float)``): a
    double or an integer is rounded twice, which XLA's CPU backend did or did
    not do depending on the CPU (AVX512-FP16 converts float64 to float16 in one
    rounding): a float16 ``torch.std`` of 64 rows was 1 ulp off there."""
    bits = 11 if dst == torch.float16 else 8
    ties = [1 + 2.0 ** -bits + 2.0 ** -40, -(1 + 2.0 ** -bits + 2.0 ** -40), 1 + 2.0 ** -bits - 2.0 ** -40,
            3.2099608446567425, 2.0 ** -25 + 2.0 ** -60]
    gen = torch.Generator().manual_seed(0)
    near = (torch.randn(300, generator=gen, dtype=torch.float64).to(dst).double()
            + torch.randint(-1, 2, (300,), generator=gen) * 2.0 ** -45)  # just off the half's values
    x = torch.cat([torch.tensor(ties + SPECIAL, dtype=torch.float64), near])
    ints = torch.tensor([2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**24 + 3, 65505, 65519, 65520, -7, 0])
    for v in (x, x.to(torch.complex128), ints):
        got, want = v.to(dev).to(dst).cpu(), v.to(dst)
        nan = want.isnan()  # a NaN's payload is not the subject
        assert torch.equal(got.isnan(), nan), v.dtype
        assert torch.equal(got[~nan].view(torch.int16), want[~nan].view(torch.int16)), v.dtype
