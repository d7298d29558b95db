"""Bit shifts on the lazy device (lazy.shift_left / lazy.shift_right): eager's
values for every integer type, counts outside [0, bits) included, no fallback
(hunt 28: every shift was a counted fallback)."""

import pytest
import torch

import lazycore
import lazycore.torch  # noqa: F401
from lazycore import metrics

TYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def _operands(dtype):
    g = torch.Generator().manual_seed(0)
    info = torch.iinfo(dtype)
    a = torch.randint(info.min, info.max, (64,), generator=g, dtype=torch.int64).to(dtype)
    b = torch.randint(-2, info.bits + 3, (64,), generator=g, dtype=torch.int64).to(dtype)
    return a, b


@pytest.mark.parametrize("dtype", TYPES, ids=str)
def test_shifts_give_eagers_values_without_a_fallback(dtype):
    a, b = _operands(dtype)
    la, lb = a.to("lazy"), b.to("lazy")
    before = metrics.counters().get("fallbacks", 0)
    got = [la << lb, la >> lb, torch.bitwise_left_shift(la, 3), torch.bitwise_right_shift(la, lb),
           la << 2, la >> 1, torch.bitwise_left_shift(5, lb)]
    out = la.clone()
    out <<= lb
    got.append(out)
    lazycore.mark_step()
    want = [a << b, a >> b, torch.bitwise_left_shift(a, 3), torch.bitwise_right_shift(a, b), a << 2, a >> 1,
            torch.bitwise_left_shift(5, b)]
    w = a.clone()
    w <<= b
    want.append(w)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert torch.equal(g.cpu(), w), (g.cpu(), w)
    assert metrics.counters().get("fallbacks", 0) == before


def test_a_float_shift_raises_eagers_error():
    x = torch.ones(3)
    with pytest.raises(RuntimeError) as eager:
        x << 1
    with pytest.raises(type(eager.value)):
        x.to("lazy") << 1
