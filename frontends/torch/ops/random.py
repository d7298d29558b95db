"""Random ops, on a counter-based generator whose state lives on the device.

Each lazycore device has one :class:`Generator`: a seed and a ``ui64[2]`` lazy
value threaded through ``lazy.rng_bit_generator``, so a program stays pure
and a step draws fresh numbers without any host transfer. As CUDA's
generators, every lazy generator is (re)seeded by ``torch.manual_seed`` and
``torch.seed`` (:mod:`..hooks` hears them) and starts from
``torch.initial_seed()`` otherwise; ``torch.lazy`` (:mod:`..device_module`)
reads and sets one generator's state. Eager and lazy draw different numbers
from the same seed; both have the documented distributions. ``multinomial``
is the exception: it draws eager's numbers from eager's CPU generator on the
host (see its section). A call with an
explicit ``generator=`` never reaches these lowerings: dispatch runs it
eagerly on the CPU with that generator (a counted fallback). A generator made
for the lazy device (``torch.Generator(device="lazy")``,
:class:`~..device_module.LazyGenerator`) is a CPU generator's stream, so it
draws eager's numbers for its seed there too.
"""

from __future__ import annotations

import contextlib
import math
import threading

import numpy as np
import torch

from lazycore.trace import core, scans

from ..lowering import apply, const, convert, lowers, scalar

aten = torch.ops.aten

_GOLDEN = 0x9E3779B97F4A7C15
_U64 = 0xFFFFFFFFFFFFFFFF


class Generator:
    """One device's random stream: its seed and the lazy ``ui64[2]`` state
    value (None until the first draw: seeding before it costs no upload; a
    seed after draws gives the same state object the seed's words)."""

    __slots__ = ("device", "seed", "state")

    STATE_BYTES = 24
    """``get_state``'s size: the seed and the two state words, little-endian u64."""

    def __init__(self, device, seed: int):
        self.device = device
        self.seed = seed
        self.state = None

    def reseed(self, seed: int) -> None:
        self.seed = seed & _U64
        if self.state is not None:
            # the state stays one object, given the seed's words: a captured step reads it
            # as an input, and a new object would make the step record again at every seed
            self.state.assign(core.from_numpy(np.array([self.seed, _GOLDEN], dtype=np.uint64), self.device))

    def handle(self):
        """The state value, uploaded from the seed on the first draw."""
        if self.state is None:
            words = np.array([self.seed, _GOLDEN], dtype=np.uint64)
            self.state = core.from_numpy(words, self.device)
        return self.state

    def get_state(self) -> torch.Tensor:
        """The seed and the state words as a CPU uint8 tensor (``torch.cuda.get_rng_state``'s
        kind). Reading a state that draws have advanced is a barrier: the words are on the device."""
        if self.state is None:
            words = np.array([self.seed, _GOLDEN], dtype=np.uint64)
        else:
            words = core.to_numpy(self.state).astype(np.uint64)
        raw = np.concatenate([np.array([self.seed], dtype=np.uint64), words]).astype("<u8")
        return torch.from_numpy(raw.view(np.uint8).copy())

    def set_state(self, new_state) -> None:
        if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8:
            raise TypeError(f"expected a torch.ByteTensor as the RNG state, got {type(new_state).__name__}"
                            + (f" of dtype {new_state.dtype}" if isinstance(new_state, torch.Tensor) else ""))
        raw = new_state.detach().cpu().contiguous().numpy()
        if raw.size != self.STATE_BYTES:
            raise RuntimeError(f"RNG state is wrong size: expected {self.STATE_BYTES} bytes, got {raw.size}")
        seed, w0, w1 = (int(v) for v in raw.view("<u8"))
        self.seed = seed
        self.state = core.from_numpy(np.array([w0, w1], dtype=np.uint64), self.device)


class _OnDevice(threading.local):
    """How many :meth:`Generators.device_draws` blocks this thread is in."""

    depth = 0


class Generators:
    """The generator of each lazycore device, made on first use."""

    __slots__ = ("by_device", "on_device")

    def __init__(self):
        self.by_device: dict = {}
        self.on_device = _OnDevice()

    @contextlib.contextmanager
    def device_draws(self):
        """Ops that draw eager's numbers from a CPU generator on the host
        (``multinomial``) draw from the device's generator inside: a step
        recorded for replay (a host draw is an upload, which no replay makes
        again, so the recording would be refused)."""
        self.on_device.depth += 1
        try:
            yield
        finally:
            self.on_device.depth -= 1

    def of(self, dev) -> Generator:
        g = self.by_device.get(dev)
        if g is None:
            g = self.by_device[dev] = Generator(dev, torch.initial_seed())
        return g

    def reseed_all(self, seed: int) -> None:
        """Every device's stream restarts from ``seed`` (also those made later)."""
        for g in self.by_device.values():
            g.reseed(seed)


GENERATORS = Generators()


def manual_seed(seed: int) -> None:
    """``torch.manual_seed(seed)``, which restarts every lazy stream from it."""
    torch.manual_seed(seed)


def bits(dev, shape, dtype: str):
    state = GENERATORS.of(dev).handle()
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


