"""``np.random.default_rng(seed)``: a Generator whose state lives on the device.

A :class:`Generator` holds a ``ui64[2]`` lazy state threaded through
``lazy.rng_bit_generator`` (Threefry), so drawing numbers records graph
nodes and never syncs with the host. The state comes deterministically from
the seed (through NumPy's ``SeedSequence``, as NumPy seeds its own
generators): the same seed gives the same numbers, run after run. They are
not NumPy's numbers (NumPy's PCG64 stream cannot be reproduced on the
device); the distributions are the documented ones:

- ``random``/``uniform``: 53 random bits per float64 (24 per float32), in [0, 1).
- ``standard_normal``/``normal``: Box-Muller on two uniforms.
- ``integers``: 64 random bits reduced modulo the range (a bias below
  range / 2**64, invisible for any practical range).
- ``choice``: with replacement (uniform, or ``p`` through its cumulative sum).

Differences from NumPy: ``size=None`` gives a 0-d lazy array, not a Python
float (a float would need a barrier per draw); argument checks that need
values (``scale < 0``, ``low >= high``) run on host arguments only, not on
lazy ones. Other methods (``permutation``, ``shuffle``, ``exponential``,
``choice`` without replacement, ...) run a NumPy Generator seeded from this
one's stream: reproducible, and counted as fallbacks. So are the legacy
module functions (``np.random.rand``, ``np.random.seed``, ...).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from lazycore.trace import core

from .array import device, ndarray, value, wrap, write
from .fallback import call_numpy
from .indexing import take
from .ufuncs import UFUNCS, apply, asarray_like, broadcast_to_shape, cast, const, shape_of, to_handle

__all__ = ["default_rng", "Generator", "SeedSequence"]

SeedSequence = np.random.SeedSequence

_add, _subtract, _multiply = (UFUNCS[n] for n in ("add", "subtract", "multiply"))


def default_rng(seed=None) -> "Generator":
    """A new :class:`Generator` seeded from ``seed`` (None: fresh OS entropy)."""
    if isinstance(seed, Generator):
        return seed
    if isinstance(seed, np.random.Generator):
        words = seed.integers(0, 2**64, size=2, dtype=np.uint64, endpoint=False)
    else:
        seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        words = seq.generate_state(2, np.uint64)
    return Generator(words)


def _size(size) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)):
        size = (size,)
    shape = tuple(operator.index(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError("negative dimensions are not allowed")
    return shape


def _float_dtype(dtype, what: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise TypeError(f"Unsupported dtype {dt!r} for {what}")
    return dt


def _as_float64(x):
    """A distribution parameter as float64 (NumPy converts them to double); Python
    scalars stay scalars, so new values do not recompile."""
    if isinstance(x, ndarray):
        return x.astype(np.float64)
    if np.ndim(x) == 0:
        return float(x)
    return np.asarray(x, dtype=np.float64)


def _out_shape(size, *params) -> tuple[int, ...]:
    """The draw's shape: ``size``, which the parameters must broadcast to, or theirs."""
    pshape = tuple(np.broadcast_shapes(*(tuple(shape_of(p)) for p in params)))
    if size is None:
        return pshape
    shape = _size(size)
    if np.broadcast_shapes(pshape, shape) != shape:
        raise ValueError(f"shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is between "
                         f"arg 0 with shape {shape} and arg 1 with shape {pshape}.")
    return shape


def _host(x):
    """``x`` as a host array if it is host data (checks that need values run on those only)."""
    return None if isinstance(x, ndarray) else np.asarray(x)


