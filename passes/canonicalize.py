"""``lazy-canonicalize``: algebraic simplification of ``lazy`` ops.

IRDL-defined ops have no C++ folders, so all folding is rewrite patterns.
Each pattern is a function ``(op, rewriter) -> bool`` that returns False when
it rewrote the op (MLIR's Python pattern convention) and states its algebra
in its docstring. ``PATTERNS`` lists (root op, pattern); the pass applies them
with MLIR's greedy driver, so they compose to a fixpoint.
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import create
from lazycore.dialect.build import attr_from_mlir, from_mlir_type
from lazycore.mlir import ir, rewrite

from .pipeline import register_pass

PATTERNS: list[tuple[str, callable]] = []


def pattern(*roots: str):
    def wrap(fn):
        for r in roots:
            PATTERNS.append((f"lazy.{r}", fn))
        return fn

    return wrap


# --- helpers -------------------------------------------------------------------


def defining_op(v: ir.Value):
    """The op producing ``v``, or None for a block argument."""
    owner = v.owner
    return owner if isinstance(owner, ir.OpView) or isinstance(owner, ir.Operation) else None


def splat_value(v: ir.Value):
    """The scalar of a splat ``lazy.constant``, or None."""
    o = defining_op(v)
    if o is None or o.name != "lazy.constant":
        return None
    attr = ir.DenseElementsAttr(o.attributes["value"])
    if not attr.is_splat:
        return None
    value = attr_from_mlir("dense", attr)
    if not isinstance(value, np.ndarray):
        return None
    return value.reshape(-1)[0] if value.size else None


def is_splat_of(v: ir.Value, scalar) -> bool:
    s = splat_value(v)
    return s is not None and s == scalar


# --- patterns --------------------------------------------------------------------


@pattern("mul")
def mul_by_one(op, rewriter):
    """x * 1 -> x, 1 * x -> x"""
    lhs, rhs = op.operands
    for keep, one in ((lhs, rhs), (rhs, lhs)):
        if is_splat_of(one, 1):
            rewriter.replace_op(op, [keep])
            return False
    return True


@pattern("add")
def add_zero(op, rewriter):
    """x + 0 -> x, 0 + x -> x"""
    lhs, rhs = op.operands
    for keep, zero in ((lhs, rhs), (rhs, lhs)):
        if is_splat_of(zero, 0) and from_mlir_type(zero.type).dtype != "i1":
            rewriter.replace_op(op, [keep])
            return False
    return True


def run(module_op: ir.Operation) -> None:
    patterns = rewrite.RewritePatternSet()
    for root, fn in PATTERNS:
        patterns.add(root, fn)
    rewrite.apply_patterns_and_fold_greedily(module_op, patterns.freeze())


@register_pass("lazy-canonicalize", "Algebraic simplifications and small constant folding on lazy ops")
def _factory():
    return run


__all__ = ["PATTERNS", "pattern", "run", "create"]
