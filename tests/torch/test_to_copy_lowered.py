"""``_to_copy`` on the tensor's own device (``x.float()``, ``x.to(torch.half)``,
``x.to(device, dtype)``: Llama's rotary embedding, optimizers' and clipping's
casts) is a lowered op: its meta result cached and its nodes replayed per call
signature, as every other op, instead of running the meta kernel and making
its nodes at every call (issue 40). Values, dtypes and strides are eager's."""

import sys

import pytest
import torch

import lazycore.torch as ltorch


def _python_calls(f) -> int:
    n = [0]

    def prof(frame, event, arg):
        if event in ("call", "c_call"):
            n[0] += 1

    sys.setprofile(prof)
    try:
        f()
    finally:
        sys.setprofile(None)
    return n[0]


CASES = [
    ("int64 view to float32", lambda x: x.to(torch.float32)),
    ("float", lambda x: x.float()),
    ("to the same device and float64", lambda x: x.to(x.device, torch.float64)),
    ("to 'lazy' (no index) and half", lambda x: x.to("lazy", torch.float16) if x.device.type == "lazy"
     else x.to(torch.float16)),
    ("a copy of the same dtype", lambda x: x.to(x.dtype, copy=True)),
    ("channels last", lambda x: x.to(torch.float32, memory_format=torch.channels_last)),
]


@pytest.mark.parametrize("name,f", CASES, ids=[c[0] for c in CASES])
def test_a_conversion_on_the_device_gives_eagers_values_dtype_and_strides(dev, name, f):
    base = torch.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    host = base.permute(0, 2, 1, 3)[:, 1:]  # a view with strides of its own
    x = base.to(dev).permute(0, 2, 1, 3)[:, 1:]
    for _ in range(3):  # recorded, then replayed
        want, got = f(host), f(x)
        assert got.device == x.device
        assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
        ltorch.mark_step()


def test_a_copy_does_not_alias_its_source(dev):
    x = torch.ones(3, device=dev)
    y = x.to(torch.float32, copy=True)
    x.add_(1)
    assert y.cpu().tolist() == [1.0, 1.0, 1.0] and x.cpu().tolist() == [2.0, 2.0, 2.0]


def test_a_repeated_conversion_costs_what_a_lowered_op_does(dev):
    """A conversion of a signature seen before replays its recording: about
    the Python calls of a unary lowered op (40 for ``neg``); the special
    path ran the meta kernel and made its nodes again each call (90)."""
    y = torch.randn(4, 8, device=dev)
    for _ in range(3):
        y.neg()
        y.to(torch.float16)
    neg = _python_calls(lambda: y.neg())
    half = _python_calls(lambda: y.to(torch.float16))
    assert half <= neg + 20, (half, neg)


def test_moving_between_the_host_and_the_device_still_copies(dev):
    x = torch.arange(6).reshape(2, 3)
    y = x.to(dev, torch.float32)
    assert y.device == dev if isinstance(dev, torch.device) else y.device.type == "lazy"
    back = y.to("cpu", torch.float64)
    assert back.device.type == "cpu" and back.dtype == torch.float64
    assert back.tolist() == x.to(torch.float64).tolist()
