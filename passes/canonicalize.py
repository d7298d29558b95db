"""``lazy-canonicalize``: algebraic simplification of ``lazy`` ops.

IRDL-defined ops have no C++ folders, so all folding is rewrite patterns.
Each pattern is a function ``(op, rewriter) -> bool`` that returns False when
it rewrote the op (MLIR's Python pattern convention) and states its algebra
in its docstring. ``PATTERNS`` lists (root op, pattern); the pass applies them
with MLIR's greedy driver, so they compose to a fixpoint.

Rewrites keep the program's values bit for bit, NaN, infinities and the sign
of zero included, as eager torch and NumPy compute them: ``x + 0.0`` is
``+0.0`` for ``x = -0.0``, so a float ``x + (+0.0)`` is not ``x`` (only
``x + (-0.0)`` and ``x - (+0.0)`` are). XLA's algebraic simplifier drops an
add of any zero constant (``A + 0 => A``) and a subtract of one (``A - 0 =>
A``), so ``x + (+0.0)`` and ``x - (-0.0)`` are rewritten to what they compute,
``select(x == 0, +0.0, x)``, which XLA keeps. The one exception: folded
transcendentals (exp, tanh, erf...) are evaluated in f64 and rounded once,
which may differ from the backend's approximation in the last place (never in
which values are NaN, infinite or zero).
"""

from __future__ import annotations

import numpy as np

from lazycore.dialect import attr, create
from lazycore.dialect.types import is_complex, is_float, is_unsigned, real_dtype
from lazycore.dialect.mlir import ir, rewrite

from . import folding, updates
from .catalog import register_pass
from .folding import FOLD_LIMIT, FOLDABLE
from .lowering.elementwise import float_to_int_cast
from .patterns import is_splat_of, pattern, producer, replace, splat_constant, splat_value, type_of, written_in


# --- identities ------------------------------------------------------------------


@pattern("mul")
def mul_by_one(op, rewriter):
    """x * 1 -> x, 1 * x -> x"""
    lhs, rhs = op.operands
    for keep, one in ((lhs, rhs), (rhs, lhs)):
        if is_splat_of(one, 1):
            return replace(op, rewriter, keep)
    return True


def _zero_sign(v: ir.Value):
    """For a splat zero ``v``: True for a float -0.0, False for +0.0 or an
    integer 0; None when ``v`` is no splat zero."""
    zero = splat_value(v)
    if zero is None or zero != 0:
        return None
    return bool(is_float(type_of(v).dtype) and np.signbit(zero))


def _plus_zero(x: ir.Value) -> ir.Value:
    """``x + (+0.0)`` for a float ``x``: ``x``, except that -0.0 becomes +0.0
    (round to nearest); NaN and the infinities stay. As ``select(x == 0,
    +0.0, x)``, because XLA would turn the add itself into ``x``."""
    t = type_of(x)
    positive = splat_constant(0, t)  # +0.0
    is_zero = create("compare", x, positive, direction="EQ").result
    return create("select", is_zero, positive, x).result


@pattern("add")
def add_zero(op, rewriter):
    """x + 0 -> x, 0 + x -> x for integers; for floats x + (-0.0) -> x, and
    x + (+0.0) -> select(x == 0, +0.0, x)  (-0.0 + 0.0 is +0.0, and XLA's
    simplifier would drop the add)"""
    lhs, rhs = op.operands
    if type_of(op.results[0]).dtype == "i1":
        return True
    for keep, zero in ((lhs, rhs), (rhs, lhs)):
        negative = _zero_sign(zero)
        if negative is None:
            continue
        if negative or not is_float(type_of(zero).dtype):
            return replace(op, rewriter, keep)
        if producer(keep, "constant") is not None:
            return True  # constant + 0.0: folding gives the exact constant
        with rewriter.ip, op.location:
            return replace(op, rewriter, _plus_zero(keep))
    return True


@pattern("sub")
def sub_zero(op, rewriter):
    """x - 0 -> x; for floats x - (+0.0) -> x, and x - (-0.0) ->
    select(x == 0, +0.0, x)  (it is x + 0.0: -0.0 becomes +0.0, and XLA's
    simplifier would drop the subtract)"""
    lhs, rhs = op.operands
    negative = _zero_sign(rhs)
    if negative is None:
        return True
    if not negative:
        return replace(op, rewriter, lhs)
    if producer(lhs, "constant") is not None:
        return True  # constant - (-0.0): folding gives the exact constant
    with rewriter.ip, op.location:
        return replace(op, rewriter, _plus_zero(lhs))


@pattern("convert", "reshape")
def same_type_noop(op, rewriter):
    """convert(x: T) -> T  =>  x;  reshape(x: S) -> S  =>  x"""
    (x,) = op.operands
    if x.type != op.results[0].type:
        return True
    return replace(op, rewriter, x)


@pattern("permute")
def permute_identity(op, rewriter):
    """permute(x, [0, 1, ..., n-1]) -> x"""
    if attr(op, "dims") != tuple(range(type_of(op.operands[0]).rank)):
        return True
    return replace(op, rewriter, op.operands[0])


@pattern("broadcast_in_dim")
def broadcast_noop(op, rewriter):
    """broadcast_in_dim(x: S, dims=[0, ..., n-1]) -> S  =>  x

    Same shape with other dims would be a transpose, which is not a no-op."""
    (x,) = op.operands
    if x.type != op.results[0].type or attr(op, "dims") != tuple(range(type_of(x).rank)):
        return True
    return replace(op, rewriter, x)


# --- chains of shape ops -----------------------------------------------------------


