"""torch.linspace on the lazy device gives eager's values bit for bit for
integer results, ends given as numbers or as 0-d tensors (the
OpInfo int64 sweep's last wrong values, issue 43).

Two causes: with tensor ends torch's decomposition ran, which spaces an
integer result from 4.3 where eager's kernel converts the end to 4 first; and
the step's division by the constant n - 1 became, in XLA, a multiplication by
its reciprocal (-49 / 49 gave -0.9999999999999999, which an integer result
truncates to 0)."""

import pytest
import torch

from _bits import BY_HAND  # (tests/ is on the path)

ENDS = [(4.3, -3), (-2.7, 9.9), (50, 1), (1, 50), (3, 100), (-7.5, -7.5), (0, 6), (1e3 + 0.5, -1e3)]
STEPS = [1, 2, 7, 16, 50, 101]


def _ends(start, end, which, dev):
    t = lambda v: torch.tensor(v, device=dev)  # noqa: E731 (a float end is a float32 tensor, as OpInfo's)
    return {"numbers": (start, end), "tensors": (t(start), t(end)), "tensor start": (t(start), end),
            "tensor end": (start, t(end))}[which]


# CI: int64's variants (dtype0-*) take int32's path for each kind of end (dtype1-tensors, under 3 s, stays)
@pytest.mark.parametrize("dtype,which", [
    pytest.param(dtype, which, id=f"dtype{i}-{which}",
                 marks=BY_HAND if dtype is torch.int32 and which != "tensors" else ())
    for i, dtype in enumerate([torch.int64, torch.int32, torch.uint8])
    for which in ["numbers", "tensors", "tensor start", "tensor end"]])
def test_linspace_is_eagers_bit_for_bit(dev, dtype, which, no_fallback):
    for start, end in ENDS:
        if dtype is torch.uint8 and min(start, end) < 0:
            continue
        for n in STEPS:
            want = torch.linspace(*_ends(start, end, which, "cpu"), n, dtype=dtype)
            got = torch.linspace(*_ends(start, end, which, dev), n, dtype=dtype, device=dev)
            assert got.device.type == "lazy"
            got = got.cpu()
            assert got.dtype == want.dtype and torch.equal(got, want), (start, end, n, got.tolist(), want.tolist())

