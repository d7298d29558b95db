"""Eager's answers at the edges: integer division by zero, signed zeros and NaN,
``out=`` of another dtype, integer powers, in-place powers, element types eager
has no kernel for. Each case runs eagerly on the CPU and on the lazy device."""

import re
import warnings

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


def test_the_dtype_probe_raises_eagers_errors_and_adds_no_warning(dev):
    """Eager's kernel runs once per signature on stand-ins cut to one element
    per dimension: an int @ float still raises eager's error at the call, a
    shape mismatch eager's message, and a variance over a real dimension of 5
    warns of nothing (one element's would)."""
    a, b = torch.ones(4, 3, dtype=torch.int64), torch.ones(3, 2)
    with pytest.raises(RuntimeError) as eager:
        a @ b
    with pytest.raises(RuntimeError, match=re.escape(str(eager.value))):
        a.to(dev) @ b.to(dev)
    # shapes the meta kernel refuses: eager's kernel on full-size stand-ins gives eager's message
    a, b = torch.ones(2, 9), torch.ones(8, 16)
    with pytest.raises(RuntimeError) as eager:
        a @ b
    with pytest.raises(RuntimeError, match=re.escape(str(eager.value))):
        a.to(dev) @ b.to(dev)
    x = torch.linspace(-1, 1, 15).reshape(5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = x.to(dev).var(dim=0)
    same(got, x.var(dim=0))


# --- powers ------------------------------------------------------------------------------------


def eager_or_error(f, *args):
    try:
        return f(*args)
    except Exception as e:  # noqa: BLE001 - the error is the answer to compare
        return e


def same_answer(f, *args, dev):
    """``f`` on CPU tensors and on their lazy copies: the same values, or the same error type and message."""
    want = eager_or_error(f, *args)
    if isinstance(want, Exception):
        with pytest.raises(type(want), match=f"^{re.escape(str(want))}$"):
            f(*(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)).cpu()
    else:
        same(f(*(a.to(dev) if isinstance(a, torch.Tensor) else a for a in args)), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8, torch.int32, torch.int64, torch.uint8])
def test_in_place_powers_are_eagers(dev, dtype):
    """``pow_`` and ``**=`` with a number went to pow.Scalar (the number as the base) and raised."""
    x = torch.tensor([0, 1, 2, 3], dtype=dtype)
    for p in (2, 3, 0):
        for f in (lambda t: t.pow_(p), lambda t: t.__ipow__(p), lambda t: t.float_power_(p) if dtype == torch.float64 else t):
            a, b = x.clone(), x.clone().to(dev)
            f(a)
            f(b)
            same(b, a)
    a, b = x.clone(), x.clone().to(dev)
    a.pow_(torch.tensor([1, 2, 3, 2], dtype=dtype))
    b.pow_(torch.tensor([1, 2, 3, 2], dtype=dtype, device=dev))
    same(b, a)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64])
def test_integer_powers_with_any_exponent_are_eagers(dev, dtype):
    """Exponents past the type's range raise eager's conversion error; negative ones
    its "not allowed"; every exponent bit counts, up to int64's."""
    base = torch.tensor([2, 3, 1, 0, 5] if dtype == torch.uint8 else [2, 3, -1, 1, 0, -3], dtype=dtype)
    for p in (2, 3, 63, 64, 257, 300, 2**31 + 3, 2**40 + 1, 2**62 + 1, 2**63 - 1, -1, -2):
        same_answer(lambda t: t ** p, base, dev=dev)
        same_answer(lambda t: torch.pow(t, p), base, dev=dev)
    # a Python base wraps around as eager's wrapped numbers do
    same_answer(lambda t: 300 ** t, torch.tensor([1, 2, 3], dtype=dtype), dev=dev)
    # tensor exponents, negative ones included, are values
    exponent = torch.tensor([2**62 + 1, 2**63 - 1, -1, -2, 7, 0]).to(dtype)
    same_answer(torch.pow, torch.tensor([3, -3, 2, -1, 2, 0]).to(dtype), exponent, dev=dev)


