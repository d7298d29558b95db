"""Lowerings of the elementwise family (see lazycore.dialect.elementwise)."""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from lazycore.dialect import attr
from lazycore.dialect import exp_f32, exp_f64, log_f32
from lazycore.dialect.folds import SLEEF_EXPF_LN2, SLEEF_EXPF_LOG2E, SLEEF_EXPF_POLY, SLEEF_EXPF_RANGE
from lazycore.dialect.mlir import ir, stablehlo
from lazycore.dialect import TensorType
from lazycore.dialect.types import complex_dtype, is_complex, is_float, is_float8, is_int, is_unsigned, real_dtype, to_numpy_dtype

from . import hlo
from .registry import lowering

# lazy op -> StableHLO op with the same operands, attributes-free, same semantics.
ONE_TO_ONE = {
    "neg": "negate",
    "exp": "exponential",
    "log": "log",
    "log1p": "log_plus_one",
    "expm1": "exponential_minus_one",
    "tanh": "tanh",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "floor": "floor",
    "ceil": "ceil",
    "round": "round_nearest_even",
    "sin": "sine",
    "cos": "cosine",
    "not": "not",
    "is_finite": "is_finite",
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "maximum": "maximum",
    "minimum": "minimum",
    "atan2": "atan2",
    "and": "and",
    "or": "or",
    "xor": "xor",
    "shift_left": "shift_left",
    "select": "select",
    "bitcast_convert": "bitcast_convert",
    "real": "real",
    "imag": "imag",
    "complex": "complex",
}


def _same_operands(hlo_name, op, rewriter):
    return hlo.value(hlo_name, list(op.operands), op.results[0].type)


# exp, log, sqrt and tanh of complex numbers at infinities and NaN: XLA's
# formulas give NaN + NaN j where C99's Annex G (NumPy's and torch's answers,
# and the Array API's special cases) gives a number, an infinity or a signed
# zero in one part. Each entry: (which lanes, their real part, their imaginary
# part), from the operand's parts; a later entry wins.
_INF, _NAN = float("inf"), float("nan")


def _infinite(v):
    return hlo.compare(hlo.unary("abs", v), hlo.splat_like(_INF, v), "EQ")


def _nan(v):
    return hlo.compare(v, v, "NE")


def _either(a, b):
    return hlo.binary("or", a, b)


def _both(a, b):
    return hlo.binary("and", a, b)


def _equals(v, number):
    return hlo.compare(v, hlo.splat_like(number, v), "EQ")


def _real_axis(y, x):
    """Lanes on the real axis (y is a zero; x anything, NaN included)."""
    return _equals(y, 0.0)


COMPLEX_SPECIAL = {
    "exp": lambda x, y: [
        (_real_axis(y, x), "f x", "y"),  # exp(x) +- 0j, the zero's sign kept
        (_both(_equals(x, -_INF), _either(_infinite(y), _nan(y))), 0.0, "zero as y"),
        (_both(_equals(x, _INF), _either(_infinite(y), _nan(y))), _INF, _NAN),
    ],
    "log": lambda x, y: [
        (_either(_both(_infinite(x), _nan(y)), _both(_nan(x), _infinite(y))), _INF, _NAN),
    ],
    "sqrt": lambda x, y: [
        (_both(_equals(x, -_INF), _nan(y)), _NAN, _INF),
        (_both(_equals(x, _INF), _nan(y)), _INF, _NAN),
        (_infinite(y), _INF, "y"),  # whatever x is, NaN included
    ],
    "tanh": lambda x, y: [
        (_real_axis(y, x), "f x", "y"),
        (_both(_equals(x, 0.0), _either(_infinite(y), _nan(y))), "x", _NAN),  # the zero keeps its sign
        # at an infinite x, +-1 and a zero signed as sin(2y) (as y's when it is infinite, + for NaN)
        (_infinite(x), "sign x", "zero of sin 2y"),
    ],
}
"""Per op, ``(lanes, real part, imaginary part)`` of its special values: a
number, ``"x"`` / ``"y"`` for the operand's own real or imaginary part,
``"f x"`` for the op of the real part (on the real axis), ``"zero as y"``
for a zero with y's sign (+ for NaN), ``"sign x"``, ``"zero of sin 2y"``."""


def _sign_bit(v):
    """Whether each float's sign bit is set (-0.0 included)."""
    width = {"f16": "i16", "bf16": "i16", "f32": "i32", "f64": "i64"}[hlo.type_of(v).dtype]
    bits = hlo.value("bitcast_convert", [v], TensorType(hlo.type_of(v).shape, width))
    return hlo.compare(bits, hlo.splat_like(0, bits), "LT")


def _with_complex_special_values(name, op, rewriter):
    z = op.operands[0]
    out = hlo.value(ONE_TO_ONE[name], [z], op.results[0].type)
    t = hlo.type_of(z)
    if not is_complex(t.dtype):
        return out
    part = TensorType(t.shape, real_dtype(t.dtype))
    x, y = hlo.value("real", [z], part), hlo.value("imag", [z], part)
    if name == "sqrt":
        # the root of a conjugate is the conjugate of the root: the imaginary
        # part takes y's sign, -0.0 included (sqrt(-4 - 0j) is -2j); XLA's drops it
        re, im = hlo.value("real", [out], part), hlo.value("imag", [out], part)
        size = hlo.unary("abs", im)
        signed = hlo.select(_sign_bit(y), hlo.unary("negate", size), size)
        out = hlo.value("complex", [re, hlo.select(_nan(y), im, signed)], op.results[0].type)
    own = {"x": x, "y": y}
    if name in ("exp", "tanh"):
        own["f x"] = hlo.unary(ONE_TO_ONE[name], x)
        zero = hlo.splat_like(0.0, y)  # signed as y, + for NaN
        own["zero as y"] = hlo.select(_both(_sign_bit(y), hlo.unary("not", _nan(y))), hlo.unary("negate", zero), zero)
    if name == "tanh":
        finite_y = hlo.value("is_finite", [y], TensorType(hlo.type_of(y).shape, "i1"))
        sine_zero = hlo.binary("multiply", hlo.splat_like(0.0, y), hlo.unary("sine", hlo.binary("add", y, y)))
        own["sign x"] = hlo.unary("sign", x)
        own["zero of sin 2y"] = hlo.select(finite_y, sine_zero, own["zero as y"])
    for lanes, re, im in COMPLEX_SPECIAL[name](x, y):
        re, im = (own[p] if isinstance(p, str) else hlo.splat_like(p, x) for p in (re, im))
        out = hlo.select(lanes, hlo.value("complex", [re, im], op.results[0].type), out)
    return out


# Float to integer: NumPy's and eager torch's CPU casts are C casts, which x86
# compiles to cvttss2si/cvttsd2si: the truncated value when it fits the
# instruction's 32 or 64 bits, else INT_MIN (NaN included); a narrower target
# keeps the low bits of that. An unsigned 32/64-bit target takes values at or
# above 2**(n-1) through the same instruction after subtracting 2**(n-1), and
# flips the top bit back. XLA saturates instead (NaN to 0). Which instruction
# each pair goes through was measured against NumPy 2 and torch (their float64
# -> uint8 differ: torch goes through int64, which its frontend spells as two
# converts). Both compile float32/float64 -> uint32 loops to a vector body over
# groups of 4 elements (bfloat16: 8) and a scalar tail that goes through int64
# instead; the two differ only for NaN and values outside [-2**31, 2**32), and
# the lowering follows a contiguous array's loop, by flat position.


