"""In-place updates of parts of an array: canonical forms, and when to rewrite the whole array.

A frontend writes through a view by replaying the view's steps backward, so
``u[1:-1, 1:-1] = v`` on a 2-D array arrives as a slice of a slice read and a
``dynamic_update_slice`` into a ``dynamic_update_slice`` of a slice written
back. Two ``lazy-canonicalize`` patterns flatten those chains to one slice and
one update with static offsets.

``lazy-update-to-select`` then decides how such an update runs. XLA performs
``dynamic_update_slice`` in place, which is cheapest when the update does not
read the array it writes. When it does (a stencil: ``u[1:-1, 1:-1] = f(u[:-2,
1:-1], u[2:, 1:-1], ...)``), XLA must first copy every region the update reads,
because writing in place would overwrite elements still to be read: for the
heat equation that is six copies of the array per step. Writing a new array,
``select(inside, pad(v), u)``, reads ``u`` once and fuses with the computation
of ``v`` into one loop, so a large self-reading update becomes that select.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import attr, create
from lazycore.dialect.types import TensorType
from lazycore.dialect.mlir import ir, rewrite

from .patterns import pattern, producer, replace, splat_constant, splat_value, type_of
from .catalog import register_pass

SELECT_MIN_FRACTION = 0.5
"""An update covering at least this fraction of the array may become a select
(a smaller one keeps writing in place: rewriting the whole array would cost
more than the copies it saves)."""

SEARCH_LIMIT = 4096
"""Ops looked at when asking whether an update reads its array; beyond that it
is assumed not to (the update stays in place, as without this pass)."""


def constant_int(v: ir.Value):
    """The value of a rank-0 integer ``lazy.constant`` (a start index), or None."""
    s = splat_value(v) if type_of(v).rank == 0 else None
    return int(s) if isinstance(s, np.integer) else None


def static_starts(op):
    """The start indices of a ``dynamic_update_slice`` as XLA applies them
    (clamped so the update fits), or None when one is not a constant."""
    x, update, *starts = op.operands
    values = [constant_int(s) for s in starts]
    if any(s is None for s in values):
        return None
    shape, ushape = type_of(x).shape, type_of(update).shape
    return tuple(min(max(s, 0), n - u) for s, n, u in zip(values, shape, ushape))


def _index_constants(values, like: ir.Value) -> list[ir.Value]:
    """One constant of ``like``'s type per distinct value, in ``values``' order."""
    made: dict[int, ir.Value] = {}
    for v in values:
        if v not in made:
            made[v] = splat_constant(v, type_of(like))
    return [made[v] for v in values]


# --- canonical forms ---------------------------------------------------------------


@pattern("slice")
def slice_of_slice(op, rewriter):
    """slice(slice(x, b1, e1, s1), b2, e2, s2) -> slice(x, b, e, s) with
    b = b1 + b2*s1, s = s1*s2 and e = b + (n-1)*s + 1 for a result dim of n
    (0 for an empty one)"""
    inner = producer(op.operands[0], "slice")
    if inner is None:
        return True
    b1, s1 = attr(inner, "start"), attr(inner, "strides")
    b2, s2 = attr(op, "start"), attr(op, "strides")
    shape = type_of(op.results[0]).shape
    start = tuple(p + q * r for p, q, r in zip(b1, b2, s1))
    strides = tuple(r * t for r, t in zip(s1, s2))
    limit = tuple(b + (n - 1) * s + 1 if n else b for b, n, s in zip(start, shape, strides))
    with rewriter.ip, op.location:
        new = create("slice", inner.operands[0], start=start, limit=limit, strides=strides)
    return replace(op, rewriter, new.result)


@pattern("dynamic_update_slice")
def update_of_update(op, rewriter):
    """dus(x, dus(slice(x, at o, unit strides), v, i), o) -> dus(x, v, o + i)

    (writing back a region of x with v written into it is writing v into x);
    all start indices constants, compared after XLA's clamping."""
    x, update = op.operands[0], op.operands[1]
    inner = producer(update, "dynamic_update_slice")
    if inner is None:
        return True
    region = producer(inner.operands[0], "slice")
    if region is None or region.operands[0] != x or any(s != 1 for s in attr(region, "strides")):
        return True
    outer, within = static_starts(op), static_starts(inner)
    if outer is None or within is None or attr(region, "start") != outer:
        return True
    with rewriter.ip, op.location:
        starts = _index_constants([o + i for o, i in zip(outer, within)], op.operands[2])
        new = create("dynamic_update_slice", x, inner.operands[1], starts)
    return replace(op, rewriter, new.result)


