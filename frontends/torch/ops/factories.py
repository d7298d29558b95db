"""Factory functions with ``device=lazycore.torch.device()``.

Torch routes a factory call by its device argument to the ``Lazy`` dispatch
key; the kernels registered here lower it like any op. Composite factories
(``zeros``, ``full``, ``randn``, ...) reach them through ``empty`` followed
by an in-place fill, which dispatches to the lazy tensor.
"""

from __future__ import annotations

import math

import torch

from lazycore.dialect.types import is_float
from lazycore.ir.context import TRACE
from lazycore.ir.graph import Scalar
from lazycore.trace import core

from ..lowering import apply, broadcast, const, convert, fused_multiply_add, is_handle, lowers, scalar
from . import eager_loops
from ..dtypes import TO_TORCH

aten = torch.ops.aten


@lowers(aten.empty.memory_format, aten.empty_strided.default, aten.zeros.default,
        aten._efficientzerotensor.default)
def _empty(ctx, *args, **kwargs):
    # eager leaves memory uninitialized; zeros keep programs deterministic.
    # _efficientzerotensor (forward AD's tangent of a tensor that is not dual,
    # in jacfwd, hessian, jvp through a module's weights) is eager's ZeroTensor,
    # a CPU/CUDA storage-free stand-in for zeros: here it is zeros, which every
    # op reads as it reads a ZeroTensor (a ZeroTensor fell back, and its upload failed)
    return const(0, ctx.dtype, ctx.device, ctx.shape)