def float_to_int_cast(source: str, target: str) -> tuple[int, bool, int | None]:
    """``(bits, unsigned, lanes)`` of the C cast a float ``source`` to integer
    ``target`` goes through before keeping the target's low bits; ``lanes``:
    elements per vector step of eager's loop where its scalar tail casts
    through int64 instead (None: one cast throughout)."""
    if target in ("ui32", "ui64"):
        if target == "ui32" and source == "f16":
            return 64, False, None
        return int(target[2:]), True, _VECTOR_LANES.get(source) if target == "ui32" else None
    return (64 if target == "i64" else 32), False, None


_VECTOR_LANES = {"f32": 4, "f64": 4, "bf16": 8}
"""Elements per vector step of eager's float -> uint32 loop, by source type."""


def _c_cast(x, bits: int):
    """cvtts*2si of float ``x`` to i``bits``: INT_MIN outside the range and for NaN."""
    converted = hlo.convert(x, f"i{bits}")
    bound = 2.0 ** (bits - 1)
    in_range = hlo.binary("and", hlo.compare(x, hlo.splat_like(-bound, x), "GE"),
                          hlo.compare(x, hlo.splat_like(bound, x), "LT"))
    return hlo.select(in_range, converted, hlo.splat_like(-int(bound), converted))


def _float_to_int(x, source: str, target: str):
    if source in ("f16", "bf16") or is_float8(source):  # the bounds overflow them: compare in f32, where they are exact
        x = hlo.convert(x, "f32")
    bits, unsigned, lanes = float_to_int_cast(source, target)
    low = _c_cast(x, bits)
    if unsigned:
        top = 2.0 ** (bits - 1)
        big = hlo.compare(x, hlo.splat_like(top, x), "GE")
        high = _c_cast(hlo.binary("subtract", x, hlo.splat_like(top, x)), bits)
        high = hlo.binary("xor", high, hlo.splat_like(-(1 << (bits - 1)), high))
        low = hlo.select(big, high, low)
        if lanes is not None:
            low = _with_scalar_tail(hlo.convert(low, target), hlo.convert(_c_cast(x, 64), target), lanes)
    return hlo.convert(low, target)  # integer to integer keeps the low bits


def _with_scalar_tail(body, tail, lanes: int):
    """``body`` where eager's vector loop over the flat array reaches, ``tail`` after it."""
    shape = hlo.type_of(body).shape
    n = 1
    for d in shape:
        n *= d
    end = n - n % lanes
    if end == n:
        return body
    if end == 0:
        return tail
    flat = hlo.value("iota", [], TensorType((n,), "i64"), iota_dimension=hlo.i64(0))
    index = hlo.value("reshape", [flat], TensorType(shape, "i64"))
    return hlo.select(hlo.compare(index, hlo.splat_like(end, index), "LT"), body, tail)


@lowering("convert")
def _convert(op, rewriter):
    x = op.operands[0]
    source = hlo.type_of(x).dtype
    target = hlo.type_of(op.results[0]).dtype
    if is_complex(source) != is_complex(target):
        return _convert_complex(x, source, target)
    return _convert_value(x, source, target)


def _convert_complex(x, source: str, target: str):
    """Between complex and real types StableHLO leaves the meaning open: a
    complex number converts as its real part (NumPy's and torch's casts, which
    warn), a real number as itself plus 0i."""
    if target == "i1":  # nonzero in either part is true
        return hlo.compare(x, hlo.splat_like(0, x), "NE")
    if is_complex(source):
        re = hlo.value("real", [x], TensorType(hlo.type_of(x).shape, real_dtype(source)))
        return _convert_value(re, real_dtype(source), target)
    part = real_dtype(target)
    re = _convert_value(x, source, part)
    return hlo.value("complex", [re, hlo.splat_like(0.0, re)], TensorType(hlo.type_of(x).shape, complex_dtype(part)))


def _convert_value(x, source: str, target: str):
    if is_float(source) and is_int(target):
        return _float_to_int(x, source, target)
    if source == "f64" and target in ("f16", "bf16"):
        return hlo.convert(_rounded_to_odd_float32(x), target)
    if source == "bf16" and target in ("f32", "f64") and isinstance(x.owner, ir.OpView):
        return hlo.convert(_bfloat16_bits_as_float32(x), target)
    return hlo.convert(x, target)


# float64 -> float16/bfloat16 rounded once, as NumPy (and ml_dtypes from 0.7) convert: XLA's
# CPU backend converts directly where the CPU has float16 instructions
# (AVX512-FP16) and through float32 elsewhere, so 1 + 2^-11 + 2^-40 became
# 1.0009765625 on one machine and 1.0 (a tie after the first rounding) on
# another. Rounding to float32 "to odd" first (toward zero, then the lowest
# bit set where that was inexact) keeps what the second rounding needs: float32's
# 24 bits are more than the 11 or 8 plus two that make the double rounding exact.
# (The fold: lazycore.dialect.folds.rounded_to_odd_float32.)
def _rounded_to_odd_float32(x):
    shape = hlo.type_of(x).shape
    near = hlo.convert(x, "f32")
    back = hlo.convert(near, "f64")
    finite = hlo.value("is_finite", [near], TensorType(shape, "i1"))
    inexact = hlo.binary("and", hlo.compare(back, x, "NE"), finite)
    away = hlo.binary("and", hlo.compare(hlo.unary("abs", back), hlo.unary("abs", x), "GT"), finite)
    bits = hlo.value("bitcast_convert", [near], TensorType(shape, "ui32"))
    toward_zero = hlo.binary("subtract", bits, hlo.convert(away, "ui32"))  # one ulp less magnitude, either sign
    odd = hlo.binary("or", toward_zero, hlo.convert(inexact, "ui32"))
    return hlo.value("bitcast_convert", [odd], TensorType(shape, "f32"))


# bfloat16 -> float32 by the bits (bfloat16 is float32's high half): XLA's CPU
# backend computes a bfloat16 op in float32 and drops the convert back to
# bfloat16 when a convert to float32 follows it (its excess precision,
# --xla_allow_excess_precision), so (x + 0.3).float() came out unrounded,
# 91% of values off eager's. Shifting the bits is the same widening, which XLA
# cannot pair with the rounding before it. A function's argument has no
# rounding to lose.
def _bfloat16_bits_as_float32(x):
    shape = hlo.type_of(x).shape
    bits = hlo.convert(hlo.value("bitcast_convert", [x], TensorType(shape, "ui16")), "ui32")
    high = hlo.binary("shift_left", bits, hlo.splat_like(16, bits))
    return hlo.value("bitcast_convert", [high], TensorType(shape, "f32"))


# Integer division by zero: StableHLO leaves it to the backend, and XLA's
# constant folder kills the process (SIGFPE) when the divisor is a constant 0
# (jax.jit does the same). So no integer divide or remainder reaches XLA with a
# zero divisor: zero lanes divide by 1 and give 0, NumPy's value for //, % and
# fmod (torch raises there; its frontend checks the divisor, lazycore.dialect.checks).


def _division(hlo_name, op, rewriter):
    a, b = op.operands
    dtype = hlo.type_of(a).dtype
    if not is_int(dtype):
        if hlo_name == "divide" and _broadcast(b) and exact(op) and not _power_of_two(b, dtype):
            if dtype in _WIDENED:  # eager's half divide: in float32, rounded once more
                wide_a, wide_b = hlo.convert(a, "f32"), hlo.convert(b, "f32")
                return hlo.convert(hlo.binary("divide", wide_a, _unseen_divisor(wide_b, wide_a)), dtype)
            if dtype == "f64":
                return hlo.binary("divide", a, _unseen_divisor(b, a))
        return hlo.binary(hlo_name, a, b)
    zero = hlo.splat_like(0, b)
    by_zero = hlo.compare(b, zero, "EQ")
    quotient = hlo.binary(hlo_name, a, hlo.select(by_zero, hlo.splat_like(1, b), b))
    return hlo.select(by_zero, zero, quotient)