# --- multinomial ----------------------------------------------------------------------------
# transformers' sampling (do_sample=True) draws each token with torch.multinomial: on
# eager's kernel that was a fallback, and a barrier, per generated token. It draws
# eager's numbers (issue 39): its random part is a function of the CPU generator's
# state and the shape only, so that part is drawn on the host from the generator
# eager would use, advancing it as eager does (a later CPU draw matches too), and
# uploaded; the rest is lazy, with no barrier. Eager CPU (Distributions.cpp,
# multinomial_out), one sample or none put back: ``q = empty_like(p).exponential_()``
# (``-log1p(-u)``, u the generator's doubles, rounded to p's type), ``p / q`` in p's
# type, its argmax (the first of ties), or its topk (the k largest, ties the lower
# index first). Put back, more than one (cpu/MultinomialKernel.cpp): per row the
# running sum of p, one element after another (float carried for float and the half
# types, double for double), divided by the total, the last set to 1; then per
# sample u, a double of the generator (row by row, sample by sample), and the first
# place whose sum is >= u. That needs eager's in-order scan (scans.in_order: the
# CPU platform); elsewhere, and in a step being recorded for replay (a host draw is
# an upload no replay makes again; Generators.on_device), the draws come from the
# device's generator: an exponential race (category i's key E_i / p_i, the smallest
# wins with probability p_i / sum(p); the k smallest of one draw are k draws
# without replacement), the documented distribution, not eager's numbers.
# Validity checks are step checks: eager checks before it draws, here the host draw
# is made first (an invalid p still advances the CPU generator).

_TORCH = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16}


def _checked(probs, dev):
    p = probs if len(probs.shape) == 2 else apply("reshape", probs, shape=(1, probs.shape[0]))
    rows, n = p.shape
    w = _wide(probs.dtype)
    pw = convert(p, w)
    zero = const(0, w, dev, (rows, n))
    bad = apply("or", apply("not", apply("is_finite", pw)), apply("compare", pw, zero, direction="LT"))
    p = core.check(p, bad, "probability tensor contains either `inf`, `nan` or element < 0")
    positive = apply("compare", convert(p, w), zero, direction="GT")
    count = apply("reduce_sum", convert(positive, "i64"), dims=(1,))
    p = core.check(p, apply("compare", count, const(0, "i64", dev, (rows,)), direction="EQ"),
                   "invalid multinomial distribution (sum of probabilities <= 0)")
    return p, positive


def _host_upload(t: torch.Tensor, dtype: str, dev):
    """A CPU draw as a lazy value of ``dtype`` (half types travel as float32, exactly)."""
    wide = torch.float64 if t.dtype == torch.float64 else torch.float32
    return convert(core.from_numpy(t.to(wide).numpy(), dev), dtype)


@lowers(aten.multinomial.default)
def _multinomial(ctx, probs, num_samples, replacement=False, generator=None):
    dev = ctx.device
    p, positive = _checked(probs, dev)
    rows, n = p.shape
    dtype = probs.dtype
    if rows == 0 or dtype not in _TORCH or GENERATORS.on_device.depth:
        return _multinomial_on_device(ctx, p, positive, num_samples, replacement)
    if not replacement or num_samples == 1:
        q = torch.empty((rows, n), dtype=_TORCH[dtype]).exponential_(generator=generator)
        r = apply("div", p, _host_upload(q, dtype, dev))
        if num_samples == 1:
            picked = apply("argmax", r, dim=1, dtype="i64")
        else:
            _, order = apply("sort", r, dim=1, descending=True, dtype="i64")
            picked = apply("slice", order, start=[0, 0], limit=[rows, num_samples], strides=[1, 1])
        return apply("reshape", picked, shape=ctx.shape)
    if not scans.in_order(dev):
        return _multinomial_on_device(ctx, p, positive, num_samples, replacement)
    carry = "f64" if dtype == "f64" else "f32"
    cum = scans.one_by_one(convert(p, carry), 1, lambda a, b: apply("add", a, b), 0.0)
    total = apply("slice", cum, start=[0, n - 1], limit=[rows, n], strides=[1, 1])
    cum = apply("div", cum, apply("broadcast_in_dim", total, shape=(rows, n), dims=(0, 1)))
    last = apply("compare", apply("iota", dim=1, shape=(rows, n), dtype="i64", device=dev), const(n - 1, "i64", dev, (rows, n)),
                 direction="EQ")
    cum = convert(apply("select", last, const(1, carry, dev, (rows, n)), cum), "f64")
    u = torch.rand((rows, num_samples), dtype=torch.float64, generator=generator)
    shape = (rows, num_samples, n)
    below = apply("compare", apply("broadcast_in_dim", cum, shape=shape, dims=(0, 2)),
                  apply("broadcast_in_dim", _host_upload(u, "f64", dev), shape=shape, dims=(0, 1)), direction="LT")
    picked = apply("reduce_sum", convert(below, "i64"), dims=(2,))
    return apply("reshape", picked, shape=ctx.shape)


def _multinomial_on_device(ctx, p, positive, num_samples, replacement):
    dev = ctx.device
    rows, n = p.shape
    w = _wide(p.dtype)
    p = convert(p, w)
    draws = 1 if not replacement else num_samples
    shape = (rows, draws, n)
    e = apply("neg", apply("log1p", apply("neg", uniform01(dev, shape, w))))  # Exp(1): -log(1 - u), u in [0, 1)
    pw = apply("broadcast_in_dim", p, shape=shape, dims=(0, 2))
    keys = apply("select", apply("broadcast_in_dim", positive, shape=shape, dims=(0, 2)), apply("div", e, pw),
                 const(math.inf, w, dev, shape))
    if replacement or num_samples == 1:
        picked = apply("argmin", keys, dim=2, dtype="i64")  # (rows, draws); ties: the first, never an inf over a finite
    else:
        _, order = apply("sort", apply("reshape", keys, shape=(rows, n)), dim=1, descending=False, dtype="i64")
        picked = apply("slice", order, start=[0, 0], limit=[rows, num_samples], strides=[1, 1])
    return apply("reshape", picked, shape=ctx.shape)