def _is_splat_pad(v: ir.Value):
    """``(low, high, interior, shape, inside, outside)`` of a pad of a splat by
    a constant, else None: how two masks built apart are recognised as one."""
    o = producer(v, "pad")
    if o is None:
        return None
    inside, outside = splat_value(o.operands[0]), splat_value(o.operands[1])
    if inside is None or outside is None:
        return None
    return (attr(o, "low"), attr(o, "high"), attr(o, "interior"), type_of(o.operands[0]).shape, inside, outside)


def same_predicate(p: ir.Value, q: ir.Value) -> bool:
    if p == q:
        return True
    a = _is_splat_pad(p)
    return a is not None and a == _is_splat_pad(q)


@pattern("select")
def select_of_select(op, rewriter):
    """select(p, a, select(p, b, c)) -> select(p, a, c) and
    select(p, select(p, a, b), c) -> select(p, a, c)

    (also when the two predicates are equal pads of constants, as the masks
    of successive whole-array updates are)."""
    p, a, c = op.operands
    inner_false, inner_true = producer(c, "select"), producer(a, "select")
    if inner_false is not None and same_predicate(p, inner_false.operands[0]):
        c = inner_false.operands[2]
    elif inner_true is not None and same_predicate(p, inner_true.operands[0]):
        a = inner_true.operands[1]
    else:
        return True
    with rewriter.ip, op.location:
        return replace(op, rewriter, create("select", p, a, c).result)


# --- whole-array select for large self-reading updates -------------------------------


def reads(value: ir.Value, target: ir.Value, limit: int = SEARCH_LIMIT) -> bool:
    """Is ``target`` among the values ``value`` is computed from (within ``limit`` ops)?"""
    if value == target:
        return True
    seen: set = set()
    stack = [value]
    while stack:
        v = stack.pop()
        owner = v.owner
        if not isinstance(owner, (ir.OpView, ir.Operation)):
            continue  # a block argument other than target
        operation = owner.operation
        if operation in seen:
            continue
        seen.add(operation)
        if len(seen) > limit:
            return False
        for o in operation.operands:
            if o == target:
                return True
            stack.append(o)
    return False


def as_select(op) -> ir.Value | None:
    """``select(inside, pad(update), x)`` for a large self-reading update with
    static starts (built at the current insertion point), else None."""
    x, update = op.operands[0], op.operands[1]
    xt, ut = type_of(x), type_of(update)
    starts = static_starts(op)
    if starts is None or ut.size < SELECT_MIN_FRACTION * xt.size or xt.size == 0:
        return None
    if not reads(update, x):
        return None
    low = starts
    high = tuple(n - s - u for n, s, u in zip(xt.shape, starts, ut.shape))
    interior = (0,) * xt.rank
    zero = splat_constant(0, TensorType((), xt.dtype))
    padded = create("pad", update, zero, low=low, high=high, interior=interior).result
    inside = create("pad", splat_constant(True, TensorType(ut.shape, "i1")),
                    splat_constant(False, TensorType((), "i1")), low=low, high=high, interior=interior).result
    return create("select", inside, padded, x).result


def _update_to_select(op, rewriter):
    with rewriter.ip, op.location:
        new = as_select(op)
    if new is None:
        return True
    return replace(op, rewriter, new)


def run(module_op: ir.Operation) -> None:
    patterns = rewrite.RewritePatternSet()
    patterns.add("lazy.dynamic_update_slice", _update_to_select)
    patterns.add("lazy.select", select_of_select)  # successive updates: each select reads the last one
    rewrite.apply_patterns_and_fold_greedily(module_op, patterns.freeze())


@register_pass(
    "lazy-update-to-select",
    "Large in-place updates that read the array they write become a whole-array select",
)
def _factory():
    return run