# --- eager CPU's rounding (lazy-to-stablehlo{division=exact}) ------------------------
# What the compile path asks for on CPU, where eager torch and NumPy round as
# below and XLA does not; one switch for all of it (the option keeps the name
# it was given for its first case, a divide by a broadcast).
#
# A float divide by a broadcast (a number, a 0-d tensor, a keepdim row sum, a
# mean's count) XLA's algebraic simplifier turns into a multiply by the
# divisor's reciprocal, whatever its flags: up to an ulp off the correctly
# rounded quotient eager CPU torch and NumPy give (x / 0.3 in float32: a
# quarter of the elements; float64: a third). So the divisor is given in a
# form XLA cannot see is a broadcast (_unseen_divisor): XLA divides element by
# element, correctly rounded, as eager does; float16/bfloat16 in float32,
# rounded once more, as eager's kernels. (Before: float32 through float64 and
# float64 corrected by its remainder, 30 ops; the float64 ops in a float32
# loop cost benchmark 3's 4M-element program with XLA's float32 tanh 15.3 ms
# of CPU, the unseen divisor 10.6, XLA's inexact multiply 10.2; same process,
# alternated, load 18.)
#
# rsqrt: eager's CPU kernel is 1 / sqrt(x), each rounded to the type (float16
# and bfloat16 in float32, rounded once more at the end). XLA's CPU rsqrt is
# an approximation (up to 1.8 ulp off; XLA_FLAGS'
# --xla_cpu_enable_platform_dependent_math=false turns it off, for every
# program of the process), and a float32 1 / sqrt(x) it turns back into that
# rsqrt (jax.jit's too), so the quotient is taken in float64 (a quotient of
# float32 values rounds to float32 through float64 as it does directly) of
# XLA's sqrt, which is correctly rounded.
#
# tanh, expm1 and atan2: XLA's float32 forms are 4.6, 5.5 and 1.4 ulp off the
# true value, eager's (MKL's, SLEEF's) within 0.99. Their float64 forms are
# within a few float64 ulp, so computed there and rounded to float32 they are
# correctly rounded but where the true value lies within about 2**-26 ulp of a
# rounding midpoint (none of the 800k inputs per function measured,
# docs/status.md): never further from the true value than eager, and eager's
# bits wherever eager rounds correctly itself. On 1M float32 elements on two
# cores that costs tanh 0.37 -> 0.95 ms (float32 tanh has its own float64
# form now, _tanh_float32) and expm1 1.0 -> 2.2 ms, and saves
# atan2 82 -> 56 ms (XLA's float32 atan2 is the slower). log (1.14 ulp), log1p
# (2.4) and erf (5.5, the Eigen form below; every GELU runs it) stay float32:
# their float64 forms cost 4x, 10x and 45x there. exp (0.98 ulp), sin and cos
# (0.6) and pow (0.5) are left to XLA, and sqrt is correctly rounded there
# (eager's MKL sqrt is not on every CPU: 0.75 ulp on AMD EPYC).
_WIDENED = ("f16", "bf16", "f32")


def _unseen_divisor(b, a):
    """``b``, a broadcast, in a form XLA cannot tell is one: its bits xor
    whether an iota over the whole shape is NaN (never), so the divisor varies
    in every dimension as far as XLA knows and it divides as it is told (one
    correctly rounded divide per element) instead of multiplying by ``1 / b``.
    Not the dividend's NaN-ness: XLA folds that where the dividend is a
    constant (integer linspace's step, (end - start) / (n - 1): -49 / 49 came
    out -0.9999999999999999 and truncated to 0) and sinks it out of a
    broadcast dividend, and the divisor is a broadcast again. A single
    element's iota is a constant 0, so there the dividend's NaN-ness flips the
    divisor (where the quotient is NaN either way): a one-element dividend XLA
    could fold is a constant, and the divide of two constants XLA folds
    exactly."""
    t = hlo.type_of(b)
    ints = TensorType(t.shape, {"f32": "i32", "f64": "i64"}[t.dtype])
    n = math.prod(t.shape)
    if n > 1:
        index = hlo.value("iota", [], TensorType((n,), t.dtype), iota_dimension=hlo.i64(0))
        if len(t.shape) > 1:  # flat: an iota along one dimension is a broadcast along the others
            index = hlo.value("reshape", [index], TensorType(t.shape, t.dtype))
        never = hlo.compare(index, index, "NE")
    else:
        never = hlo.compare(a, a, "NE")
    bits = hlo.value("bitcast_convert", [b], ints)
    flip = hlo.value("convert", [never], ints)
    return hlo.value("bitcast_convert", [hlo.binary("xor", bits, flip)], b.type)


EXACT_ATTR = "lazy.exact"
"""A unit attribute on the module while ``lazy-to-stablehlo{division=exact}``
converts it (a lowering sees only its op; the pass removes it after)."""


def _broadcast(v) -> bool:
    owner = v.owner
    if not isinstance(owner, ir.OpView):  # a block argument
        return False
    name = owner.operation.name
    if name in ("lazy.broadcast_in_dim", "stablehlo.broadcast_in_dim"):
        return True
    if name in ("lazy.constant", "stablehlo.constant"):
        value = owner.operation.attributes["value"]
        return isinstance(value, ir.DenseElementsAttr) and value.is_splat
    return False


_RECIPROCAL_EXPONENT = {"f16": 14, "bf16": 126, "f32": 126, "f64": 1022}
"""Per float type, the largest ``k`` whose ``2**-k`` is a normal number of it."""


def _power_of_two(v, dtype: str) -> bool:
    """``v`` is a splat constant (or a broadcast of one) ``+-2**k`` whose
    reciprocal is a normal ``dtype``: XLA's ``a * (1 / v)`` is then the
    correctly rounded quotient (the product of ``a`` and an exact power of
    two, rounded once), so the divide needs no exact form (a layer norm's
    mean over 64 features: 5 float64 divides of 30 ops each in a tiny GPT-2's
    prompt program, 858 StableHLO ops in all; 479 without them)."""
    owner = v.owner
    while isinstance(owner, ir.OpView) and owner.operation.name in ("lazy.broadcast_in_dim",
                                                                     "stablehlo.broadcast_in_dim"):
        owner = owner.operation.operands[0].owner
    if not isinstance(owner, ir.OpView) or owner.operation.name not in ("lazy.constant", "stablehlo.constant"):
        return False
    value = owner.operation.attributes["value"]
    if not (isinstance(value, ir.DenseElementsAttr) and value.is_splat) or dtype not in _RECIPROCAL_EXPONENT:
        return False
    try:
        x = float(ir.FloatAttr(value.get_splat_value()).value)
    except (ValueError, TypeError):
        return False
    m, e = math.frexp(x)
    return abs(m) == 0.5 and abs(e - 1) <= _RECIPROCAL_EXPONENT[dtype]


def exact(op) -> bool:
    """Whether ``op``'s module is converted with ``division=exact``."""
    parent = op.operation
    while parent is not None and parent.name != "builtin.module":
        parent = parent.parent
        parent = None if parent is None else parent.operation
    return parent is not None and EXACT_ATTR in parent.attributes


def _in_float64(fn, *xs):
    """``fn`` of ``xs`` computed in float64, rounded to float32 and then to their
    type (eager computes a float16/bfloat16 function in float32)."""
    dtype = hlo.type_of(xs[0]).dtype
    out = hlo.convert(fn(*(hlo.convert(x, "f64") for x in xs)), "f32")
    return out if dtype == "f32" else hlo.convert(out, dtype)


