"""max_pool1d on the lazy device refuses what eager's CPU refuses, with eager's message (issues 41, 43).

Eager's CPU runs its own max_pool1d kernel, which takes floating types only;
the lazy device is given max_pool2d_with_indices (torch's path for other
devices), which pooled integer and boolean tensors into a value where eager
raises, and refused chalf with a message naming max_pool2d.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import lazycore

F = torch.nn.functional


def _outcome(dev, x, *args, **kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (ComplexHalf is experimental)
            out = F.max_pool1d(x.to(dev), *args, **kwargs)
        return out[0].cpu() if isinstance(out, tuple) else out.cpu()
    except Exception as e:
        return type(e), str(e)


CASES = {
    "int64": (torch.int64, 2, {}),
    "bool": (torch.bool, 2, {}),
    "uint8": (torch.uint8, 2, {}),
    "chalf": (torch.complex32, 2, {}),
    "chalf_bad_kernel": (torch.complex32, 0, {}),  # (eager checks the arguments first)
    "int64_indices": (torch.int64, 2, {"return_indices": True}),  # (max_pool2d's kernel on both)
    "float16": (torch.float16, 3, {"stride": 1}),
    "float32": (torch.float32, 2, {"padding": 1}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_max_pool1d_is_eagers(dev, case):
    dtype, k, kwargs = CASES[case]
    x = (torch.randn(2, 3, 8) * 4).to(dtype)
    want, got = _outcome("cpu", x, k, **kwargs), _outcome(dev, x, k, **kwargs)
    lazycore.mark_step()
    if isinstance(want, tuple):
        assert got == want
    else:
        assert isinstance(got, torch.Tensor), got
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_with_a_gradient_both_take_max_pool2d(dev):
    x = torch.randn(2, 3, 8, requires_grad=True)
    y = x.detach().to(dev).requires_grad_()
    F.max_pool1d(x, 2).sum().backward()
    F.max_pool1d(y, 2).sum().backward()
    torch.testing.assert_close(y.grad.cpu(), x.grad, rtol=0, atol=0)
