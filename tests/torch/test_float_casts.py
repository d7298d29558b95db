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