def _rsqrt_as_eager(x):
    dtype = hlo.type_of(x).dtype
    root = hlo.unary("sqrt", hlo.convert(x, "f32"))
    wide = hlo.convert(root, "f64")
    out = hlo.convert(hlo.binary("divide", hlo.splat_like(1.0, wide), wide), "f32")
    return out if dtype == "f32" else hlo.convert(out, dtype)


# Float32 tanh, correctly rounded, without XLA's float64 tanh: in a fused
# loop with float32 work (benchmark 3) LLVM vectorizes that tanh (a call of
# 18 multiply-adds and a divide) over 4 lanes, and the program cost 2.2x its
# float32 form (17.4 vs 7.8 ms CPU on 4M elements, same process, alternated,
# load 12-14); this form's plain ops go over 8: 11.9 ms. Alone, 4M tanh cost
# the same as XLA's float64 form (5.8 vs 5.9 ms; XLA's float32 form 4.0).
# For |x| >= 2**-12 it is t = u / (u + 2), u = expm1(2a), a = min(|x|, 9.5),
# in float64, with u = 2**k expm1(r) + (2**k - 1), 2a = k ln2 + r, |r| <= ln2/2,
# 0 <= k <= 27. Relative errors:
# - 2a is exact; k L1 is exact (L1: ln2 with its low 20 significand bits
#   clear) and so is 2a - k L1 (Sterbenz at k >= 1; r = 2a at k = 0), so r is
#   within 2**-53 |r| + 2**-80 of 2a - k ln2: at most 1.18 * 2**-53 in u.
# - expm1(r) = r + r**2 (1/2 + r q(r)), q the degree-9 polynomial through
#   (expm1(r) - r - r**2/2) / r**3 at 10 Chebyshev nodes of 1.0001 [-ln2/2,
#   ln2/2] (mpmath, 200 bits): within 2**-58.5 of expm1; evaluated in float64
#   (contracted into multiply-adds or not), p is within 1.75 * 2**-53 of it.
# - 2**k p and 2**k - 1 are exact, their sum rounds once; |2**k p| <= 1.42 u
#   (k = 1, r = -ln2/2), so u is within (1.42 * 1.75 + 1.18 + 1) * 2**-53.
# - u / (u + 2) has condition 2 / (u + 2) <= 1 in u; with the sum's and the
#   quotient's roundings t is within 6.7 * 2**-53 = 2**-50.2 of tanh(a).
# So t rounds to float32 as tanh(x) does but where tanh(x) is within 2**-50.2
# (relative: 2**-26 ulp) of a rounding midpoint, the bound XLA's float64 tanh
# had. Checked: all of the 151M float32 in [2**-13, 9.6] round as the true
# value (mpmath where NumPy's float64 tanh is within 2**-45 of a midpoint: 100),
# as XLA's float64 tanh does; tests/test_tanh_float32_sweep.py sweeps [-10, 10].
# Below 2**-12, tanh(x) = x - x**3/3 rounds to x (x**3/3 is under half an ulp
# of x), returned as is: subnormals (which XLA's CPU loops flush to zero in
# arithmetic), -0.0 and NaN keep their bits, as eager's. Every a >= 9.0109
# rounds to 1 (1 - 2e**-2a is above 1 - 2**-25), so 9.5 stands for all of them,
# infinities too. The sign goes on after rounding (round to nearest is
# symmetric). The products are marked lazy.either: the bounds hold contracted
# or not, and lazy-keep-roundings' fences would be integer work per step.
_TANH_LN2 = (0.6931471804855391, 7.440617110012397e-11)  # L1 (low 20 bits zero), ln2 - L1
_TANH_Q = (0.16666666666666669, 0.041666666666666664, 0.008333333333330062, 0.0013888888888886552,
           0.00019841269863053618, 2.4801587317144498e-05, 2.7557268459997064e-06, 2.755728296954995e-07,
           2.510038549551032e-08, 2.0911236630261545e-09)
"""Coefficients of ``q`` (``expm1(r) = r + r**2 (1/2 + r q(r))``), lowest first."""


def _tanh_float32(x):
    size = hlo.unary("abs", x)
    a = hlo.convert(hlo.binary("minimum", size, hlo.splat_like(9.5, size)), "f64")
    y = hlo.binary("add", a, a)
    # round_nearest_even, not the 1.5 * 2**52 trick: XLA folds (y/ln2 + c) - c back to y/ln2 (r was 0)
    k = hlo.unary("round_nearest_even", hlo.binary("multiply", y, hlo.splat_like(1 / math.log(2), y)))
    l1, l2 = (hlo.splat_like(v, k) for v in _TANH_LN2)
    r = hlo.binary("subtract", hlo.binary("subtract", y, either_multiply(k, l1)), either_multiply(k, l2))
    q = hlo.splat_like(_TANH_Q[-1], r)
    for c in reversed(_TANH_Q[:-1]):
        q = _either_multiply_add(q, r, hlo.splat_like(c, r))
    half = _either_multiply_add(r, q, hlo.splat_like(0.5, r))
    p = _either_multiply_add(hlo.binary("multiply", r, r), half, r)  # expm1(r)
    # 2**k: k's bits are the low bits of 2**52 + k (exact); the shift drops 2**52's exponent
    bits = hlo.value("bitcast_convert", [hlo.binary("add", k, hlo.splat_like(2.0**52, k))], hlo.type_of(k)._replace(dtype="i64"))
    bits = hlo.binary("shift_left", hlo.binary("add", bits, hlo.splat_like(1023, bits)), hlo.splat_like(52, bits))
    scale = hlo.value("bitcast_convert", [bits], hlo.type_of(k))
    u = _either_multiply_add(scale, p, hlo.binary("subtract", scale, hlo.splat_like(1.0, scale)))
    t = hlo.convert(hlo.binary("divide", u, hlo.binary("add", u, hlo.splat_like(2.0, u))), "f32")
    signed = hlo.select(hlo.compare(x, hlo.splat_like(0.0, x), "LT"), hlo.unary("negate", t), t)
    tiny = hlo.unary("not", hlo.compare(size, hlo.splat_like(2.0**-12, size), "GE"))  # NaN too
    return hlo.select(tiny, x, signed)


def _tanh_exact(x):
    if hlo.type_of(x).dtype == "f32":
        return _tanh_float32(x)
    return _in_float64(partial(hlo.unary, "tanh"), x)


EXACT_FORMS = {
    "rsqrt": _rsqrt_as_eager,
    "tanh": _tanh_exact,
    "expm1": partial(_in_float64, partial(hlo.unary, "exponential_minus_one")),
    "atan2": partial(_in_float64, partial(hlo.binary, "atan2")),
}
"""Per op, its form under ``division=exact`` for float16/bfloat16/float32 operands."""


def _exact_or(exact_form, lower, op, rewriter):
    """``exact_form(*operands)`` of float16/bfloat16/float32 operands under
    ``division=exact``; else the op's own lowering."""
    if hlo.type_of(op.operands[0]).dtype in _WIDENED and exact(op):
        return exact_form(*op.operands)
    return lower(op, rewriter)


