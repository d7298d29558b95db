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
keeps the vector loop's rule.
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

_REDUCE = {"maximum": "reduce_max", "fmax": "reduce_max", "minimum": "reduce_min", "fmin": "reduce_min"}


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


def _pick(x, dim, key, op):
    """Along ``dim`` of ``x``: the element equal to ``x``'s ``op`` (``reduce_max`` or
    ``reduce_min``) with the greatest ``key`` (an ``i64`` handle of ``x``'s shape)."""
    shape = tuple(x.shape)
    kept = shape[:dim] + (1,) + shape[dim + 1:]
    best = core.broadcast_to(apply("reshape", apply(op, x, dims=(dim,)), shape=kept), shape)
    equal = apply("compare", x, best, direction="EQ")
    low = _const(np.iinfo(np.int64).min, "i64", x.device, shape)
    at = core.broadcast_to(apply("reshape", apply("reduce_max", apply("select", equal, key, low), dims=(dim,)),
                                 shape=kept), shape)
    fill = -math.inf if op == "reduce_max" else math.inf
    only = apply("and", equal, apply("compare", key, at, direction="EQ"))
    return apply(op, apply("select", only, x, _const(fill, x.dtype, x.device, shape)), dims=(dim,))


def _order_key(shape, dim, device, last: bool):
    pos = apply("iota", dim=dim, shape=tuple(shape), dtype="i64", device=device)
    return pos if last else apply("neg", pos)


def _fold(x, op, first_on_tie: bool):
    """A sequential fold along ``x``'s last dim with ``r = OP(r, next)``."""
    dim = len(x.shape) - 1
    return _pick(x, dim, _order_key(x.shape, dim, x.device, last=not first_on_tie), op)


def _slice(x, dim, lo, hi):
    start = [0] * len(x.shape)
    limit = list(x.shape)
    start[dim], limit[dim] = lo, hi
    return apply("slice", x, start=start, limit=limit, strides=[1] * len(x.shape))


def _reduce_run(rows, name, rule):
    """``name.reduce`` over the last dim of ``rows`` ``(R, m)``, each row one call
    of the reduce loop after its first element was copied to the result."""
    op = _REDUCE[name]
    lanes, scalar_first, rank = rule
    r, m = rows.shape
    if m == 1:
        return apply("reshape", rows, shape=(r,))
    n = m - 1
    cut = (n // lanes) * lanes if lanes else 0
    first = _slice(rows, 1, 0, 1)  # (R, 1)
    if cut == 0:
        return _fold(rows, op, scalar_first)
    if rank is None:
        return None
    body = apply("reshape", _slice(rows, 1, 1, 1 + cut), shape=(r, cut // lanes, lanes))
    acc = core.broadcast_to(apply("reshape", first, shape=(r, 1, 1)), (r, 1, lanes))
    columns = apply("concatenate", acc, body, dim=1)  # (R, 1 + cut/lanes, lanes)
    lane = _pick(columns, 1, _order_key(columns.shape, 1, rows.device, last=True), op)  # (R, lanes)
    ranks = _const(np.array([-k for k in rank], np.int64), "i64", rows.device, ())
    value = _pick(lane, 1, core.broadcast_to(ranks, (r, lanes)), op)  # (R,)
    if cut == n:
        return value
    tail = apply("concatenate", apply("reshape", value, shape=(r, 1)), _slice(rows, 1, 1 + cut, m), dim=1)
    return _fold(tail, op, scalar_first)


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
    op = _REDUCE[name]
    kept = tuple(n for i, n in enumerate(shape) if i not in axes)
    outer = math.prod(kept)
    size = math.prod(shape[d] for d in axes)
    if size == 0 or outer == 0:
        return r
    if axes == tuple(range(rank - len(axes), rank)):
        # the reduced axes innermost: one run of the reduce loop per result
        chosen = _reduce_run(apply("reshape", h, shape=(outer, size)), name, rule)
    elif axes == tuple(range(len(axes))):
        # the kept axes innermost: out = OP(out, row), row after row: the binary loop,
        # whose vector body and scalar tail (SSE's max_ss) both keep the second, the later row
        # (float16's loop keeps the first)
        seq = apply("permute", apply("reshape", h, shape=(size, outer)), dims=(1, 0))
        chosen = _fold(seq, op, rule[1])
    else:
        return r
    if chosen is None:
        return r
    chosen = apply("reshape", chosen, shape=tuple(r.shape))
    zero = apply("compare", r, _const(0, r.dtype, r.device, tuple(r.shape)), direction="EQ")
    return apply("select", zero, chosen, r)


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