@pattern("permute")
def permute_of_permute(op, rewriter):
    """permute(permute(x, p1), p2) -> permute(x, q) with q[i] = p1[p2[i]]

    (result dim i is inner dim p2[i], which is x's dim p1[p2[i]]); the identity
    q gives x itself."""
    inner = producer(op.operands[0], "permute")
    if inner is None:
        return True
    p1, p2 = attr(inner, "dims"), attr(op, "dims")
    composed = tuple(p1[d] for d in p2)
    x = inner.operands[0]
    if composed == tuple(range(len(composed))):
        return replace(op, rewriter, x)
    with rewriter.ip, op.location:
        return replace(op, rewriter, create("permute", x, dims=composed).result)


@pattern("reshape")
def reshape_of_reshape(op, rewriter):
    """reshape(reshape(x, s1), s2) -> reshape(x, s2)  (row-major order is kept by both)"""
    inner = producer(op.operands[0], "reshape")
    if inner is None:
        return True
    with rewriter.ip, op.location:
        new = create("reshape", inner.operands[0], shape=type_of(op.results[0]).shape)
    return replace(op, rewriter, new.result)


@pattern("broadcast_in_dim")
def broadcast_of_splat(op, rewriter):
    """broadcast_in_dim(splat c) -> splat c of the result shape"""
    scalar = splat_value(op.operands[0])
    if scalar is None:
        return True
    with rewriter.ip, op.location:
        return replace(op, rewriter, splat_constant(scalar, type_of(op.results[0])))


# --- convert chains --------------------------------------------------------------

_FLOAT_PRECISION = {"f16": 11, "bf16": 8, "f32": 24, "f64": 53,  # significand bits
                    "f8E4M3FN": 4, "f8E5M2": 3, "f8E4M3FNUZ": 4, "f8E5M2FNUZ": 3}
# every float8 value is an f16 and a bf16 one; no float8 type holds another's
_FLOAT_RANK = {"f16": 0, "bf16": 0, "f32": 1, "f64": 2, "f8E4M3FN": -1, "f8E5M2": -1, "f8E4M3FNUZ": -1,
               "f8E5M2FNUZ": -1}


def _int_bits(dtype: str) -> tuple[int, bool]:
    """(bits of magnitude, signed) of an integer or bool element type."""
    if dtype == "i1":
        return 1, False
    width = int(dtype.lstrip("ui"))
    return (width, False) if is_unsigned(dtype) else (width - 1, True)


def exact_conversion(src: str, dst: str) -> bool:
    """Does converting src -> dst keep every value of src (NaN, inf, -0.0 included)?"""
    if src == dst:
        return True
    if is_complex(dst):  # each part converts on its own; a real source has imaginary part 0
        return exact_conversion(real_dtype(src), real_dtype(dst))
    if is_complex(src):  # to a real type the imaginary part is lost
        return False
    if is_float(src):
        # f16 and bf16 trade range for precision: neither holds the other.
        return is_float(dst) and _FLOAT_RANK[dst] > _FLOAT_RANK[src]
    bits, signed = _int_bits(src)
    if is_float(dst):
        return bits <= _FLOAT_PRECISION[dst]
    if dst == "i1":
        return False
    dst_bits, dst_signed = _int_bits(dst)
    return dst_bits >= bits and (dst_signed or not signed)


def same_conversion(a: str, b: str, c: str) -> bool:
    """Do a -> c and b -> c agree on every value a can hold (a -> b being exact)?

    Conversions to a float or to i1 depend only on the value. To a wider
    integer type they do too, but a value out of c's range wraps when it
    comes from an integer, and goes through the C cast the lowering emulates
    for its float type when it comes from a float (float16 -> uint32 is not
    float32's).
    """
    if is_complex(a) or is_complex(b) or is_complex(c):
        # an exact b -> c too: the value passes both steps whole, as it passes a -> c
        return exact_conversion(b, c)
    if is_float(c) or c == "i1":
        return True
    if is_float(a) and is_float(b):
        return float_to_int_cast(a, c) == float_to_int_cast(b, c)
    return is_float(a) == is_float(b) or exact_conversion(a, c)


@pattern("convert")
def convert_of_exact_convert(op, rewriter):
    """convert(convert(x: A -> B) -> C) -> convert(x: A -> C) when A -> B is exact

    and B -> C treats the value as A -> C would (see same_conversion).
    A == C then folds to x: a round trip through a wider type.
    """
    inner = producer(op.operands[0], "convert")
    if inner is None:
        return True
    x = inner.operands[0]
    a, b, c = type_of(x).dtype, type_of(inner.results[0]).dtype, type_of(op.results[0]).dtype
    if not (exact_conversion(a, b) and same_conversion(a, b, c)):
        return True
    with rewriter.ip, op.location:
        return replace(op, rewriter, create("convert", x, dtype=c).result)


# this module's patterns first, then constant folding's and the partial updates'
# (lazy-update-to-select's module): the order MLIR tries them in for one root
PATTERNS: list[tuple[str, callable]] = written_in(__name__) + written_in(folding.__name__) + written_in(updates.__name__)


def run(module_op: ir.Operation) -> None:
    # A frozen pattern set may not be reused, so each run builds its own.
    patterns = rewrite.RewritePatternSet()
    for root, fn in PATTERNS:
        patterns.add(root, fn)
    rewrite.apply_patterns_and_fold_greedily(module_op, patterns.freeze())


@register_pass("lazy-canonicalize", "Algebraic simplifications and small constant folding on lazy ops")
def _factory():
    return run


__all__ = ["FOLDABLE", "FOLD_LIMIT", "PATTERNS", "exact_conversion", "same_conversion", "pattern", "run", "create"]