def _log1p_f64(x):
    """Float64 ``log1p``: on (-1, -1/4), ``log(u) - ((u - 1) - x) / u`` with ``u = 1 + x`` (the log
    of ``u`` corrected by the rounding of ``1 + x``, which ``u - 1`` gives exactly there), else
    XLA's. XLA's own is up to 128 ulps off eager's (glibc's for NumPy, SLEEF's for torch, both
    within an ulp) on (-1/2, -0.3); corrected, within 2 of eager's and of the correctly rounded
    value there (XLA's log of u: 69 of 3405 grid points 2 off the true value), and 2 on (0.3, 1)
    stay (XLA's log near 1: the corrected form is no better above 0). Every frontend's float64 log1p
    (torch.log1p, np.log1p, scipy.special's log1p-based loops) lowers here."""
    plain = hlo.unary("log_plus_one", x)
    u = hlo.binary("add", x, hlo.splat_like(1.0, x))
    rounding = hlo.binary("subtract", hlo.binary("subtract", u, hlo.splat_like(1.0, u)), x)
    corrected = hlo.binary("subtract", hlo.unary("log", u), hlo.binary("divide", rounding, u))
    near_minus_one = hlo.binary("and", hlo.compare(x, hlo.splat_like(-0.25, x), "LT"),
                                hlo.compare(x, hlo.splat_like(-1.0, x), "GT"))
    return hlo.select(near_minus_one, corrected, plain)


FLOAT64_FORMS = {"log1p": _log1p_f64}
"""Per op, its form for float64 operands (on every backend: XLA's own is further off eager's)."""


def _float64_or(float64_form, lower, op, rewriter):
    if hlo.type_of(op.operands[0]).dtype == "f64":
        return float64_form(op.operands[0])
    return lower(op, rewriter)


for _lazy, _hlo in ONE_TO_ONE.items():
    _lower = partial(_with_complex_special_values, _lazy) if _lazy in COMPLEX_SPECIAL else partial(_same_operands, _hlo)
    if _lazy in EXACT_FORMS:
        _lower = partial(_exact_or, EXACT_FORMS[_lazy], _lower)
    if _lazy in FLOAT64_FORMS:
        _lower = partial(_float64_or, FLOAT64_FORMS[_lazy], _lower)
    lowering(_lazy)(_lower)


FUSED = "lazy.fused"
"""The attribute (true) on the ``stablehlo.multiply`` of a ``lazy.fma``:
``lazy-keep-roundings`` leaves that product for the backend to fuse into its
sum, and takes the attribute off."""


def fused_multiply(a, b):
    """``a * b`` marked :data:`FUSED`: the backend contracts it into the sum
    that takes it (one rounding, eager's ``fmadd``), unfenced."""
    return hlo.op("multiply", [a, b], a.type, **{FUSED: ir.BoolAttr.get(True)}).result


def fused_multiply_add(a, b, c):
    """``a * b + c`` rounded once on the backend (:func:`fused_multiply`)."""
    return hlo.binary("add", fused_multiply(a, b), c)


EITHER = "lazy.either"
"""The attribute (true) on a ``stablehlo.multiply`` whose sum may take it
rounded or not (float32 tanh's float64 polynomial: its error bounds hold
either way): ``lazy-keep-roundings`` neither fences it (as other products)
nor ties it to its sum (as :data:`FUSED` ones), and takes the attribute off."""


def either_multiply(a, b):
    """``a * b`` marked :data:`EITHER`."""
    return hlo.op("multiply", [a, b], a.type, **{EITHER: ir.BoolAttr.get(True)}).result


def _either_multiply_add(a, b, c):
    return hlo.binary("add", either_multiply(a, b), c)


@lowering("fma")
def _fma(op, rewriter):
    # lhs * rhs + addend: XLA's CPU backend contracts the two into one fused
    # multiply-add (LLVM's AllowFPOpFusion=Fast), eager's fmadd. Narrower
    # floats in float32, rounded at the end, as eager's halves compute (their
    # products are exact there)
    dtype = hlo.type_of(op.operands[0]).dtype
    lhs, rhs, addend = (hlo.convert(v, "f32") if dtype not in ("f32", "f64") else v for v in op.operands)
    return hlo.convert(fused_multiply_add(lhs, rhs, addend), dtype)


@lowering("shift_right")
def _shift_right(op, rewriter):
    # arithmetic for a signed type, logical for an unsigned one (C's >> on the type: torch's and NumPy's)
    logical = is_unsigned(hlo.type_of(op.operands[0]).dtype)
    return hlo.binary("shift_right_logical" if logical else "shift_right_arithmetic", *op.operands)


lowering("div")(partial(_division, "divide"))
lowering("rem")(partial(_division, "remainder"))


# stablehlo.abs and stablehlo.sign take signed integers and floats only; the
# unsigned answers are NumPy's and torch's, which need no sign at all. The sign
# of a zero float is +0.0 (NumPy's and torch's); of NaN, NaN (NumPy's).


@lowering("abs")
def _abs(op, rewriter):
    x = op.operands[0]
    # of a complex x, the modulus: a float result
    return x if is_unsigned(hlo.type_of(x).dtype) else hlo.value("abs", [x], op.results[0].type)


@lowering("sign")
def _sign(op, rewriter):
    x = op.operands[0]
    dtype = hlo.type_of(x).dtype
    if is_unsigned(dtype):
        return hlo.convert(hlo.compare(x, hlo.splat_like(0, x), "NE"), dtype)
    if not is_float(dtype):
        return hlo.unary("sign", x)
    # stablehlo.sign(-0.0) is -0.0; NumPy and torch give +0.0 for either zero
    zero = hlo.splat_like(0.0, x)
    return hlo.select(hlo.compare(x, zero, "EQ"), zero, hlo.unary("sign", x))


@lowering("pow")
def _pow(op, rewriter):
    base, exponent = op.operands
    dtype = hlo.type_of(base).dtype
    return _int_pow(base, exponent, dtype) if is_int(dtype) else hlo.binary("power", base, exponent)


def _int_pow(base, exponent, dtype):
    """Square and multiply over every bit of the exponent, wrapping as NumPy and torch do.

    XLA's integer power squares six times only and takes an unsigned exponent
    from 128 on for a negative one: 0 ** 64 came out 1, (-3) ** 100 in i16
    -14639 instead of 5073, 3 ** 200 in ui8 0."""
    bits = to_numpy_dtype(dtype).itemsize * 8
    if not is_unsigned(dtype):
        bits -= 1  # a non-negative exponent has no more
    zero, one = hlo.splat_like(0, base), hlo.splat_like(1, base)

    def bit_set(i):
        return hlo.compare(hlo.binary("and", exponent, hlo.splat_like(1 << i, exponent)), zero, "NE")

    acc, square = hlo.select(bit_set(0), base, one), base  # base ** (bits 0..i of the exponent)
    for i in range(1, bits):
        square = hlo.binary("multiply", square, square)  # base ** (2 ** i)
        acc = hlo.select(bit_set(i), hlo.binary("multiply", acc, square), acc)
    if is_unsigned(dtype):
        return acc
    # x ** -n is torch's (NumPy raises): 1 for x = 1, (-1) ** n for x = -1 (which
    # the loop gave: it saw n's parity in bit 0), 0 otherwise.
    unit = hlo.binary("or", hlo.compare(base, one, "EQ"), hlo.compare(base, hlo.splat_like(-1, base), "EQ"))
    fraction = hlo.binary("and", hlo.compare(exponent, zero, "LT"), hlo.unary("not", unit))
    return hlo.select(fraction, zero, acc)


