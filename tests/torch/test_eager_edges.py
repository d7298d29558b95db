"""Eager's answers at the edges: integer division by zero, signed zeros and NaN,
``out=`` of another dtype, integer powers, in-place powers, element types eager
has no kernel for. Each case runs eagerly on the CPU and on the lazy device."""

import re

import pytest
import torch

import lazycore
import lazycore.torch as ltorch
from isolated import run_isolated
from markers import markers

HERE, line_of, at = markers(__file__)

INTEGERS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


def same(got, want):
    """Values, dtype and the sign of every zero."""
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    if want.is_floating_point():
        assert torch.equal(torch.signbit(got), torch.signbit(want)), (got, want)


# --- integer division by zero ---------------------------------------------------------------

DIVISIONS = {
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "fmod": torch.fmod,
    "div floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "floor_divide": torch.floor_divide,
    "remainder": torch.remainder,
}


def integer_division_by_zero():
    """Eager raises RuntimeError('ZeroDivisionError') at the call; lazily only the
    values tell, so reading a result that divided by zero raises it (a
    BarrierError, a RuntimeError) naming the line, and the rest of the step runs.
    Divisors that are the constant 0 are the case that killed the process."""
    dev = ltorch.device()
    for dtype in (torch.uint8, torch.int16, torch.int64):
        for name, f in DIVISIONS.items():
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                f(torch.zeros(2, dtype=dtype), torch.zeros(2, dtype=dtype))
            x = torch.zeros(2, dtype=dtype, device=dev)  # the example: constant zeros
            y = torch.tensor([6, 4], dtype=dtype, device=dev)
            z = torch.tensor([3, 0], dtype=dtype, device=dev)
            by_constant, by_data = f(x, x), f(y, z)
            fine = f(y, torch.tensor([3, 2], dtype=dtype, device=dev))
            for t in (by_constant, by_data):
                with pytest.raises(lazycore.BarrierError, match=re.escape(f"{HERE}:")) as info:
                    t.cpu()
                assert str(info.value).endswith("): ZeroDivisionError"), info.value
            same(fine, f(torch.tensor([6, 4], dtype=dtype), torch.tensor([3, 2], dtype=dtype)))
            # a Python 0 is known at the call: eager's error there
            with pytest.raises(RuntimeError, match="^ZeroDivisionError$"):
                f(y, 0)
    # the error names the line that divided
    z = torch.tensor([3, 0], device=dev)
    q = torch.tensor([6, 4], device=dev) // z  # divides by zero
    with pytest.raises(lazycore.BarrierError) as info:
        q.cpu()
    assert str(info.value) == f"lazy.check (recorded at {at('divides by zero')}): ZeroDivisionError"
    # a scalar dividend and a tensor divisor; an in-place update fails the tensor it updates
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        (5 // z).cpu()
    w = torch.tensor([6, 4], device=dev)
    w //= z
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        w.cpu()
    # floats divide by zero as IEEE says, with no check
    same(torch.tensor([1.0, -1.0], device=dev) // torch.zeros(2, device=dev), torch.tensor([1.0, -1.0]) // torch.zeros(2))
    # torch.var of an empty int tensor folded a division by zero too: eager refuses the dtype at the call
    for f in (torch.var, torch.std, lambda t: torch.var(t, 0)):
        with pytest.raises(RuntimeError, match="only support floating point"):
            f(torch.zeros(0, dtype=torch.int64))
        with pytest.raises(RuntimeError, match="only support floating point"):
            f(torch.zeros(0, dtype=torch.int64, device=dev))


def test_integer_division_by_zero_raises_eagers_error():
    run_isolated(__file__, "integer_division_by_zero")


# --- sign ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_sign_of_zeros_and_nan_is_eagers(dev, dtype):
    """Eager's sign is (0 < x) - (x < 0): +0.0 for either zero, 0 for NaN."""
    x = torch.tensor([-0.0, 0.0, float("nan"), -2.5, 3.0, float("-inf")], dtype=dtype)
    for f in (torch.sign, torch.sgn, lambda t: t.clone().sign_()):
        same(f(x.to(dev)), f(x))
    # zeros made in the program and folded from constants
    same(torch.sign(torch.zeros(3, dtype=dtype, device=dev) * -1), torch.sign(torch.zeros(3, dtype=dtype) * -1))


@pytest.mark.parametrize("dtype", INTEGERS)
def test_sign_and_abs_of_integers_are_eagers(dev, dtype):
    info = torch.iinfo(dtype)
    x = torch.tensor([0, 1, info.max, info.min, info.max // 3], dtype=dtype)
    for f in (torch.sign, torch.sgn, torch.abs, lambda t: t.clone().abs_(), lambda t: t.clone().sign_()):
        same(f(x.to(dev)), f(x))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_ops_eager_has_no_kernel_for_raise_eagers_error(dev, dtype):
    """Eager's CPU kernels take uint16/32/64 in a few ops only; the rest raise
    NotImplementedError at the call, and so do they on the lazy device."""
    x = torch.tensor([0, 1, 200], dtype=dtype)
    for f in (torch.sign, torch.abs, torch.neg, lambda t: t.clone().abs_(), lambda t: t + t, lambda t: t // t,
              lambda t: torch.maximum(t, t)):
        with pytest.raises(NotImplementedError) as eager:
            f(x)
        with pytest.raises(NotImplementedError, match=re.escape(str(eager.value))):
            f(x.to(dev))
    # and the ones eager has stay lazy, with its values
    for f in (lambda t: t * t, lambda t: t == t, torch.sum, lambda t: t.to(torch.float32)):
        same(f(x.to(dev)), f(x))