class Generator:
    """NumPy's ``Generator`` API over a lazy Threefry state (see the module doc)."""

    def __init__(self, words):
        if isinstance(words, np.random.BitGenerator):
            # NumPy's public constructor, ``Generator(PCG64(seed))``: the lazy stream is
            # seeded from the bit generator's next two words (it draws its own stream, as
            # default_rng's does, from a seed the bit generator determines)
            words = words.random_raw(2)
        words = np.asarray(words, dtype=np.uint64).reshape(2)
        self._state = core.from_numpy(words, device())

    def __repr__(self):
        return "Generator(lazy Threefry)"

    # --- raw material ---------------------------------------------------------------------------

    def _bits(self, shape, dtype: str):
        new_state, bits = core.apply("rng_bit_generator", self._state, algorithm="three_fry",
                                     shape=tuple(shape), dtype=dtype)
        self._state.assign(new_state)
        return bits

    def _uniform01(self, shape, dt: np.dtype):
        """Uniform in [0, 1): the top 53 (f64) or 24 (f32) bits as a fraction."""
        if dt == np.float64:
            bits = self._bits(shape, "ui64")
            f = cast(apply("div", bits, const(1 << 11, bits)), np.float64)
            return apply("mul", f, const(2.0**-53, f))
        bits = self._bits(shape, "ui32")
        f = cast(apply("div", bits, const(1 << 8, bits)), np.float32)
        return apply("mul", f, const(2.0**-24, f))

    def _standard_normal(self, shape, dt: np.dtype):
        # Box-Muller: sqrt(-2 ln u1) cos(2 pi u2), with u1 in (0, 1]
        u1 = self._uniform01(shape, dt)
        u1 = apply("sub", const(1, u1), u1)
        u2 = self._uniform01(shape, dt)
        r = apply("sqrt", apply("mul", const(-2, u1), apply("log", u1)))
        return apply("mul", r, apply("cos", apply("mul", u2, const(2 * math.pi, u2))))

    def _host_generator(self) -> np.random.Generator:
        """A NumPy Generator seeded from this stream (a barrier: the seed is read back)."""
        words = core.to_numpy(self._bits((4,), "ui64"))
        return np.random.default_rng(np.random.SeedSequence(words.tolist()))

    # --- distributions ----------------------------------------------------------------------------

    def random(self, size=None, dtype=np.float64, out=None):
        dt = _float_dtype(dtype, "random")
        shape = out.shape if out is not None and size is None else _size(size)
        return _into(wrap(self._uniform01(shape, dt), dt), out)

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        dt = _float_dtype(dtype, "standard_normal")
        shape = out.shape if out is not None and size is None else _size(size)
        return _into(wrap(self._standard_normal(shape, dt), dt), out)

    def uniform(self, low=0.0, high=1.0, size=None):
        low, high = _as_float64(low), _as_float64(high)
        hl, hh = _host(low), _host(high)
        if hl is not None and hh is not None and not np.all(np.isfinite(hh - hl)):
            raise OverflowError("Range exceeds valid bounds")
        shape = _out_shape(size, low, high)
        u = wrap(self._uniform01(shape, np.dtype(np.float64)), np.float64)
        return _add(_multiply(_subtract(high, low), u), low)

    def normal(self, loc=0.0, scale=1.0, size=None):
        loc, scale = _as_float64(loc), _as_float64(scale)
        hs = _host(scale)
        if hs is not None and np.any(hs < 0):
            raise ValueError("scale < 0")
        shape = _out_shape(size, loc, scale)
        z = wrap(self._standard_normal(shape, np.dtype(np.float64)), np.float64)
        return _add(_multiply(z, scale), loc)

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        """Integers in [low, high) (or [low, high] with ``endpoint``); ``high=None``: [0, low)."""
        dt = np.dtype(dtype)
        if dt.kind not in "iub":
            raise TypeError(f"Unsupported dtype {dt!r} for integers")
        only_high = high is None
        if only_high:
            low, high = 0, low
        if not isinstance(low, ndarray) and not isinstance(high, ndarray) and np.ndim(low) == 0 \
                and np.ndim(high) == 0:
            return self._integers_scalar(int(low), int(high), size, dt, endpoint, only_high)
        return self._integers_array(low, high, size, dt, endpoint)

    def _integers_scalar(self, lo, hi, size, dt, endpoint, only_high):
        info = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        last = hi if endpoint else hi - 1
        if lo < info[0]:
            raise ValueError(f"low is out of bounds for {dt.name}")
        if last > info[1]:
            raise ValueError(f"high is out of bounds for {dt.name}")
        if last < lo:
            raise ValueError("high <= 0" if only_high and not endpoint else
                             ("low > high" if endpoint else "low >= high"))
        shape = _size(size)
        span = last - lo + 1  # how many values, 1 ... 2**64
        bits = self._bits(shape, "ui64")
        r = bits if span == 2**64 else apply("rem", bits, const(span, bits))
        if dt.kind == "u" and dt.itemsize == 8:
            v = apply("add", r, const(lo, r))
        elif span <= 2**63:
            r = cast(r, np.int64)
            v = apply("add", r, const(lo, r))
        else:  # a span past int64: add in wrapping unsigned arithmetic, then reinterpret
            v = cast(apply("add", r, const(lo % 2**64, r)), np.int64)
        return wrap(cast(v, dt), dt)

    def _integers_array(self, low, high, size, dt, endpoint):
        hl, hh = _host(low), _host(high)
        if hl is not None and hh is not None:
            bad = hl > hh if endpoint else hl >= hh
            if np.any(bad):
                raise ValueError("low > high" if endpoint else "low >= high")
        shape = _out_shape(size, low, high)
        wide = np.dtype(np.uint64) if dt.kind == "u" and dt.itemsize == 8 else np.dtype(np.int64)
        lo = broadcast_to_shape(_param(low, wide), shape)
        hi = broadcast_to_shape(_param(high, wide), shape)
        span = apply("sub", hi, lo)
        if endpoint:
            span = apply("add", span, const(1, span))
        bits = self._bits(shape, "ui64")
        r = apply("rem", bits, cast(span, np.uint64))
        v = apply("add", cast(r, wide), lo)
        return wrap(cast(v, dt), dt)

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        """Draws with replacement on the device; without replacement, NumPy (counted)."""
        lazy_p = isinstance(p, ndarray)
        if not replace or lazy_p or axis != 0:
            return self._fallback("choice")(a, size=size, replace=replace, p=p, axis=axis, shuffle=shuffle)
        population = None
        if isinstance(a, (int, np.integer)) or (not isinstance(a, ndarray) and np.ndim(a) == 0):
            n = operator.index(a)
            if n <= 0:
                raise ValueError("a must be a positive integer unless no samples are taken")
        else:
            population = asarray_like(a)
            if population.ndim == 0:
                raise ValueError("a must be a sequence or an integer, not a 0-d array")
            n = population.shape[0]
        shape = _size(size)
        if n == 0 and math.prod(shape):
            raise ValueError("a cannot be empty unless no samples are taken")
        if p is None:
            idx = self.integers(0, max(n, 1), size=shape)
        else:
            idx = self._weighted(np.asarray(p, dtype=np.float64), n, shape)
        if population is None:
            return idx
        return take(population, idx, axis=0)

    def _weighted(self, p, n, shape):
        if p.ndim != 1:
            raise ValueError("p must be 1-dimensional")
        if p.size != n:
            raise ValueError("a and p must have same size")
        if np.any(p < 0) or not np.all(np.isfinite(p)):
            raise ValueError("probabilities are not non-negative")
        if abs(p.sum() - 1.0) > math.sqrt(np.finfo(np.float64).eps):
            raise ValueError("probabilities do not sum to 1")
        cdf = np.cumsum(p)
        cdf /= cdf[-1]
        # the index drawn is how many cumulative probabilities lie at or below u
        u = self._uniform01(shape, np.dtype(np.float64))
        edges = core.from_numpy(cdf[:-1], device())
        full = shape + (n - 1,)
        u = apply("broadcast_in_dim", u, dims=tuple(range(len(shape))), shape=full)
        e = apply("broadcast_in_dim", edges, dims=(len(shape),), shape=full)
        hit = cast(apply("compare", u, e, direction="GE"), np.int64)
        idx = apply("reduce_sum", hit, dims=(len(shape),)) if n > 1 else _zeros_i64(shape)
        return wrap(idx, np.int64)

    # --- everything else: NumPy, seeded from this stream -------------------------------------------

    def _fallback(self, name):
        host = self._host_generator()
        target = getattr(host, name)

        def call(*args, **kwargs):
            return call_numpy(target, args, kwargs, name=f"numpy.random.Generator.{name}")

        return call

    def __getattr__(self, name):
        if name.startswith("_") or not callable(getattr(np.random.Generator, name, None)):
            raise AttributeError(f"'Generator' object has no attribute '{name}'")
        return self._fallback(name)


def _zeros_i64(shape):
    return broadcast_to_shape(core.apply("constant", value=np.zeros((), np.int64), device=device()), shape)


def _param(x, dt):
    return to_handle(x, dt)


def _into(res: ndarray, out):
    if out is None:
        return res
    if not isinstance(out, ndarray) or out.shape != res.shape or out.dtype != res.dtype:
        raise ValueError("Supplied output array does not match the requested shape or dtype")
    write(out, value(res))
    return out


def __getattr__(name):
    """NumPy's legacy ``np.random`` functions (rand, seed, ...): NumPy itself, counted."""
    target = getattr(np.random, name, None)
    if target is None:
        raise AttributeError(f"module 'lazycore.numpy.random' has no attribute '{name}'")
    if not callable(target) or isinstance(target, type):
        return target

    def call(*args, **kwargs):
        return call_numpy(target, args, kwargs, name=f"numpy.random.{name}")

    call.__name__ = name
    call.__doc__ = target.__doc__
    return call
