"""Which zero NumPy's ``maximum``/``minimum``/``fmax``/``fmin`` loops give on a tie of signed zeros.

IEEE orders +0.0 above -0.0 and the lazy ``maximum`` does too; NumPy's loops
(``numpy/_core/src/umath/loops_minmax.dispatch.c.src``) pick an operand
instead, and which one depends on the loop that computed the position:

- the SIMD loops (``npyv_maxn``/``npyv_maxp``: x86's ``max``, which gives its
  second operand on a tie) give the second operand; ``simd_binary_ccc`` and
  ``simd_binary_`` run whole vectors over the first ``floor(n / lanes) * lanes``
  elements of an inner loop of ``n`` and a scalar loop over the rest;
- the scalar loop (``scalar_max``: SSE's ``max_ss`` with a NaN blend, the
  second operand; ``fmax``: the C library's, whose tie rule is its own; the
  float16 loop's ``npy_half_ge``, the first) gives what the probe shows;
- a reduction (``np.max``: ``maximum.reduce``) with the reduced axes innermost
  copies the first element of each run into the result, then
  ``simd_reduce_c`` runs over the rest: one accumulator vector set to that
  first element, each lane the max of its column (the second, later one on a
  tie), the lanes combined by ``npyv_reduce_max`` (a tree of shuffles and
  ``max``: which lane wins a tie is its own order), then the scalar loop over
  the tail; with the reduced axes outermost it is the binary loop, row after
  row, ``out = maximum(out, row)``.

The lane width, the scalar loop's rule and the lane order of the horizontal
reduction are asked of NumPy itself once per ufunc and dtype (a few calls on
arrays of zeros, :data:`_PROBED`), so they are this machine's (AVX512, AVX2,
or none). What is not modelled (operands that are not C-ordered contiguous,
casts inside the loop, ``where=``, ``initial=``, reduced axes between kept ones)
keeps what the lazy op gave before (IEEE's order for a reduction, the vector
loop's rule for a binary op), and so do reductions of more than
:data:`MODELLED` elements and ``fmax``/``fmin`` with a broadcast or scalar
operand (their strided loops' tails differ again).
"""

from __future__ import annotations

import math

import numpy as np

from lazycore.ir.memo import Memo
from lazycore.trace import composites, core

apply = core.apply

_PROBE = 255
_PROBED = Memo("numpy.minmax_loops", 64)
"""(kind, ufunc name, dtype) -> what NumPy's loop does on a tie of signed zeros,
asked of NumPy once (:func:`_reduce_rule`, :func:`_tail_rule`); None where the
probe showed no pattern modelled here."""

MODELLED = 1 << 16
"""The most elements a reduction's tie is modelled for: the model is a second
reduction beside the max (a key per element), 3.3-3.6x the time of a plain
``np.max`` of 1M float32 elements (same process, load 13-15), so larger arrays
keep IEEE's order."""


def _probed(kind, name, dtype, probe):
    key = (kind, name, np.dtype(dtype).str)
    if key not in _PROBED:
        _PROBED.put(key, probe(getattr(np, name), np.dtype(dtype)))
    return _PROBED[key]


def _first_wins(uf, dtype, n):
    """Where ``uf`` of -0.0 and +0.0 (``n`` of each, contiguous) gives its first operand."""
    return np.signbit(uf(np.full(n, -0.0, dtype), np.zeros(n, dtype)))