@lowers(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(ctx, *args, **kwargs):
    nums = [a for a in args if isinstance(a, (int, float))]
    (n,) = ctx.shape
    wide = "f64" if ctx.dtype in ("f16", "bf16", "f32", "f64") else "i64"
    if len(nums) == 1:
        return convert(apply("iota", dim=0, shape=(n,), dtype=wide, device=ctx.device), ctx.dtype)
    # the numbers given by the scalar policy, baked until their place has seen two values: a constant
    # arange keeps its static numbers, one whose start varies (PPO's minibatch start i % 2) is an input.
    # A recording holding a baked number would replay it after the place has varied: not recorded then
    given = (nums[0], nums[2] if len(nums) == 3 else 1)
    start, step = (core.scalar(x, wide, ctx.device, until_varied=True) for x in given)
    if type(start._value[0]) is not Scalar or type(step._value[0]) is not Scalar:
        TRACE.taint()
    if ctx.dtype in _REAL_FLOATS and ctx.device.platform == "cpu":
        lanes = eager_loops._lanes(TO_TORCH[ctx.dtype])
        if lanes is not None:
            return _vector_arange(ctx, start, step, n, lanes)
    i = apply("iota", dim=0, shape=(n,), dtype=wide, device=ctx.device)
    return convert(apply("add", apply("mul", i, broadcast(step, (n,))), broadcast(start, (n,))), ctx.dtype)


def arange_meta(margs, mkwargs):
    """``aten.arange.start_step``'s meta result. An integer type other than
    int64 with a fractional step: eager's CPU kernel sizes the result by the
    ceiling of the quotient in double and steps by the step converted to the
    type, 0 where it is under 1 in magnitude, so every element is ``start``
    (``arange(0, 5, 0.5, dtype=torch.int32)``: ten zeros); torch's meta
    (``torch._refs.arange``, through ``prims.iota``) refuses that zero step."""
    start, end = margs[:2]
    step = margs[2] if len(margs) > 2 else mkwargs.get("step", 1)
    dtype = mkwargs.get("dtype")
    if (dtype is None or dtype is torch.int64 or dtype is torch.bool or dtype.is_floating_point
            or dtype.is_complex or not any(type(x) is float for x in (start, end, step)) or int(step) != 0):
        return aten.arange.start_step(*margs, **mkwargs)
    if not math.isfinite(step) or step == 0:
        return aten.arange.start_step(*margs, **mkwargs)  # (eager's errors)
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return torch.empty(math.ceil((end - start) / step), dtype=dtype, device="meta")


def _vector_arange(ctx, start, step, n: int, lanes: int):
    """Eager's CPU ``arange_kernel`` (``RangeFactoriesKernel.cpp``): in each of
    ``at::parallel_for``'s chunks, two vectors at a time, each vector from its
    first index ``i0`` as ``Vectorized::arange(start + step * i0, step)`` (the
    base rounded to the result's type, lane ``l`` at ``base + l * step``), the
    rest of the chunk one by one at ``start + step * i``; all in the kernel's
    accumulation type (double; float for the half types), every multiply-add
    fused (the kernels are built with FMA: unfused, 5,171 of 18,847 float64
    values differed). A scalar element is a vector's lane 0."""
    wide = (n,)
    acc = "f64" if ctx.dtype in ("f32", "f64") else "f32"
    j = apply("iota", dim=0, shape=wide, dtype="i64", device=ctx.device)
    count = eager_loops.threads()
    parts = min(count, -(-n // eager_loops._GRAIN)) if n > eager_loops._GRAIN and count > 1 else 1
    chunk = -(-n // parts)
    run = 2 * lanes
    offset = j if parts == 1 else apply("rem", j, const(chunk, "i64", ctx.device, wide))
    last = n - (parts - 1) * chunk
    vectors = const(chunk // run * run, "i64", ctx.device, wide)
    if last // run * run != chunk // run * run:  # the last chunk is shorter
        in_last = apply("compare", j, const((parts - 1) * chunk, "i64", ctx.device, wide), direction="GE")
        vectors = apply("select", in_last, const(last // run * run, "i64", ctx.device, wide), vectors)
    zero = const(0, "i64", ctx.device, wide)
    lane = apply("select", apply("compare", offset, vectors, direction="LT"),
                 apply("rem", offset, const(lanes, "i64", ctx.device, wide)), zero)
    step = broadcast(convert(step, acc), wide)
    base = fused_multiply_add(step, convert(apply("sub", j, lane), acc), broadcast(convert(start, acc), wide))
    if ctx.dtype != acc:
        base = convert(convert(base, ctx.dtype), acc)
    return convert(fused_multiply_add(convert(lane, acc), step, base), ctx.dtype)


_FLOATS = ("f16", "bf16", "f32", "f64", "complex<f32>", "complex<f64>")


@lowers(aten.linspace.default)
def _linspace(ctx, start, end, steps, **kwargs):
    (n,) = ctx.shape
    wide = "complex<f64>" if ctx.dtype.startswith("complex") else "f64"
    if ctx.dtype not in _FLOATS:  # eager converts the ends to the integer type first (toward zero)
        start, end = int(start), int(end)
    return _spaced(ctx, const(start, wide, ctx.device, (n,)), const(end, wide, ctx.device, (n,)), wide)


@lowers(aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar, aten.linspace.Scalar_Tensor)
def _linspace_of_tensors(ctx, start, end, steps, **kwargs):
    """Ends given as 0-d tensors: eager reads their values and spaces them as
    numbers, an integer result's ends converted first (torch's decomposition
    spaces 4.3 to -3 from 4.3, eager from 4)."""
    wide = "complex<f64>" if ctx.dtype.startswith("complex") else "f64"
    return _spaced(ctx, *(_end(ctx, x, wide) for x in (start, end)), wide)


def _end(ctx, x, wide: str):
    (n,) = ctx.shape
    if not is_handle(x):
        return const(x if ctx.dtype in _FLOATS else int(x), wide, ctx.device, (n,))
    h = broadcast(convert(x, wide), (n,))
    if ctx.dtype in _FLOATS or not is_float(x.dtype):
        return h
    return apply("select", apply("compare", h, const(0, wide, ctx.device, (n,)), direction="LT"),
                 apply("ceil", h), apply("floor", h))  # toward zero, as C++'s conversion


def _spaced(ctx, start, end, wide: str):
    """``n`` values from ``start`` to ``end`` (handles of ``wide`` broadcast to
    ``(n,)``) as eager spaces them, in ``ctx.dtype``."""
    (n,) = ctx.shape
    if n == 1:
        return convert(start, ctx.dtype)
    if ctx.dtype in _REAL_FLOATS:
        return _float_spaced(ctx, start, end)
    # n - 1 a program input: XLA turns a division by a constant into a multiplication by its
    # reciprocal (-49 / 49 gave -0.9999999999999999, and an integer result truncated it to 0)
    step = apply("div", apply("sub", end, start), scalar(n - 1, wide, ctx.device, (n,)))
    count = apply("iota", dim=0, shape=(n,), dtype="f64", device=ctx.device)
    i = convert(count, wide)
    # symmetric, as eager: the first half counts up from start, the rest down from end
    back = apply("sub", const(n - 1, wide, ctx.device, (n,)), i)
    if ctx.dtype in _FLOATS:
        up = apply("add", start, apply("mul", i, step))
        down = apply("sub", end, apply("mul", back, step))
    else:  # eager's integer kernel spaces in double, each value one fused multiply-add
        up = fused_multiply_add(i, step, start)
        down = fused_multiply_add(apply("neg", back), step, end)
    first = apply("compare", count, const(n // 2, "f64", ctx.device, (n,)), direction="LT")
    v = apply("select", first, up, down)
    if ctx.dtype not in _FLOATS:
        v = apply("select", apply("compare", v, const(0, wide, ctx.device, (n,)), direction="LT"),
                  apply("ceil", v), apply("floor", v))
    return convert(v, ctx.dtype)


_REAL_FLOATS = ("f16", "bf16", "f32", "f64")


def _float_spaced(ctx, start, end):
    """Eager's float kernel, in the result's type (float64 ends rounded to it,
    through float32 for float16/bfloat16 as ``Scalar.to<Half>``): step =
    (end - start) / (n - 1), then ``start + step * i`` below n // 2 and
    ``end - step * (n - 1 - i)`` from there, the same formula whatever block or
    thread computes an index. float32 and float64: the compiler contracts each
    into one fused multiply-add (probed, torch 2.13: unfused, 319 of
    linspace(-3, 7, 1000)'s float64 values and 340 of its float32 ones differ).
    float16/bfloat16: c10's operators round to the type after each operation,
    n - 1 and i converted to it first: the type's own ops here."""
    (n,) = ctx.shape
    dt = ctx.dtype
    to = (lambda h: convert(convert(h, "f32"), dt)) if dt in ("f16", "bf16") else (lambda h: convert(h, dt))
    start, end = to(start), to(end)
    count = apply("iota", dim=0, shape=(n,), dtype="f64", device=ctx.device)
    # n - 1 a program input of the type (the lowering divides by a broadcast exactly, not by a convert
    # of one): XLA turns a division by a constant into a multiplication by its reciprocal
    step = apply("div", apply("sub", end, start), scalar(n - 1, dt, ctx.device, (n,)))
    first = apply("compare", count, const(n // 2, "f64", ctx.device, (n,)), direction="LT")
    if dt in ("f16", "bf16"):
        i, back = to(count), to(apply("sub", const(n - 1, "f64", ctx.device, (n,)), count))
        up = apply("add", start, apply("mul", step, i))
        return apply("select", first, up, apply("sub", end, apply("mul", step, back)))
    # one multiply-add of each index's side: i from start, or -(n - 1 - i) from end (float64's a
    # lazy.fma, which lazy-keep-roundings ties to its sum: 18 nodes, where a Dekker product and a
    # sum rounded to odd took 82 while XLA left short arrays' products unfused)
    k = to(apply("select", first, count, apply("sub", count, const(n - 1, "f64", ctx.device, (n,)))))
    side = apply("select", first, start, end)
    return fused_multiply_add(k, step, side)


@lowers(aten.eye.default, aten.eye.m)
def _eye(ctx, n, m=None, **kwargs):
    shape = ctx.shape
    rows = apply("iota", dim=0, shape=shape, dtype="i64", device=ctx.device)
    cols = apply("iota", dim=1, shape=shape, dtype="i64", device=ctx.device)
    return convert(apply("compare", rows, cols, direction="EQ"), ctx.dtype)


FACTORIES = (
    aten.empty.memory_format,
    aten.empty_strided.default,
    aten.zeros.default,
    aten._efficientzerotensor.default,
    aten.arange.default,
    aten.arange.start,
    aten.arange.start_step,
    aten.linspace.default,
    aten.eye.default,
    aten.eye.m,
)
