"""``torch.histc``: counts of a tensor's values in equal-width bins.

Eager's CPU kernel takes floating inputs only; its meta function, which the
lazy device follows, also takes integers, as CUDA's kernel does, and
transformers relies on that: its mixture-of-experts layers count tokens per
expert with ``histc`` of the integer expert ids on every device but the CPU
(``integrations/moe.py``), so a Mixtral on the lazy device reaches it with
int32. Integers are binned as CUDA's kernel bins them (in int64: ``(v - min)
* bins // (max - min)``), floats as eager's CPU kernel (in the input's type:
``int((v - lo) * bins / (hi - lo))``, the edge ``hi`` in the last bin). Half
types go to eager's kernel: it adds the counts up in the half type, so its
counts stop growing past 2048 (256 in bfloat16), which no reduction here
reproduces.
"""

from __future__ import annotations

import math

import torch

from lazycore.dialect.types import is_float
from lazycore.trace import core

from ..lowering import apply, broadcast, const, convert, lowers, reshape

aten = torch.ops.aten


@lowers(aten.histc.default)
def _histc(ctx, x, bins=100, min=0, max=0):
    if x.dtype in ("f16", "bf16"):
        return NotImplemented
    n = math.prod(x.shape)
    flat = reshape(x, (n,))
    floating = is_float(x.dtype)
    wide = x.dtype if floating else "i64"
    flat = convert(flat, wide)
    dev = ctx.device
    if min == max and n:
        # eager reads the values' range (aminmax) on the host; here it stays on
        # the device, and a range that is not finite fails at the barrier
        lo = apply("reduce_min", flat, dims=(0,))
        hi = apply("reduce_max", flat, dims=(0,))
        if floating:
            bad = apply("not", apply("is_finite", flat))
            message = "torch.histc: range of the input's values is not finite"
            lo = core.check(lo, bad, message)
        same = apply("compare", lo, hi, direction="EQ")
        one = const(1, wide, dev)
        lo = apply("select", same, apply("sub", lo, one), lo)
        hi = apply("select", same, apply("add", hi, one), hi)
        lo, hi = broadcast(lo, (n,)), broadcast(hi, (n,))
    else:
        low, high = float(min), float(max)
        if low == high:  # an empty input's range: [min - 1, max + 1]
            low, high = low - 1, high + 1
        if not (math.isfinite(low) and math.isfinite(high)):
            raise RuntimeError(f"torch.histc: range of [{_number(low)}, {_number(high)}] is not finite")
        if floating:  # the edges as eager's kernel holds them: linspace's ends, in the input's type
            lo, hi = const(low, wide, dev, (n,)), const(high, wide, dev, (n,))
        else:
            lo, hi = const(int(low), wide, dev, (n,)), const(int(high), wide, dev, (n,))
    span = apply("sub", hi, lo)
    if floating and wide == "f64":
        # XLA turns a float64 division by a value broadcast from a scalar into a
        # multiplication by its reciprocal (1 ulp off, enough to move a value
        # at a bin's edge into the next bin); the barrier hides where it came from
        span = apply("optimization_barrier", [span])
        span = span[0] if isinstance(span, (tuple, list)) else span
    scaled = apply("mul", apply("sub", flat, lo), const(bins, wide, dev, (n,)))
    pos = convert(apply("div", scaled, span), "i64")
    last = const(bins - 1, "i64", dev, (n,))
    pos = apply("minimum", pos, last)  # the right edge belongs to the last bin
    inside = apply("and", apply("compare", flat, lo, direction="GE"), apply("compare", flat, hi, direction="LE"))
    pos = apply("select", inside, pos, const(-1, "i64", dev, (n,)))  # NaN is inside no bin
    ids = apply("iota", dim=1, shape=(n, bins), dtype="i64", device=dev)
    hits = apply("compare", broadcast(reshape(pos, (n, 1)), (n, bins)), ids, direction="EQ")
    counts = apply("reduce_sum", convert(hits, "i64"), dims=(0,))
    return convert(counts, ctx.dtype)


def _number(v: float) -> str:
    """A bound as eager's message prints it (C++ streams a double: ``inf``, ``-inf``, ``nan``, ``1``, ``0.5``)."""
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:g}"