@lowering("logistic")
def _logistic(op, rewriter):
    # 1 / (1 + exp(-x)), as jax lowers it: XLA's CPU backend runs
    # stablehlo.logistic several times slower (a 10-op fusion on 4M f32 took
    # 11.4 ms with it, 6.8 ms without). exp(-x) overflowing gives the right
    # limit, 0. Half types compute in f32, as eager torch does.
    # Under division=exact (CPU) float32's exp is SLEEF's, as eager's vectorized
    # sigmoid computes ``1 / (1 + exp(-x))`` (float16/bfloat16 in float32):
    # XLA's exp left 13 of 4,096 float32 sigmoids of N(0, 36) off eager's.
    x = op.operands[0]
    dtype = hlo.type_of(x).dtype
    # (float8 too: exp(-x) overflows E4M3FN, which has no infinity, to NaN)
    wide = hlo.convert(x, "f32") if dtype in ("f16", "bf16") or is_float8(dtype) else x
    if dtype in _WIDENED and exact(op):
        e = _exp_sleef_float32(hlo.unary("negate", wide))
    else:
        e = hlo.unary("exponential", hlo.unary("negate", wide))
    one = hlo.splat_like(1.0, wide)
    out = hlo.binary("divide", one, hlo.binary("add", one, e))
    return hlo.convert(out, dtype) if wide is not x else out


def _exp_sleef_float32(d):
    """SLEEF's ``expf_u10`` steps (dialect.folds.exp_sleef, which says why),
    its multiply-adds fused as SLEEF's are (:func:`fused_multiply_add`: a
    float64 sum of the exact product, the torch frontend's form before, cost
    a 1M-element sigmoid 4.4 ms of CPU for this form's 2.6, XLA's exp 2.0)."""
    shape = hlo.type_of(d).shape

    def k(v):
        return hlo.splat_like(v, d)

    def power(m):  # 2**m for m in [-126, 127]: m + 127 in the exponent field
        bits = hlo.binary("add", hlo.convert(m, "i32"), hlo.constant(127, TensorType(shape, "i32")))
        bits = hlo.binary("multiply", bits, hlo.constant(1 << 23, TensorType(shape, "i32")))
        return hlo.value("bitcast_convert", [bits], TensorType(shape, "f32"))

    q = hlo.unary("round_nearest_even", hlo.binary("multiply", d, k(SLEEF_EXPF_LOG2E)))
    s = fused_multiply_add(q, k(SLEEF_EXPF_LN2[0]), d)
    s = fused_multiply_add(q, k(SLEEF_EXPF_LN2[1]), s)
    u = k(SLEEF_EXPF_POLY[0])
    for c in SLEEF_EXPF_POLY[1:]:
        u = fused_multiply_add(u, s, k(c))
    u = hlo.binary("add", k(1.0), fused_multiply_add(hlo.binary("multiply", s, s), u, s))
    # 2**q as two normal powers of two, 2**(q // 2) * 2**(q - q // 2) (q is within [-151, 128] where kept)
    q = hlo.binary("minimum", hlo.binary("maximum", q, k(-151.0)), k(128.0))
    half = hlo.unary("floor", hlo.binary("multiply", q, k(0.5)))
    u = hlo.binary("multiply", hlo.binary("multiply", u, power(half)), power(hlo.binary("subtract", q, half)))
    low, high = SLEEF_EXPF_RANGE
    u = hlo.select(hlo.compare(d, k(low), "LT"), k(0.0), u)
    return hlo.select(hlo.compare(d, k(high), "GT"), k(math.inf), u)


def _exp_table(starts, half: int):
    """``exp_f64.TABLE``'s ``2**(j/64)`` (``half`` 1: its relative low part) at
    each of ``starts`` (i64 j in 0..63, a trailing dim of 1): one gather."""
    shape = hlo.type_of(starts).shape[:-1]
    table = hlo.constant(np.array(exp_f64.TABLE[half::2], np.float64))
    dims = stablehlo.GatherDimensionNumbers.get([], [0], [], [], [0], len(shape))
    return hlo.value("gather", [table, starts], TensorType(shape, "f64"), dimension_numbers=dims,
                     slice_sizes=hlo.i64s([1]), indices_are_sorted=hlo.boolean(False))


def _exp_float64(x):
    """Eager's float64 exp, MKL VML's steps (dialect.exp_f64, which says why):
    the vector path where ``|x| <`` RARE, the scalar routine beyond; both take
    their ``2**(j/64)`` from the same two gathers (each index where its path is kept)."""
    shape = hlo.type_of(x).shape

    def k(v):
        return hlo.splat_like(v, x)

    def ints(v):
        return hlo.constant(v, TensorType(shape, "i64"))

    def integer(v):  # (a float holding an integer; 0 for NaN and the far values no path keeps)
        return hlo.convert(hlo.select(hlo.compare(hlo.unary("abs", v), k(2.0**40), "LT"), v, k(0.0)), "i64")

    def power(e):  # the double with exponent field e (i64 in 0..2047)
        bits = hlo.binary("shift_left", e, ints(52))
        return hlo.value("bitcast_convert", [bits], TensorType(shape, "f64"))

    mul, add, sub = (partial(hlo.binary, n) for n in ("multiply", "add", "subtract"))
    bit_and = partial(hlo.binary, "and")
    far = hlo.compare(hlo.unary("abs", x), k(exp_f64.RARE), "GE")  # (false for NaN: the vector path's NaN)

    # the vector path's n16 = floor(16 x log2(e)) of the exact product: the rounded
    # product's floor, one less where the product rounded up onto a sixteenth
    prod = mul(x, k(exp_f64.LOG2E))
    err = fused_multiply_add(x, k(exp_f64.LOG2E), hlo.unary("negate", prod))
    p16 = mul(prod, k(16.0))
    n16 = hlo.unary("floor", p16)
    onto = hlo.binary("and", hlo.compare(p16, n16, "EQ"), hlo.compare(err, k(0.0), "LT"))
    n16 = hlo.select(onto, sub(n16, k(1.0)), n16)
    vector_n = integer(n16)
    # the scalar routine's x / (ln2/64) + 1.5 * 2**52 rounds the quotient to an
    # integer whose low 32 bits it reads: the integer's own (a backend that
    # reassociates would cancel the shifter)
    rare_n = hlo.unary("round_nearest_even", mul(x, k(exp_f64.RARE_INV_LN2_64)))
    index = bit_and(integer(rare_n), ints(0xFFFFFFFF))
    j = hlo.select(far, bit_and(index, ints(63)), hlo.binary("shift_left", bit_and(vector_n, ints(15)), ints(2)))
    starts = hlo.value("reshape", [j], TensorType((*shape, 1), "i64"))
    hi, lo = (_exp_table(starts, half) for half in (0, 1))

    n = mul(n16, k(1 / 16))
    r = fused_multiply_add(hlo.unary("negate", n), k(exp_f64.LN2[0]), x)
    r = fused_multiply_add(hlo.unary("negate", n), k(exp_f64.LN2[1]), r)
    r2 = mul(r, r)
    c6, c5, c4, c3, c2, c1 = (k(c) for c in exp_f64.POLY)
    p = fused_multiply_add(fused_multiply_add(c6, r, c5), r2, fused_multiply_add(c4, r, c3))
    p = fused_multiply_add(p, r2, fused_multiply_add(c2, r, c1))
    p = fused_multiply_add(p, r, lo)
    m = hlo.binary("shift_right_arithmetic", vector_n, ints(4))  # floor(n)
    vector = mul(fused_multiply_add(hi, p, hi), power(bit_and(add(m, ints(1023)), ints(2047))))

    # the scalar routine: plain products and sums, each rounded
    m = hlo.binary("shift_right_logical", index, ints(6))
    r = sub(sub(x, mul(rare_n, k(exp_f64.RARE_LN2_64[0]))), mul(rare_n, k(exp_f64.RARE_LN2_64[1])))
    p = k(exp_f64.RARE_POLY[0])
    for c in exp_f64.RARE_POLY[1:]:
        p = add(mul(p, r), k(c))
    p = add(mul(mul(p, r), r), r)
    p = mul(add(p, lo), hi)
    # normal results: 2**m, past the top as 2**(m - 1) * 2
    e = bit_and(add(m, ints(1023)), ints(2047))
    whole = add(p, hi)
    top = hlo.compare(e, ints(2046), "GT")
    normal = mul(whole, power(hlo.select(top, bit_and(sub(e, ints(1)), ints(2047)), e)))
    normal = hlo.select(top, mul(normal, k(2.0)), normal)
    # subnormal results: scaled by 2**60, split so that the last scaling rounds once
    e = bit_and(add(m, ints(1083)), ints(2047))
    scale = power(e)
    p, top = mul(p, scale), mul(scale, hi)
    s = add(top, p)
    low = add(sub(top, s), p)
    t = mul(s, k(exp_f64.RARE_SPLIT))
    head = sub(add(s, t), t)
    tiny = k(2.0**-60)
    split = add(mul(head, tiny), mul(add(sub(s, head), low), tiny))
    small = hlo.select(hlo.compare(e, ints(50), "LE"), mul(s, tiny), split)
    rare = hlo.select(hlo.compare(x, k(exp_f64.RARE_SUBNORMAL), "LT"), small, normal)
    rare = hlo.select(hlo.compare(x, k(exp_f64.RARE_UNDERFLOW), "LT"), k(0.0), rare)
    rare = hlo.select(hlo.compare(x, k(exp_f64.RARE_OVERFLOW), "GT"), k(math.inf), rare)
    return hlo.select(far, rare, vector)


