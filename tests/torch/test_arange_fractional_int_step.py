"""``torch.arange`` of an integer type other than int64 with a step under 1 in
magnitude: eager's CPU kernel gives ceil((end - start) / step) elements, all
``start`` (the step converted to the type is 0); torch's meta kernel refuses
the zero step, and the lazy device raised "step must be nonzero"."""

import pytest
import torch

import lazycore.torch as ltorch

CASES = [(-3, 3, 0.013), (0, 5, 0.5), (0, 3, 0.7), (2.5, -1, -0.25), (1, 10, 2.5), (0.5, 4, 1), (5, 0, 0.5),
         (0, 5, 0.0)]


def _outcome(args, dtype, device):
    try:
        return torch.arange(*args, dtype=dtype, device=device).cpu()
    except Exception as e:  # noqa: BLE001 (compared with eager's)
        return type(e), str(e)


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("args", CASES, ids=str)
def test_arange_as_eager(args, dtype):
    want, got = _outcome(args, dtype, "cpu"), _outcome(args, dtype, ltorch.device())
    if isinstance(want, tuple):
        assert got == want
    else:
        assert isinstance(got, torch.Tensor), got
        assert got.dtype == want.dtype and torch.equal(got, want)