def test_python_ints_past_an_integer_type_wrap_or_raise_as_in_eager(dev):
    """A number standing for a tensor operand wraps (int8 ``x + 300`` adds 44);
    one that parametrizes an op (a bound, a fill, ``alpha=``) must fit."""
    x = torch.tensor([1, 2, -3], dtype=torch.int8)
    u = torch.tensor([1, 2, 0], dtype=torch.uint8)
    for f in (lambda t: t + 300, lambda t: t * 300, lambda t: 300 - t, lambda t: t // 300, lambda t: t % 300,
              lambda t: t & 300, lambda t: t == 300, lambda t: t < 300, lambda t: t + -1, lambda t: t == -1,
              lambda t: t.clamp(max=300), lambda t: t.clone().fill_(300), lambda t: torch.where(t > 1, t, 300),
              lambda t: t.masked_fill(t > 1, 300), lambda t: torch.add(t, t, alpha=300),
              lambda t: torch.full((2,), 300, dtype=t.dtype, device=t.device)):
        same_answer(f, x, dev=dev)
        same_answer(f, u, dev=dev)


# --- reductions ----------------------------------------------------------------------------------


def test_reductions_into_an_out_tensor_compute_in_its_dtype(dev):
    """Eager reduces in out's dtype (sum of [.6, .6] into int64 is 0, not round(1.2))."""
    cases = [
        (lambda x, o: torch.sum(x, 0, out=o), [0.6, 0.6], torch.float32, torch.int64, ()),
        (lambda x, o: torch.sum(x, 0, out=o), [1e-8, 1.0, -1.0], torch.float64, torch.float32, ()),
        (lambda x, o: torch.sum(x, 0, out=o), [100, 100], torch.int32, torch.int8, ()),
        (lambda x, o: torch.sum(x, 0, out=o), [60000.0, 60000.0, -60000.0], torch.float32, torch.float16, ()),
        (lambda x, o: torch.prod(x, 0, out=o), [1.5, 1.5], torch.float32, torch.int64, ()),
        (lambda x, o: torch.mean(x, 0, out=o), [0.1, 0.2], torch.float32, torch.float64, ()),
        (lambda x, o: torch.nansum(x, 0, out=o), [0.1, 0.2], torch.float32, torch.float64, ()),
        (lambda x, o: torch.cumsum(x, 0, out=o), [0.6, 0.6], torch.float32, torch.int64, (2,)),
        (lambda x, o: torch.cumprod(x, 0, out=o), [1.1, 1.1], torch.float32, torch.float64, (2,)),
        (lambda x, o: torch.mean(x, 0, out=o), [0.6, 0.6], torch.float32, torch.int64, ()),  # eager refuses
        (lambda x, o: torch.log_softmax(x, 0, out=o), [0.1, 0.2], torch.float32, torch.float64, (2,)),  # eager refuses
    ]
    for f, values, dtype, out_dtype, shape in cases:
        def run(d):
            out = torch.zeros(shape, dtype=out_dtype, device=d)
            f(torch.tensor(values, dtype=dtype, device=d), out)
            return out

        want = eager_or_error(run, "cpu")
        if isinstance(want, Exception):
            with pytest.raises(type(want)):
                run(dev)
        else:
            same(run(dev), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sums_of_halves_accumulate_in_float_as_eagers(dev, dtype):
    x = torch.tensor([60000.0, 60000.0, -60000.0], dtype=dtype)
    ones = torch.full((1000,), 1.01, dtype=dtype)
    for f, t in ((torch.sum, x), (torch.mean, x), (torch.nansum, x), (torch.sum, ones), (torch.mean, ones),
                 (lambda t: torch.sum(t.reshape(10, 100), 1), ones), (lambda t: torch.sum(t.float(), dtype=dtype), x)):
        same(f(t.to(dev)), f(t))


# --- atan2 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_atan2_of_signed_zeros_is_eagers(dev, dtype):
    y = torch.tensor([0.0, -0.0, 0.0, -0.0], dtype=dtype)
    x = torch.tensor([0.0, 0.0, -0.0, -0.0], dtype=dtype)
    same(torch.atan2(y.to(dev), x.to(dev)), torch.atan2(y, x))
    # zeros the program makes as constants (the scalar policy bakes 0), folded or not
    zeros = torch.zeros(4, dtype=dtype, device=dev)
    same(torch.atan2(zeros, zeros), torch.atan2(torch.zeros(4, dtype=dtype), torch.zeros(4, dtype=dtype)))
    same(torch.atan2(zeros * -1, zeros), torch.atan2(torch.zeros(4, dtype=dtype) * -1, torch.zeros(4, dtype=dtype)))
    same(torch.atan2(zeros, zeros * -1), torch.atan2(torch.zeros(4, dtype=dtype), torch.zeros(4, dtype=dtype) * -1))


@pytest.mark.parametrize("d0, d1", [(0, 0), (0, -1), (-1, -1)])
def test_transposing_a_0d_tensor_is_eagers(dev, d0, d1):
    """Eager wraps a 0-d tensor's dims 0 and -1 as a 1-d one's: nothing moves."""
    x = torch.tensor(2.5)
    same(torch.transpose(x.to(dev), d0, d1).cpu(), torch.transpose(x, d0, d1))
    same(torch.transpose_copy(x.to(dev), d0, d1).cpu(), torch.transpose_copy(x, d0, d1))
    with pytest.raises(IndexError):
        torch.transpose(x.to(dev), 0, 1)
    with pytest.raises(IndexError):
        torch.transpose(x, 0, 1)


@pytest.mark.parametrize("shape, size", [((5, 5, 5), (25, 5)), ((2, 3), (4,)), ((2, 3), (3, 4)), ((4,), (2, 2)),
                                         ((3,), (0,)), ((2, 2), (5,))])
def test_resize_keeps_the_memory_in_order_as_eager(dev, shape, size):
    a = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    lazy, want = a.to(dev), a.clone()
    want.resize_(size)
    assert lazy.resize_(size) is lazy
    assert tuple(lazy.shape) == size and lazy.stride() == want.stride()
    kept = min(a.numel(), want.numel())  # past the old memory eager's elements are uninitialized
    same(lazy.cpu().reshape(-1)[:kept], want.reshape(-1)[:kept])


def test_resize_within_the_storage_shares_it_with_earlier_views(dev):
    x, ex = torch.arange(6.0).to(dev), torch.arange(6.0)
    v, ev = x[2:], ex[2:]
    x.resize_(3)
    ex.resize_(3)
    x[2] = 100.0
    ex[2] = 100.0
    same(v.cpu(), ev)
    same(x.cpu(), ex)


def test_resize_errors(dev):
    with pytest.raises(RuntimeError, match="require grad"):
        torch.zeros(2, requires_grad=True, device=dev).resize_(3)
    x = torch.arange(4.0).to(dev)
    view = x[1:]
    # eager grows the storage under its views; lazy views are laid over its shape: refused, never stale
    with pytest.raises(RuntimeError, match="other tensors view that storage"):
        x.resize_(8)
    same(x.cpu(), torch.arange(4.0))  # nothing changed
    del view
    x.resize_(8)
    same(x.cpu()[:4], torch.arange(4.0))


@pytest.mark.parametrize("start, end, steps", [(4.3, -3, 50), (-2.7, 9.9, 7), (50, 1, 50)])
def test_integer_linspace_converts_its_ends_first_as_eager(dev, start, end, steps):
    same(torch.linspace(start, end, steps, dtype=torch.int64, device=dev).cpu(),
         torch.linspace(start, end, steps, dtype=torch.int64))


def test_resize_as_is_resize_to_the_templates_size(dev):
    from lazycore.observe import metrics

    before = sum(sum(v.values()) for v in metrics.fallbacks().values())
    a, want = torch.arange(6.0).to(dev), torch.arange(6.0)
    template = torch.zeros(2, 2)
    assert a.resize_as_(template.to(dev)) is a
    want.resize_as_(template)
    same(a.cpu(), want)
    assert sum(sum(v.values()) for v in metrics.fallbacks().values()) == before