def _exp_vml_float32(x):
    """Eager's float32 exp, MKL VML's ``vsExp`` steps (dialect.exp_f32, which says
    why) where ``|x| <`` RARE. Beyond, VML's scalar routine is float64 exp's,
    rounded once to float32: from RARE to 89 (all 218,033 float32s probed) every exp
    lies over 2**-41 (relative) from a float32 midpoint, so XLA's float64 exp
    rounds the same (below -RARE results are subnormal, which XLA's CPU flushes).
    Cost: 3.1x XLA's float32 exp (1M elements); its float64 exp and the two
    gathers take about 1.2 ms each of 3.9 (one gather of both parts: 6.8)."""
    shape = hlo.type_of(x).shape

    def k(v):
        return hlo.splat_like(v, x)

    def ints(v):
        return hlo.constant(v, TensorType(shape, "i32"))

    def gather(table, starts):
        dims = stablehlo.GatherDimensionNumbers.get([], [0], [], [], [0], len(shape))
        return hlo.value("gather", [hlo.constant(table), starts], TensorType(shape, "f32"), dimension_numbers=dims,
                         slice_sizes=hlo.i64s([1]), indices_are_sorted=hlo.boolean(False))

    mul, add = (partial(hlo.binary, n) for n in ("multiply", "add"))
    far = hlo.compare(hlo.unary("abs", x), k(float(exp_f32.RARE)), "GE")  # (false for NaN: the vector path's NaN)
    wide = hlo.convert(x, "f64")
    # n = floor(32 x log2(e)) / 32 of the exact product (float32 times float32 is exact in float64)
    kept = hlo.select(far, hlo.splat_like(0.0, wide), wide)
    k32 = hlo.unary("floor", mul(mul(kept, hlo.splat_like(float(exp_f32.LOG2E), wide)), hlo.splat_like(32.0, wide)))
    whole = hlo.convert(hlo.select(hlo.compare(k32, k32, "EQ"), k32, hlo.splat_like(0.0, wide)), "i32")  # (NaN: 0)
    n = hlo.convert(mul(k32, hlo.splat_like(1 / 32, wide)), "f32")
    starts = hlo.value("reshape", [hlo.binary("and", whole, ints(31))], TensorType((*shape, 1), "i32"))
    hi, lo = gather(exp_f32.TABLE_HI, starts), gather(exp_f32.TABLE_LO, starts)
    r = fused_multiply_add(hlo.unary("negate", n), k(float(exp_f32.LN2[0])), x)
    r = fused_multiply_add(hlo.unary("negate", n), k(float(exp_f32.LN2[1])), r)
    c3, c2 = (k(float(c)) for c in exp_f32.POLY)
    lo = fused_multiply_add(fused_multiply_add(r, c3, c2), mul(r, r), add(lo, r))
    m = hlo.binary("shift_right_arithmetic", whole, ints(5))  # floor(n), within [-126, 126] where kept
    bits = hlo.binary("shift_left", add(m, ints(127)), ints(23))
    t = mul(hi, hlo.value("bitcast_convert", [bits], TensorType(shape, "f32")))
    vector = fused_multiply_add(t, lo, t)
    rare = hlo.convert(hlo.unary("exponential", wide), "f32")
    return hlo.select(far, rare, vector)


@lowering("exp_vml")
def _exp_vml(op, rewriter):
    x = op.operands[0]
    dtype = hlo.type_of(x).dtype
    if dtype == "f64":
        return _exp_float64(x)
    return hlo.convert(_exp_vml_float32(hlo.convert(x, "f32")), dtype)


@lowering("exp_sleef")
def _exp_sleef(op, rewriter):
    x = op.operands[0]
    dtype = hlo.type_of(x).dtype
    if dtype == "f64":
        return _exp_float64(x)
    out = _exp_sleef_float32(hlo.convert(x, "f32"))
    return hlo.convert(out, dtype)


