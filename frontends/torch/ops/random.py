"""Random ops, on a counter-based generator whose state lives on the device.

Each lazycore device has one generator state (a ``ui64[2]`` lazy value)
threaded through ``lazy.rng_bit_generator``: a program stays pure and a step
draws fresh numbers without any host transfer. The state is seeded from
torch's default generator, so ``torch.manual_seed`` makes lazy runs
reproducible (:func:`manual_seed` also restarts the stream for a seed already
in use). Eager and lazy draw different numbers from the same seed; both have
the documented distributions. A call with an explicit ``generator=`` never
reaches these lowerings: dispatch runs it eagerly on the CPU with that
generator (a counted fallback).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from lazycore.trace import core

from ..lowering import apply, const, convert, lowers, scalar

aten = torch.ops.aten

_STATE: dict = {}  # lazycore device -> [seed, state handle]
_GOLDEN = 0x9E3779B97F4A7C15


def manual_seed(seed: int) -> None:
    """``torch.manual_seed(seed)``, and restart the lazy streams from it."""
    torch.manual_seed(seed)
    _STATE.clear()


def _state(dev):
    seed = torch.initial_seed()
    entry = _STATE.get(dev)
    if entry is None or entry[0] != seed:
        words = np.array([seed & 0xFFFFFFFFFFFFFFFF, _GOLDEN], dtype=np.uint64)
        entry = _STATE[dev] = [seed, core.from_numpy(words, dev)]
    return entry[1]


def bits(dev, shape, dtype: str):
    state = _state(dev)
    new_state, b = core.apply("rng_bit_generator", state, algorithm="three_fry", shape=tuple(shape), dtype=dtype)
    state.assign(new_state)
    return b


def uniform01(dev, shape, wide: str):
    """Uniform in [0, 1) with 24 (f32) or 53 (f64) random bits."""
    shape = tuple(shape)
    if wide == "f64":
        b = apply("div", bits(dev, shape, "ui64"), const(1 << 11, "ui64", dev, shape))
        return apply("mul", convert(b, "f64"), const(2.0**-53, "f64", dev, shape))
    b = apply("div", bits(dev, shape, "ui32"), const(1 << 8, "ui32", dev, shape))
    return apply("mul", convert(b, "f32"), const(2.0**-24, "f32", dev, shape))


def _wide(dtype):
    return "f64" if dtype == "f64" else "f32"


@lowers(aten.uniform_.default)
def _uniform_(ctx, x, low=0.0, high=1.0, generator=None):
    w = _wide(ctx.dtype)
    u = uniform01(ctx.device, ctx.shape, w)
    span = apply("mul", u, scalar(high - low, w, ctx.device, ctx.shape))
    return convert(apply("add", span, scalar(low, w, ctx.device, ctx.shape)), ctx.dtype)


def standard_normal(dev, shape, w):
    # Box-Muller: sqrt(-2 ln u1) cos(2 pi u2), with u1 in (0, 1]
    u1 = apply("sub", const(1, w, dev, shape), uniform01(dev, shape, w))
    u2 = uniform01(dev, shape, w)
    r = apply("sqrt", apply("mul", const(-2, w, dev, shape), apply("log", u1)))
    return apply("mul", r, apply("cos", apply("mul", u2, const(2 * math.pi, w, dev, shape))))


@lowers(aten.normal_.default)
def _normal_(ctx, x, mean=0.0, std=1.0, generator=None):
    w = _wide(ctx.dtype)
    z = standard_normal(ctx.device, ctx.shape, w)
    z = apply("add", apply("mul", z, scalar(std, w, ctx.device, ctx.shape)), scalar(mean, w, ctx.device, ctx.shape))
    return convert(z, ctx.dtype)


@lowers(aten.bernoulli_.float)
def _bernoulli_(ctx, x, p=0.5, generator=None):
    u = uniform01(ctx.device, ctx.shape, "f64" if ctx.dtype == "f64" else "f32")
    hit = apply("compare", u, scalar(p, u.dtype, ctx.device, ctx.shape), direction="LT")
    return convert(hit, ctx.dtype)


@lowers(aten.bernoulli.default, aten.bernoulli.p)
def _bernoulli(ctx, x, p=None, generator=None):
    w = _wide(ctx.dtype)
    u = uniform01(ctx.device, ctx.shape, w)
    prob = convert(x, w) if p is None else scalar(p, w, ctx.device, ctx.shape)
    return convert(apply("compare", u, prob, direction="LT"), ctx.dtype)


@lowers(aten.exponential_.default)
def _exponential_(ctx, x, lambd=1.0, generator=None):
    w = _wide(ctx.dtype)
    u = apply("sub", const(1, w, ctx.device, ctx.shape), uniform01(ctx.device, ctx.shape, w))  # (0, 1]
    e = apply("div", apply("neg", apply("log", u)), scalar(lambd, w, ctx.device, ctx.shape))
    return convert(e, ctx.dtype)


@lowers(getattr(aten.random_, "from"), aten.random_.to, aten.random_.default)
def _random_(ctx, x, *args, generator=None):
    nums = [a for a in args if a is None or isinstance(a, int)]
    if len(nums) != len(args):
        return NotImplemented
    if ctx.func._overloadname == "to":
        low, high = 0, nums[0]
    elif ctx.func._overloadname == "from":
        low, high = nums[0], nums[1]
    else:
        low, high = 0, None
    if high is None:
        dtype = ctx.out.dtype
        info_bits = {torch.float32: 24, torch.float64: 53, torch.float16: 11, torch.bfloat16: 8}
        high = (1 << info_bits[dtype]) + 1 if dtype in info_bits else (
            2 if dtype == torch.bool else torch.iinfo(dtype).max + 1)
    return _randint(ctx, low, high)


def _randint(ctx, low, high):
    span = high - low
    if span <= 0:
        return NotImplemented
    b = bits(ctx.device, ctx.shape, "ui64")
    r = apply("rem", b, const(span, "ui64", ctx.device, ctx.shape))
    v = apply("add", convert(r, "i64"), const(low, "i64", ctx.device, ctx.shape))
    return convert(v, ctx.dtype)


# --- *_like: fresh values of another tensor's shape --------------------------------------


def _elsewhere(kwargs):
    dev = kwargs.get("device")
    return dev is not None and torch.device(dev).type != "lazy"


@lowers(aten.rand_like.default)
def _rand_like(ctx, x, **kwargs):
    if _elsewhere(kwargs):
        return NotImplemented
    return convert(uniform01(ctx.device, ctx.shape, _wide(ctx.dtype)), ctx.dtype)


@lowers(aten.randn_like.default)
def _randn_like(ctx, x, **kwargs):
    if _elsewhere(kwargs):
        return NotImplemented
    return convert(standard_normal(ctx.device, ctx.shape, _wide(ctx.dtype)), ctx.dtype)


@lowers(aten.randint_like.default, aten.randint_like.low_dtype)
def _randint_like(ctx, x, *bounds, **kwargs):
    if _elsewhere(kwargs):
        return NotImplemented
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    return _randint(ctx, int(low), int(high))