def _lanes(dtype) -> int | None:
    """The elements one vector of the SIMD loops holds for ``dtype`` (0: none),
    from ``fmax``'s binary loop, whose scalar tail gives the first operand at
    its first element (the vector body gives the second everywhere)."""
    first = _first_wins(np.fmax, dtype, _PROBE)
    if first.all():
        return 0
    k = int(np.argmax(first)) if first.any() else _PROBE
    return next((c for c in (2, 4, 8, 16, 32, 64) if (_PROBE // c) * c == k), None)


def _reduce_rule(uf, dtype):
    """``(lanes, scalar_first, lane_rank)`` of ``uf.reduce`` (``maximum``/``minimum``):
    the SIMD loop's lanes (0: a scalar loop only), whether the scalar loop keeps
    its first operand on a tie, each lane's rank in the horizontal reduction."""
    first = _first_wins(uf, dtype, _PROBE)
    if first.all():
        return 0, True, None  # (float16: a scalar loop that keeps the first)
    if first.any():
        return None
    lanes = _lanes(dtype)
    if not lanes:
        return None if lanes is None else (0, False, None)
    rank = _lane_rank(uf, dtype, lanes)
    return None if rank is None else (lanes, False, rank)


def _tail_rule(uf, dtype):
    """``(lanes, first)`` of ``uf``'s binary loop over two contiguous operands:
    ``first[t]``, for a scalar tail of ``t`` elements, where in it the first
    operand wins a tie (the vector body gives the second). ``fmax``'s tail
    calls the C library's ``fmax`` in a loop the compiler unrolled: on this
    machine (glibc, AVX512) float32's tail keeps the first at its first element
    only, float64's at offsets 0, 1, 2, 4, 5 of 8, so the tail is asked per length."""
    lanes = _lanes(dtype)
    if lanes is None:
        return None
    span = lanes or 64
    first = tuple(tuple(bool(v) for v in _first_wins(uf, dtype, t)) for t in range(span))
    return lanes, first


def _lane_rank(uf, dtype, lanes):
    """Each lane's rank in ``uf.reduce``'s horizontal reduction of its accumulator
    (0: the lane a tie of all gives), found by elimination: a run of ``1 + lanes``
    elements puts element ``1 + j`` in lane ``j`` (the first is the initial value:
    here one that loses), the lanes still in play +0.0, one of them -0.0."""
    big = 1.0 if uf is np.minimum else -1.0  # loses to a zero
    left, order = list(range(lanes)), []
    while left:
        winners = []
        for j in left:
            x = np.full(1 + lanes, big, dtype)
            x[[1 + i for i in left]] = 0.0
            x[1 + j] = -0.0
            if np.signbit(uf.reduce(x)):
                winners.append(j)
        if len(winners) != 1:
            return None
        order.append(winners[0])
        left.remove(winners[0])
    rank = [0] * lanes
    for r, j in enumerate(order):
        rank[j] = r
    return tuple(rank)


def _contiguous(a) -> bool:
    """``a`` (a lazy array) lies in memory as a C-contiguous NumPy array would."""
    step = 1
    for n, s in zip(reversed(a._shape), reversed(a._estrides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _const(value, dtype, device, shape):
    return composites.constant(value, dtype, device, shape)


def _signbit(x):
    width = {"f16": "i16", "f32": "i32", "f64": "i64"}[x.dtype]
    bits = apply("bitcast_convert", x, dtype=width)
    return apply("compare", bits, _const(0, width, x.device, tuple(x.shape)), direction="LT")


def _last_zero(x, key):
    """Over ``x`` ``(R, k)``: the greatest ``key`` of its zeros, times two, plus that
    zero's sign bit (``-2**62`` for a row without a zero): one reduction beside the
    max itself, no second pass over ``x``."""
    shape = tuple(x.shape)
    zero = apply("compare", x, _const(0, x.dtype, x.device, shape), direction="EQ")
    tagged = apply("add", apply("mul", key, _const(2, "i64", x.device, shape)),
                   apply("convert", _signbit(x), dtype="i64"))
    low = _const(-(2 ** 62), "i64", x.device, shape)
    return apply("reduce_max", apply("select", zero, tagged, low), dims=(len(shape) - 1,))


def _iota(shape, dim, device):
    return apply("iota", dim=dim, shape=tuple(shape), dtype="i64", device=device)


def _slice(x, dim, lo, hi):
    start = [0] * len(x.shape)
    limit = list(x.shape)
    start[dim], limit[dim] = lo, hi
    return apply("slice", x, start=start, limit=limit, strides=[1] * len(x.shape))


def _run_keys(rows, rule):
    """The tagged key of the zero NumPy's reduce loop keeps in each row of ``rows``
    ``(R, m)`` (its first element copied to the result, the rest in ``simd_reduce_c``):
    the tail's last zero, else the zero of the first lane (in the horizontal
    reduction's order) holding one, the later in it; the first element sits in
    every lane before the rest. A float16 loop (no SIMD) keeps the first zero."""
    lanes, scalar_first, rank = rule
    r, m = rows.shape
    dev = rows.device
    n = m - 1
    cut = (n // lanes) * lanes if lanes else 0
    if cut == 0:
        pos = _iota((r, m), 1, dev)
        return _last_zero(rows, apply("neg", pos) if scalar_first else pos)
    if rank is None or scalar_first:
        return None
    big = m + 2
    parts = []
    first = _slice(rows, 1, 0, 1)
    parts.append(_last_zero(first, _const(lanes * big, "i64", dev, (r, 1))))
    body = apply("reshape", _slice(rows, 1, 1, 1 + cut), shape=(r, cut // lanes, lanes))
    grid = (r, cut // lanes, lanes)
    lane_key = core.broadcast_to(_const(np.array([(lanes - k) * big for k in rank], np.int64), "i64", dev, ()), grid)
    key = apply("add", lane_key, apply("add", _iota(grid, 1, dev), _const(1, "i64", dev, grid)))
    parts.append(_last_zero(apply("reshape", body, shape=(r, cut)), apply("reshape", key, shape=(r, cut))))
    if cut < n:
        tail = _slice(rows, 1, 1 + cut, m)
        shape = (r, n - cut)
        parts.append(_last_zero(tail, apply("add", _iota(shape, 1, dev), _const((lanes + 1) * big, "i64", dev, shape))))
    out = parts[0]
    for p_ in parts[1:]:
        out = apply("maximum", out, p_)
    return out


def reduced(a, h, r, name: str, axes: tuple) -> object:
    """``r``, the lazy ``name.reduce`` (``maximum``/``minimum``) of ``h`` (``a``'s
    value) over ``axes``, with NumPy's zero where the reduced elements tie at
    zero; ``r`` as it is where the layout is not modelled."""
    shape = tuple(a.shape)
    rank = len(shape)
    if (name not in ("maximum", "minimum") or not axes or not rank or h.dtype not in ("f16", "f32", "f64")
            or not _contiguous(a)):
        return r
    rule = _probed("reduce", name, a.dtype, _reduce_rule)
    if rule is None:
        return r
    axes = tuple(sorted(axes))
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    outer = math.prod(kept)
    size = math.prod(shape[d] for d in axes)
    if size == 0 or outer == 0 or size * outer > MODELLED:
        return r
    if axes == tuple(range(rank - len(axes), rank)):
        # the reduced axes innermost: one run of the reduce loop per result
        tagged = _run_keys(apply("reshape", h, shape=(outer, size)), rule)
    elif axes == tuple(range(len(axes))):
        # the kept axes innermost: out = OP(out, row), row after row: the binary loop,
        # whose vector body and scalar tail (SSE's max_ss) both keep the second, the later row
        # (float16's loop keeps the first)
        seq = apply("permute", apply("reshape", h, shape=(size, outer)), dims=(1, 0))
        pos = _iota((outer, size), 1, h.device)
        tagged = _last_zero(seq, apply("neg", pos) if rule[1] else pos)
    else:
        return r
    if tagged is None:
        return r
    out = tuple(r.shape)
    negative = apply("compare", apply("and", apply("reshape", tagged, shape=out), _const(1, "i64", r.device, out)),
                     _const(1, "i64", r.device, out), direction="EQ")
    zero = apply("compare", r, _const(0, r.dtype, r.device, out), direction="EQ")
    signed = apply("select", negative, _const(-0.0, r.dtype, r.device, out), _const(0.0, r.dtype, r.device, out))
    return apply("select", zero, signed, r)


def binary_tail(name: str, dtype, inputs, shape, device):
    """Where NumPy's binary ``name`` loop (``maximum``, ``minimum``, ``fmax``,
    ``fmin``) over ``inputs`` (the call's operands) gives its first operand on a
    tie: an ``i1`` handle of ``shape``, True (everywhere: float16's scalar loop),
    or None (nowhere, or not modelled: then the vector loop's rule, the second
    operand, holds). A tail that differs from the vector body (``fmax`` and
    ``fmin``) is modelled for two lazy arrays of one shape, C-contiguous, of the
    loop's dtype: NumPy runs one loop over all their elements (broadcast and
    scalar operands take loops of their own)."""
    rule = _probed("tail", name, dtype, _tail_rule)
    if rule is None:
        return None
    lanes, first = rule
    if lanes == 0:
        return True if all(all(f) for f in first[1:]) else None
    if not any(any(f) for f in first):
        return None
    if len(inputs) != 2 or not all(hasattr(x, "_estrides") for x in inputs):
        return None
    if not shape or any(tuple(x.shape) != tuple(shape) for x in inputs):
        return None
    if any(np.dtype(v.dtype) != np.dtype(dtype) or not _contiguous(v) for v in inputs):
        return None
    total = math.prod(shape)
    cut = (total // lanes) * lanes
    pattern = first[total - cut]
    if not any(pattern):
        return None
    mask = np.zeros(total, bool)
    mask[[cut + i for i, f in enumerate(pattern) if f]] = True
    return apply("reshape", _const(mask, "i1", device, ()), shape=tuple(shape))