def _log_sleef_float32(d):
    """SLEEF's ``logf_u10`` steps (dialect/log_f32.py, which says why), its
    multiply-adds fused as SLEEF's are (:func:`fused_multiply_add`), its plain
    products and sums rounded apart (``lazy-keep-roundings`` fences them).
    The exponent, the mantissa and the fixups are read from the bits: XLA's
    CPU loops treat a subnormal operand as zero, so a positive subnormal ``d``
    takes the steps on ``d * 2**149`` (its mantissa field as an integer)."""
    shape = hlo.type_of(d).shape

    def k(v):
        return hlo.splat_like(v, d)

    def ints(v):
        return hlo.constant(v, TensorType(shape, "i32"))

    def i32(v):
        return hlo.value("bitcast_convert", [v], TensorType(shape, "i32"))

    def f32(v):
        return hlo.value("bitcast_convert", [v], TensorType(shape, "f32"))

    def add(a, b):
        return hlo.binary("add", a, b)

    def sub(a, b):
        return hlo.binary("subtract", a, b)

    def mul(a, b):
        return hlo.binary("multiply", a, b)

    def neg(a):
        return hlo.unary("negate", a)

    def exponent_field(bits):
        return hlo.binary("and", hlo.binary("shift_right_logical", bits, ints(23)), ints(0xFF))

    def two_sum(a, b):  # dfadd2_vf2_vf_vf: a + b rounded and its exact error, the error in float64
        # (XLA reassociates float32 TwoSum's steps with a constant: m - ((1 + m) - 1) gave 0)
        s = add(a, b)
        wide = sub(add(hlo.convert(a, "f64"), hlo.convert(b, "f64")), hlo.convert(s, "f64"))
        return s, hlo.convert(wide, "f32")

    bits = i32(d)
    magnitude = hlo.binary("and", bits, ints(0x7FFFFFFF))
    tiny = hlo.binary("and", hlo.compare(bits, ints(0), "GT"), hlo.compare(bits, ints(1 << 23), "LT"))
    ds = hlo.select(tiny, hlo.convert(bits, "f32"), d)  # a subnormal's mantissa field: d * 2**149 exactly
    ds_bits = i32(ds)
    # e = getexp(ds * (1/0.75)) (the rounded product), m = ds * 2**-e exactly, in [0.75, 1.5)
    e_field = exponent_field(i32(mul(ds, k(log_f32.INV_075))))
    m_field = add(sub(exponent_field(ds_bits), e_field), ints(127))
    m = f32(hlo.binary("or", hlo.binary("and", ds_bits, ints(0x7FFFFF)),
                       hlo.binary("shift_left", m_field, ints(23))))
    e = hlo.convert(sub(sub(e_field, ints(127)), hlo.select(tiny, ints(149), ints(0))), "f32")
    num, den = two_sum(k(-1.0), m), two_sum(k(1.0), m)
    # x = num / den (dfdiv_vf2_vf2_vf2)
    t = hlo.binary("divide", k(1.0), den[0])
    xh = mul(num[0], t)
    u = fused_multiply_add(t, num[0], neg(xh))
    v = fused_multiply_add(neg(den[1]), t, fused_multiply_add(neg(den[0]), t, k(1.0)))
    xl = fused_multiply_add(xh, v, fused_multiply_add(num[1], t, u))
    x2 = mul(xh, xh)
    c0, c1, c2 = (k(c) for c in log_f32.POLY)
    poly = fused_multiply_add(fused_multiply_add(c0, x2, c1), x2, c2)
    # s = ln2 * e (dfmul_vf2_vf2_vf), then + 2x (dfadd_vf2_vf2_vf2), then + x**3 t (dfadd_vf2_vf2_vf)
    ln2_hi, ln2_lo = (k(c) for c in log_f32.LN2)
    sh = mul(ln2_hi, e)
    sl = fused_multiply_add(ln2_lo, e, fused_multiply_add(ln2_hi, e, neg(sh)))
    yh, yl = mul(xh, k(2.0)), mul(xl, k(2.0))
    s2 = add(sh, yh)
    s2l = add(add(add(sub(sh, s2), yh), sl), yl)
    w = mul(mul(x2, xh), poly)
    s3 = add(s2, w)
    r = add(s3, add(add(sub(s2, s3), w), s2l))
    # SLEEF's fixups, from the bits: +inf -> inf, +-0 -> -inf, negative or NaN -> NaN
    r = hlo.select(hlo.compare(bits, ints(0x7F800000), "EQ"), k(math.inf), r)
    r = hlo.select(hlo.compare(magnitude, ints(0), "EQ"), k(-math.inf), r)
    negative = hlo.binary("and", hlo.compare(bits, ints(0), "LT"), hlo.compare(magnitude, ints(0), "NE"))
    bad = hlo.binary("or", negative, hlo.compare(magnitude, ints(0x7F800000), "GT"))
    return hlo.select(bad, k(math.nan), r)


@lowering("log_sleef")
def _log_sleef(op, rewriter):
    # float32 (narrower floats in float32, rounded once more) as SLEEF's logf_u10;
    # float64 as XLA's log (the fold: NumPy's; no kernel of eager's is modelled for it)
    x = op.operands[0]
    dtype = hlo.type_of(x).dtype
    if dtype == "f64":
        return hlo.unary("log", x)
    return hlo.convert(_log_sleef_float32(hlo.convert(x, "f32")), dtype)


@lowering("constant")
def _constant(op, rewriter):
    return hlo.value("constant", [], op.results[0].type, value=op.attributes["value"])


@lowering("compare")
def _compare(op, rewriter):
    return hlo.compare(op.operands[0], op.operands[1], attr(op, "direction"))


@lowering("iota")
def _iota(op, rewriter):
    return hlo.value("iota", [], op.results[0].type, iota_dimension=hlo.i64(attr(op, "dim")))


# --- erf -----------------------------------------------------------------------
# StableHLO has no erf (that lives in chlo, which we do not have), so erf is
# built from arithmetic. Polynomials are evaluated with Horner's rule.

# Eigen's / XLA's f32 approximation: erf(x) = x * A(x^2) / B(x^2) on [-4, 4]
# (erf(4) rounds to 1 in f32), accurate to a few ulp.
_ERF_F32_A = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
              -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
              -1.60960333262415e-02)
_ERF_F32_B = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
              -7.37332916720468e-03, -1.42647390514189e-02)

# Cephes (ndtr.c) f64: erf(x) = x T(x^2) / U(x^2) for |x| < 1, and
# erfc(x) = exp(-x^2) P(x) / Q(x) for 1 <= x < 8. T/U and P/Q have an implied
# leading coefficient 1 in the denominators (Cephes' p1evl), written out here.
_ERF_F64_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
              7.00332514112805075473e3, 5.55923013010394962768e4)
_ERF_F64_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
              2.26290000613890934246e4, 4.92673942608635921086e4)
_ERFC_F64_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
               4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
               9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_ERFC_F64_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
               9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
               1.65666309194161350182e3, 5.57535340817727675546e2)
# erfc(6) ~ 2e-17 is below half an f64 ulp of 1, so |x| >= 6 gives exactly +-1.
_ERF_F64_SATURATE = 6.0


def _horner(x, coefficients):
    """c[0] x^n + c[1] x^(n-1) + ... + c[n], highest power first."""
    acc = hlo.splat_like(coefficients[0], x)
    for c in coefficients[1:]:
        acc = hlo.binary("add", hlo.binary("multiply", acc, x), hlo.splat_like(c, x))
    return acc


def _clamp(lo, x, hi):
    return hlo.value("clamp", [hlo.splat_like(lo, x), x, hlo.splat_like(hi, x)], x.type)


def _erf_f32(x):
    x = _clamp(-4.0, x, 4.0)
    x2 = hlo.binary("multiply", x, x)
    ratio = hlo.binary("divide", hlo.binary("multiply", x, _horner(x2, _ERF_F32_A)), _horner(x2, _ERF_F32_B))
    return _clamp(-1.0, ratio, 1.0)


def _erf_f64(x):
    # |x| < 1: the odd rational form, on x clamped so the unused lanes stay finite.
    xs = _clamp(-1.0, x, 1.0)
    xs2 = hlo.binary("multiply", xs, xs)
    small = hlo.binary("divide", hlo.binary("multiply", xs, _horner(xs2, _ERF_F64_T)), _horner(xs2, _ERF_F64_U))
    # |x| >= 1: 1 - erfc(|x|), with the sign of x put back.
    a = _clamp(1.0, hlo.unary("abs", x), _ERF_F64_SATURATE)
    gauss = hlo.unary("exponential", hlo.unary("negate", hlo.binary("multiply", a, a)))
    erfc = hlo.binary("divide", hlo.binary("multiply", gauss, _horner(a, _ERFC_F64_P)), _horner(a, _ERFC_F64_Q))
    big = hlo.binary("subtract", hlo.splat_like(1.0, x), erfc)
    signed = hlo.select(hlo.compare(x, hlo.splat_like(0.0, x), "LT"), hlo.unary("negate", big), big)
    out = hlo.select(hlo.compare(hlo.unary("abs", x), hlo.splat_like(1.0, x), "LT"), small, signed)
    # Both branches clamp, which would turn NaN into a number: keep NaN.
    return hlo.select(hlo.compare(x, x, "NE"), x, out)


@lowering("erf")
def _erf(op, rewriter):
    x = op.operands[0]
    dtype = hlo.type_of(x).dtype
    if dtype == "f64":
        return _erf_f64(x)
    # f16/bf16 have too few bits for the f32 polynomial's constants: widen.
    return hlo.convert(_erf_f32(hlo.convert(x, "f32")), dtype)
