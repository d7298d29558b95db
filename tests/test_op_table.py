"""The op table, its rules and its lowerings agree, for every op and element type.

The parameters come from the op table itself (``lazycore.dialect.OPS``): every
op, every type parameter of it (its operand, index or result element types),
every element type in ``DTYPES``. ``SAMPLES`` says, per op, which element
types each type parameter accepts and how to make operands, attributes and the
NumPy answer for them. For an accepted type the op is built with the
dialect's builder, verified, lowered with the default pipeline (the verifier
runs after every pass, so the StableHLO is verified), compiled and run through
PJRT, and its results compared with NumPy's; for any other type the op's rule
must raise ShapeError. So the accepted types are pinned here both ways, and an
op added to the table without a sample fails :func:`test_op` until it has one.

Every combination of accepted types runs, all of one op in one module (one
XLA compile per op keeps the file fast): ``convert`` for every (source,
target) pair, ``argmax`` for every (operand, index) pair. Values reach the
edges: integers over their whole range (sums, products and powers wrap as in
NumPy), floats at NaN, infinities and signed zeros. Ops the canonicalizer
folds run a second time on constants, so the folded values are checked too.

The rows' traits are pinned here as well: every row has a lowering and a
padding decision that padding carries out, an elementwise row accepts exactly
its element-type class, and a reduction's identity changes no reduction. An
elementwise row of one element-type class with a ``fold`` needs no sample: its
fold (constant folding's NumPy evaluation) is the reference of the one
:func:`fold_sample` makes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

from functools import partial

import ml_dtypes
import numpy as np
import pytest

from lazycore.runtime import compiler, padding
from lazycore.dialect import OPS, ShapeError, TensorType, create, spec_of, tensor_type
from lazycore.dialect.examples import EXAMPLES
from lazycore.dialect.folds import identity_value
from lazycore.dialect.rules import DTYPE_CLASSES
from lazycore.dialect.spec import PADDING_KINDS
from lazycore.dialect.types import (
    COMPLEX_DTYPES,
    DTYPES,
    FLOAT8_DTYPES,
    FLOAT_DTYPES,
    INT_DTYPES,
    UNSIGNED_DTYPES,
    is_bool,
    is_complex,
    is_float,
    is_int,
    is_unsigned,
    real_dtype,
    to_numpy_dtype,
    type_of,
)
from lazycore.dialect.mlir import func, ir
from lazycore.dialect.build import new_context
import lazycore.passes.canonicalize  # noqa: F401,E402 - first: folding.py imports its helpers
from lazycore.passes.folding import FOLDABLE
from lazycore.passes.lowering import BUILTIN as BUILTIN_LOWERINGS, load_builtin_lowerings

from test_ops_elementwise import (
    FLOAT_BINARY,
    INT_BINARY,
    NUMPY_COMPARE,
    UNARY_FLOAT_CASES,
    _erf_reference,
)
from test_ops_collectives import reference as collective_reference
from test_ops_indexing import ROWS
from test_ops_linalg import CONVS, DOTS, conv_reference
from test_ops_reduction import ARG, NUMPY as NUMPY_REDUCE
from test_ops_shape import broadcast_in_dim_ref, clamped, pad_ref, random_array

ANY = DTYPES
FLOAT = FLOAT_DTYPES
INT = INT_DTYPES
NUMERIC = FLOAT_DTYPES + INT_DTYPES
INTEGRAL = INT_DTYPES + ("i1",)  # bitwise / logical ops
UNSIGNED = UNSIGNED_DTYPES
COMPLEX = COMPLEX_DTYPES
ARITH = NUMERIC + COMPLEX  # add ... pow, dot, sums: StableHLO's arithmetic takes complex
INEXACT = FLOAT + COMPLEX  # exp, log, sqrt ...
ORDERED = tuple(d for d in ANY if d not in COMPLEX)  # maximum, argmax, compare LT: no order on complex
F64 = np.float64

# How close an inexact float result must be to NumPy's f64 answer rounded to the type.
# float8: one unit in the last place (3 or 2 stored significand bits): XLA's CPU
# backend computes in a wider type and rounds, NumPy (ml_dtypes) rounds f64 once.
TOL = {"f64": 1e-12, "f32": 4e-6, "f16": 2e-3, "bf16": 1.6e-2,
       "f8E4M3FN": 0.13, "f8E4M3FNUZ": 0.13, "f8E5M2": 0.26, "f8E5M2FNUZ": 0.26}


def np_dtype(dtype: str) -> np.dtype:
    return to_numpy_dtype(dtype)


@dataclass
class Case:
    """One op application: operands (a list for a variadic group), attributes and
    result parameters as :func:`lazycore.dialect.create` takes them, the expected
    results (None where the op has no NumPy answer; ``check`` looks at them then)."""

    operands: list
    kwargs: dict = field(default_factory=dict)
    want: Callable[[], tuple] | None = None
    """Made only for cases that run: NumPy may have no answer for a refused type."""
    exact: bool = True
    check: Callable | None = None
    refused: bool = False
    """The rule must refuse this case even when every type is one the op accepts."""


@dataclass
class Sample:
    axes: dict[str, tuple[str, ...]]
    """Type parameter -> the element types the op's rule accepts for it."""
    make: Callable[..., list[Case]]
    """``make(rng, **{axis: dtype})`` -> cases; called with refused types too."""


def small(rng, shape, dtype, lo=-5, hi=5):
    """Values of any element type, small enough for every integer width."""
    if is_bool(dtype):
        return rng.random(shape) < 0.5
    if is_unsigned(dtype):
        return rng.integers(0, hi + 1, shape).astype(np_dtype(dtype))
    if is_int(dtype):
        return rng.integers(lo, hi + 1, shape).astype(np_dtype(dtype))
    if is_complex(dtype):
        parts = rng.standard_normal((2,) + tuple(shape)) * (hi - lo) / 4
        return (parts[0] + 1j * parts[1]).astype(np_dtype(dtype))
    return (rng.standard_normal(shape) * (hi - lo) / 4).astype(np_dtype(dtype))


def later(fn, *args):
    """A ``Case.want`` computed only if the case runs (NumPy may refuse the type)."""
    return lambda: (fn(*args),)


def known(*values):
    """A ``Case.want`` for results computed already (in a loop: no late binding)."""
    return lambda: values


def full_range(rng, shape, dtype, lo=None):
    """Integers from anywhere in the type's range (from ``lo`` if given), its extremes first."""
    if not is_int(dtype):
        return small(rng, shape, dtype)
    info = np.iinfo(np_dtype(dtype))
    lo = info.min if lo is None else max(lo, info.min)
    x = rng.integers(lo, info.max, shape, dtype=np_dtype(dtype), endpoint=True)
    x.reshape(-1)[:2] = [lo, info.max]
    return x


def with_extremes(x):
    """``x`` with its type's smallest and largest integer in the first two places."""
    if is_int(type_of(x).dtype):
        info = np.iinfo(x.dtype)
        x = x.copy()
        x.reshape(-1)[:2] = [info.min, info.max]
    return x


# Floats at the edges of every op's domain: NaN, infinities, signed zeros, overflow.
SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 100.0, -100.0, 1e-3])


def reference(ref, *xs, dtype=None):
    """``ref`` on ``xs``: floats in f64, rounded once to the result type."""
    with np.errstate(all="ignore"):
        if is_float(type_of(xs[0]).dtype):
            out = ref(*(x.astype(F64) for x in xs))
            return out.astype(xs[0].dtype if dtype is None else dtype)
        if is_complex(type_of(xs[0]).dtype):
            out = np.asarray(ref(*(x.astype(np.complex128) for x in xs)))
            return out.astype(xs[0].dtype if out.dtype.kind == "c" else real_dtype_of(xs[0]))
        return np.asarray(ref(*xs))


def real_dtype_of(x):
    return np_dtype(real_dtype(type_of(x).dtype))


# NumPy's complex functions, for the ops whose sample tables hold real ones.
COMPLEX_UNARY = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "log1p": np.log1p,
                 "expm1": np.expm1, "tanh": np.tanh, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
                 "sin": np.sin, "cos": np.cos}
COMPLEX_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power}


SHAPE = (3, 5)

# --- elementwise ---------------------------------------------------------------------


def unary_sample(name, klass):
    def make(rng, operand):
        if name in UNARY_FLOAT_CASES:
            maker, ref, exact = UNARY_FLOAT_CASES[name]
        else:
            maker, ref, exact = None, None, False
        if name == "erf":
            maker, ref = (lambda r: (r.standard_normal(SHAPE) * 2).astype(np.float32)), _erf_reference
        if is_complex(operand):
            x = small(rng, SHAPE, operand, -2, 2)
            x.reshape(-1)[:3] = [0, 1j, -2.5]
            if name in ("log", "rsqrt"):
                x.reshape(-1)[0] = 1  # log(0) is -inf + nan i in XLA, -inf + 0i in NumPy
            ref = COMPLEX_UNARY.get(name)  # None: a type the op refuses (the case never runs)
            return [Case([x], want=ref and later(reference, ref, x), exact=name == "neg")]
        if is_float(operand) and maker is not None:
            xs = [maker(rng).astype(np_dtype(operand)), SPECIALS.astype(np_dtype(operand))]
        else:
            xs = [with_extremes(small(rng, SHAPE, operand, hi=100 if name == "not" else 5))]
        if name == "not":
            ref = np.logical_not if is_bool(operand) else np.invert
        return [Case([x], want=ref and later(reference, ref, x), exact=exact) for x in xs]

    return Sample({"operand": klass}, make)


def _is_finite(rng, operand):
    if not is_float(operand):
        return [Case([small(rng, (6,), operand)])]
    x = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3.0]).astype(np_dtype(operand))
    return [Case([x], want=known(np.isfinite(x.astype(F64))))]


def _special_pairs(dtype):
    """Every pair of SPECIALS, as two operands."""
    a, b = np.meshgrid(SPECIALS, SPECIALS)
    return a.reshape(-1).astype(np_dtype(dtype)), b.reshape(-1).astype(np_dtype(dtype))


def _pow_operands(rng, dtype):
    if is_float(dtype):
        return [(rng.uniform(0.1, 10.0, SHAPE).astype(np_dtype(dtype)),
                 rng.uniform(-3, 3, SHAPE).astype(np_dtype(dtype)))]
    # Exponents over the type's whole range: small bases, whose powers wrap
    # late, and any base; every power wraps around as in NumPy and torch.
    exponent = full_range(rng, SHAPE, dtype, lo=0)
    exponent.reshape(-1)[:4] = [0, 1, 64, 100]
    return [(small(rng, SHAPE, dtype, -3, 3), exponent), (full_range(rng, SHAPE, dtype), exponent)]


def _int_pow_negative(rng, dtype):
    """Negative exponents: NumPy raises, torch gives 1 ** -n = 1, (-1) ** -n = +-1, else 0."""
    base = small(rng, SHAPE, dtype, -3, 3)
    exponent = full_range(rng, SHAPE, dtype)
    exponent.reshape(-1)[:6] = [-1, -2, -3, -64, -101, np.iinfo(exponent.dtype).min]
    want = np.where(base == 1, 1, np.where(base == -1, np.where(exponent % 2 == 0, 1, -1), 0)).astype(base.dtype)
    with np.errstate(all="ignore"):
        want = np.where(exponent < 0, want, np.power(base, np.maximum(exponent, 0)))
    return Case([base, exponent], want=known(want))


def _exact_trunc_div(a, b):
    """Integer division toward zero over the whole range (a - fmod(a, b) is a multiple of b)."""
    return (a - np.fmod(a, b)) // b


def _shift(ref, rng, lhs):
    """Any values shifted by counts in [-2, bits + 2] (a negative count as its
    unsigned wrap): 0 left and the sign's fill right outside [0, bits), as
    NumPy's (and torch's) shifts give them."""
    bits = 8 * np_dtype(lhs).itemsize
    a = full_range(rng, SHAPE, lhs)
    counts = rng.integers(-2, bits + 3, SHAPE)
    b = counts.astype(np.int64).astype(np_dtype(lhs)) if is_int(lhs) else counts
    return [Case([a, b], want=later(ref, a, b))]


def binary_sample(name, klass):
    def make(rng, lhs):
        if is_complex(lhs):
            a, b = small(rng, SHAPE, lhs, -3, 3), small(rng, SHAPE, lhs, -3, 3)
            ref = COMPLEX_BINARY.get(name)
            return [Case([a, b], want=ref and later(reference, ref, a, b), exact=name in ("add", "sub"))]
        if name == "pow":
            pairs = _pow_operands(rng, lhs) + ([_special_pairs(lhs)] if is_float(lhs) else [])
            cases = [Case([a, b], want=later(reference, np.power, a, b), exact=not is_float(lhs)) for a, b in pairs]
            return cases + ([_int_pow_negative(rng, lhs)] if is_int(lhs) and not is_unsigned(lhs) else [])
        a = small(rng, SHAPE, lhs, -100, 100)
        b = small(rng, SHAPE, lhs, 1, 9)
        if is_int(lhs) and not is_unsigned(lhs):
            b = b * rng.choice([-1, 1], SHAPE).astype(b.dtype)
        pairs = [(with_extremes(a) if name not in ("div", "rem") else a, b)]
        if is_int(lhs):
            # Any values but INT_MIN / -1, which the op leaves undefined, and x / 0 (0, the
            # op's value: tested in a subprocess by test_ops_elementwise, as a wrong lowering
            # makes XLA's constant folder kill the process).
            a, b = full_range(rng, SHAPE, lhs), full_range(rng, SHAPE, lhs)
            b[::-1][0, :2] = [2, 3]  # small divisors too
            undefined = (b == 0) | ((a == np.iinfo(a.dtype).min) & (b == np.array(-1).astype(b.dtype)))
            pairs.append((a, np.where(undefined, 1, b).astype(b.dtype)))
        elif is_float(lhs):
            pairs.append(_special_pairs(lhs))
        if is_float(lhs):
            ref, exact = FLOAT_BINARY.get(name, (None, True))
        elif is_unsigned(lhs):
            ref, exact = {"div": np.floor_divide, "rem": np.remainder}.get(name) or INT_BINARY.get(name), True
        elif is_bool(lhs):
            ref, exact = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
                          "maximum": np.maximum, "minimum": np.minimum}.get(name), True
        else:
            ref, exact = {"div": _exact_trunc_div}.get(name) or INT_BINARY.get(name), True
        # No NumPy answer: a type the op refuses (so the case never runs).
        return [Case([a, b], want=ref and later(reference, ref, a, b), exact=exact) for a, b in pairs]

    return Sample({"lhs": klass}, make)


def _compare(rng, lhs):
    if is_complex(lhs):  # equal real parts, unequal imaginary ones; no order
        a = rng.integers(0, 2, SHAPE) + 1j * rng.integers(0, 2, SHAPE)
        b = rng.integers(0, 2, SHAPE) + 1j * rng.integers(0, 2, SHAPE)
        a, b = a.astype(np_dtype(lhs)), b.astype(np_dtype(lhs))
        return [Case([a, b], dict(direction=d), want=(known(ref(a, b)) if d in ("EQ", "NE") else None),
                     refused=d not in ("EQ", "NE"))
                for d, ref in NUMPY_COMPARE.items()]
    # Few distinct values so that EQ/NE see equal pairs; floats add NaN.
    a, b = (small(rng, SHAPE, lhs, 0, 3) if not is_float(lhs)
            else rng.integers(0, 4, SHAPE).astype(np_dtype(lhs)) for _ in range(2))
    if is_float(lhs):
        a[0, 0] = b[0, 1] = np.nan
    return [Case([a, b], dict(direction=d), want=known(ref(a.astype(F64), b.astype(F64))))
            for d, ref in NUMPY_COMPARE.items()]


def _check(rng, operand, failed):
    """The operand passes through, whichever the flag (the runtime reads the flag:
    tests/test_value_checks.py); a flag of any other rank, or an error type that is
    not one of eager's, is refused."""
    x = small(rng, SHAPE, operand)
    attrs = dict(message="ZeroDivisionError", error="RuntimeError")
    cases = [Case([x, np.array(flag).astype(np_dtype(failed))], attrs, want=known(x)) for flag in (False, True)]
    refused = [Case([x, np.zeros(2).astype(np_dtype(failed))], attrs, refused=True),
               Case([x, np.array(True)], dict(attrs, error="KeyboardInterrupt"), refused=True)]
    return cases + refused


def _select(rng, on_true, pred):
    p = (rng.random(SHAPE) < 0.5).astype(np_dtype(pred))
    a, b = small(rng, SHAPE, on_true), small(rng, SHAPE, on_true)
    return [Case([p, a, b], want=known(np.where(p, a, b)))]


def _fma(rng, lhs):
    """Compared with the float64 ``a * b + c`` rounded to the type (float64's
    own rounds twice: within TOL of its fused multiply-add)."""
    a, b, c = (small(rng, SHAPE, lhs) for _ in range(3))
    return [Case([a, b, c], want=later(lambda: (a.astype(F64) * b.astype(F64) + c.astype(F64)).astype(np_dtype(lhs))),
                 exact=False)]


def _convert(rng, operand, result):
    """Values whose conversion NumPy and the op define alike: any integer to an
    integer or bool (two's complement wraps), small numbers otherwise, float ->
    integer truncating toward zero within the target's range."""
    src, dst = np_dtype(operand), np_dtype(result)
    if is_complex(operand):
        # to a real type: the real part (NumPy's cast, which warns); to bool: nonzero in either part
        lo = 0 if is_unsigned(result) else -50
        x = (rng.uniform(lo, 50, SHAPE) + 1j * rng.uniform(-50, 50, SHAPE)).astype(src)
        x[0, :3] = [0, 1j, 2.75]
        if is_bool(result):
            return [Case([x], dict(dtype=result), want=known(x != 0))]
        with np.errstate(over="ignore"):
            want = x.astype(dst) if is_complex(result) else x.real.astype(dst)
        return [Case([x], dict(dtype=result), want=known(want))]
    if is_bool(operand):
        x = rng.random(SHAPE) < 0.5
    elif is_int(operand) and (is_int(result) or is_bool(result)):
        info = np.iinfo(src)
        x = rng.integers(info.min, info.max, SHAPE, dtype=src, endpoint=True)
        x[0, :3] = [0, info.min, info.max]
    elif is_int(operand):
        x = full_range(rng, SHAPE, operand)
    elif is_float(result):
        x = (rng.standard_normal(SHAPE) * 50).astype(src)
        x[0, :4] = [0.0, np.inf, -np.inf, np.nan]
        if operand == "f64" and result in ("f16", "bf16"):
            # rounded once: through float32 each of these would first land on a tie
            bits = {"f16": 11, "bf16": 8}[result]
            x[1, :4] = [1 + 2.0 ** -bits + 2.0 ** -40, -(1 + 2.0 ** -bits + 2.0 ** -40),
                        1 + 2.0 ** -bits - 2.0 ** -40, 3.2099608446567425]
    elif is_bool(result):
        x = (rng.standard_normal(SHAPE) * 2).astype(src)
        x[0, :3] = [0.0, -0.0, 0.25]
    else:
        lo = 0 if is_unsigned(result) else -100
        x = rng.uniform(lo, 100, SHAPE).astype(src)
        x[0, :2] = [0.0, 2.75]
    with np.errstate(over="ignore"):  # a wide integer past a half's range is inf, as the op gives
        want = x.astype(dst) if (operand, result) != ("f64", "bf16") else _bfloat16_rounded_once(x)
    return [Case([x], dict(dtype=result), want=known(want))]


def _bfloat16_rounded_once(x):
    """float64 -> bfloat16 rounded once to nearest even, by Python's exact
    ``round`` of the scaled significand (ml_dtypes before 0.7 rounds through
    float32); the values here are in bfloat16's normal range or special."""
    out = []
    for v in x.ravel().tolist():
        if v == 0 or not math.isfinite(v):
            out.append(v)
            continue
        m, e = math.frexp(v)  # |m| in [0.5, 1): 8 bits of significand are m * 2^8
        out.append(math.ldexp(round(math.ldexp(m, 8)), e - 8))
    return np.array(out, np.float64).reshape(x.shape).astype(ml_dtypes.bfloat16)


def _bitcast_convert(rng, operand, result):
    """Any bits of the source (NaN payloads included) read as the target, as
    NumPy's ``view``; types of two widths are refused."""
    src, dst = np_dtype(operand), np_dtype(result)
    x = rng.integers(0, 256, SHAPE + (src.itemsize,), dtype=np.uint8).view(src).reshape(SHAPE)
    if src.itemsize != dst.itemsize:
        return [Case([x], dict(dtype=result), refused=True)]
    return [Case([x], dict(dtype=result), want=known(x.view(dst)))]


def _iota(rng, result):
    counts = {0: np.arange(2)[:, None], 1: np.arange(3)[None, :]}
    return [Case([], dict(shape=(2, 3), dtype=result, dim=dim),
                 want=known(np.broadcast_to(counts[dim], (2, 3)).astype(np_dtype(result))))
            for dim in (0, 1)]


def _constant(rng, value):
    v = full_range(rng, (2, 3), value) if is_int(value) else random_array(rng, (2, 3), value)
    return [Case([], dict(value=c), want=known(c)) for c in (v, v[0, 0].reshape(()))]


# --- shape ---------------------------------------------------------------------------


def _shape_sample(make):
    return Sample({"operand": ANY}, make)


def _broadcast_in_dim(rng, operand):
    x = random_array(rng, (3, 1), operand)
    return [Case([x], dict(dims=(1, 2), shape=(2, 3, 4)), want=known(broadcast_in_dim_ref(x, (1, 2), (2, 3, 4))))]


def _reshape(rng, operand):
    x = random_array(rng, (2, 3), operand)
    return [Case([x], dict(shape=(3, 2)), want=known(x.reshape(3, 2)))]


def _permute(rng, operand):
    x = random_array(rng, (2, 3, 4), operand)
    return [Case([x], dict(dims=(2, 0, 1)), want=known(np.transpose(x, (2, 0, 1))))]


def _slice(rng, operand):
    x = random_array(rng, (4, 5), operand)
    return [Case([x], dict(start=(1, 0), limit=(4, 5), strides=(2, 2)), want=known(x[1:4:2, 0:5:2]))]


def _starts(starts, index):
    return [np.asarray(s).astype(np_dtype(index)) for s in starts]


def _dynamic_slice(rng, operand, start_indices):
    x = random_array(rng, (4, 5), operand)
    cases = []
    for starts in [(1, 4), (0, 2)]:  # the first is clamped in dim 1
        at = clamped(starts, (2, 3), x.shape)
        cases.append(Case([x, _starts(starts, start_indices)], dict(sizes=(2, 3)),
                          want=known(x[at[0]:at[0] + 2, at[1]:at[1] + 3])))
    return cases


def _dynamic_update_slice(rng, operand, start_indices):
    x, update = random_array(rng, (4, 5), operand), random_array(rng, (2, 3), operand)
    cases = []
    for starts in [(3, 1), (1, 2)]:  # the first is clamped in dim 0
        at = clamped(starts, update.shape, x.shape)
        want = x.copy()
        want[at[0]:at[0] + 2, at[1]:at[1] + 3] = update
        cases.append(Case([x, update, _starts(starts, start_indices)], want=known(want)))
    return cases


def _concatenate(rng, lhs):
    a, b = random_array(rng, (2, 3), lhs), random_array(rng, (2, 2), lhs)
    return [Case([a, b], dict(dim=1), want=known(np.concatenate([a, b], axis=1)))]


def _pad(rng, operand):
    x, value = random_array(rng, (3, 4), operand), random_array(rng, (), operand)
    attrs = dict(low=(1, -1), high=(0, 2), interior=(1, 0))
    return [Case([x, value], attrs, want=known(pad_ref(x, value, attrs["low"], attrs["high"], attrs["interior"])))]


def _reverse(rng, operand):
    x = random_array(rng, (3, 4), operand)
    return [Case([x], dict(dims=dims), want=known(np.flip(x, dims))) for dims in [(0, 1), (1,)]]


# --- reductions -------------------------------------------------------------------------


def reduce_sample(name, klass):
    def make(rng, operand):
        if is_int(operand):
            x = full_range(rng, (3, 4), operand)  # sums and products wrap around
        else:
            x = small(rng, (3, 4), operand, -3, 3)
        if is_float(operand):
            x[1, 2] = np.nan
        ref = NUMPY_REDUCE[name]
        cases = []
        for dims in [(1,), (0, 1)]:
            if is_float(operand) or is_complex(operand):
                want = np.asarray(ref(x.astype(F64 if is_float(operand) else np.complex128), axis=dims)).astype(x.dtype)
            else:
                keep = {"dtype": x.dtype} if name in ("reduce_sum", "reduce_prod") else {}
                want = np.asarray(ref(x, axis=dims, **keep))
            cases.append(Case([x], dict(dims=dims), want=known(want), exact=is_int(operand) or is_bool(operand)))
        return cases

    return Sample({"operand": klass}, make)


def arg_sample(name):
    def make(rng, operand, result):
        x = with_extremes(small(rng, (3, 5), operand, -2, 2))  # ties for the extreme in most rows
        if is_float(operand):
            x[1, 2] = x[1, 4] = np.nan  # the first NaN is the extreme
        return [Case([x], dict(dim=d, dtype=result), want=known(ARG[name](x, axis=d).astype(np_dtype(result))))
                for d in (0, 1)]

    return Sample({"operand": ORDERED, "result": INT}, make)


def _stable_sort_reference(x, axis, descending):
    """Python's stable sort of each row along ``axis``: NaN last ascending and
    first descending (torch's and NumPy's order), equal elements in place."""
    moved = np.moveaxis(x, axis, -1)
    floating = "float" in str(moved.dtype)  # (bfloat16 is no NumPy floating type)
    idx = np.empty(moved.shape, np.int64)
    for pos in np.ndindex(moved.shape[:-1]):
        row = moved[pos]

        def key(j):
            v = row[j].item()
            nan = floating and v != v
            if descending:
                return (0, 0) if nan else (1, -v)
            return (1, 0) if nan else (0, v)

        idx[pos] = sorted(range(row.shape[0]), key=key)
    idx = np.moveaxis(idx, -1, axis)
    return np.take_along_axis(x, idx, axis), idx


def _sort(rng, operand, indices):
    x = with_extremes(small(rng, (3, 5), operand, -2, 2))  # ties in most rows
    if is_float(operand):
        x[1, 2] = x[1, 4] = np.nan

    def want(d, descending):  # (only if the case runs: complex numbers have no order)
        values, idx = _stable_sort_reference(x, d, descending)
        return values, idx.astype(np_dtype(indices))

    return [Case([x], dict(dim=d, descending=descending, dtype=indices), want=lambda d=d, s=descending: want(d, s))
            for d in (0, 1) for descending in (False, True)]


def _lane_rows(rng, dtype):
    return small(rng, (3, 21), dtype, -2, 2)  # two vectors of 8 lanes and a tail of 5


def _lane_sum_reference(a, b):
    """Eager's map2_reduce_all of 8 lanes: whole vectors' rounded products lane-wise,
    the tail's fused into the first lanes (exact products in float64: float32 only),
    float32's lanes halved."""
    p = a * b
    acc = p[:, :8] + p[:, 8:16]
    acc[:, :5] = (a[:, 16:].astype(F64) * b[:, 16:] + acc[:, :5]).astype(a.dtype)
    while acc.shape[1] > 1:
        half = acc.shape[1] // 2
        acc = acc[:, :half] + acc[:, half:]
    return (acc[:, 0],)


def _lane_sum(rng, lhs):
    a, b = _lane_rows(rng, lhs), _lane_rows(rng, lhs)
    if lhs not in ("f32", "f64"):
        return [Case([a, b], dict(lanes=8, halving=True, fused=False))]
    return [Case([a, b], dict(lanes=8, halving=True, fused=False), want=lambda: _lane_sum_reference(a, b),
                 exact=lhs == "f32"),
            Case([a, b.astype(np.float32 if lhs == "f64" else F64)], dict(lanes=8, halving=True, fused=False),
                 refused=True)]


def _buffer_sum_reference(a, b, owner, threads):
    """Eager's per-thread buffers from +0: row r's products fused into buffer owner[r]
    (float32 in float64, its product exact; float64 exact in fractions), then the
    buffers added in thread order."""
    from fractions import Fraction

    def fma(x, y, z):
        if a.dtype == np.float32:
            return np.float32(np.float64(x) * np.float64(y) + np.float64(z))
        return np.float64(float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))))

    buf = np.zeros(b.shape[:-2] + (threads, b.shape[-1]), a.dtype)
    for r, t in enumerate(owner):
        if 0 <= t < threads:
            for i in np.ndindex(*buf.shape[:-2], buf.shape[-1]):
                *lead, j = i
                buf[(*lead, t, j)] = fma(a[r, j], b[(*lead, r, j)], buf[(*lead, t, j)])
    total = np.zeros(b.shape[:-2] + b.shape[-1:], a.dtype)
    for t in range(threads):
        total = total + buf[..., t, :]
    return (total,)


def _buffer_sum(rng, lhs):
    a = small(rng, (7, 5), lhs, -2, 2)
    b = small(rng, (2, 7, 5), lhs, -2, 2)
    if lhs not in ("f32", "f64"):
        return [Case([a, b, np.zeros(7, np.int64)], dict(threads=1))]
    split = np.array([0, 0, 0, 0, 1, 1, 1], np.int64)
    nowhere = np.array([1, 0, 5, 1, 0, 0, -1], np.int64)  # (rows 2 and 6 owned by no thread)
    return [Case([a, b, owner], dict(threads=threads), want=lambda o=owner, k=threads: _buffer_sum_reference(a, b, o, k))
            for owner, threads in ((split, 2), (nowhere, 2), (np.zeros(7, np.int64), 1), (split, 3))] + [
        Case([a, b[0].T.copy(), split], dict(threads=2), refused=True),  # rhs not ending in lhs's shape
        Case([a, b, split[:6]], dict(threads=2), refused=True),  # an owner per row
        Case([a, b, split], dict(threads=0), refused=True)]


def _lane_moments(rng, operand):
    x = _lane_rows(rng, operand)
    return [Case([x], dict(lanes=8), want=lambda: (x.mean(1), x.var(1)), exact=False)]


def _cascade_reference(x, step=16, levels=8):
    """Eager's ``nll_loss`` cascade (LossNLL.cpp) per row, element by element."""
    out = np.zeros(x.shape[:-1], x.dtype)
    for row in np.ndindex(*x.shape[:-1]):
        acc = [x.dtype.type(0)] * levels
        for b, v in enumerate(x[row]):
            acc[0] = acc[0] + v
            for j in range(levels - 1):
                if b % step ** (j + 1):
                    break
                acc[j + 1], acc[j] = acc[j + 1] + acc[j], x.dtype.type(0)
        total = x.dtype.type(0)
        for a in acc:
            total = total + a
        out[row] = total
    return out


def _cascade_sum(rng, operand):
    # 300 elements: runs of 16 flushed into level 1, level 1 flushed at 256 into level 2;
    # 3 levels, so a level receiving one value passes it up whole
    cases = [Case([x], dict(step=16, levels=levels), want=lambda x=x, s=16, k=levels: (_cascade_reference(x, s, k),))
             for x in (small(rng, (2, 300), operand, -2, 2), small(rng, (17,), operand))
             for levels in (8, 3)]
    return cases + [Case([small(rng, (5,), operand)], dict(step=1, levels=8), refused=True)]


def _vector_sum(rng, operand):
    from lazycore.frontends.torch.ops.sum_kernel import reference  # (checked against eager's bits there)

    def want(x, lanes):
        rows = x.reshape(-1, x.shape[-1])
        return (np.asarray([reference(r, lanes) for r in rows], x.dtype).reshape(x.shape[:-1]),)

    # rows under one vector, of vectors and a tail, and of 1,100 (two runs of 16 groups of four vectors)
    cases = [Case([x], dict(lanes=lanes, threads=1), want=lambda x=x, k=lanes: want(x, k))
             for x in (small(rng, (3, 5), operand, -2, 2), small(rng, (17,), operand),
                       small(rng, (2, 1100), operand, -2, 2))
             for lanes in (8, 4)]
    return cases + [Case([small(rng, (5,), operand)], dict(lanes=0, threads=1), refused=True)]


def _norm_squares(rng, operand):
    from lazycore.frontends.torch.ops.norm_kernel import squares  # (checked against eager's bits there)

    def want(x, lanes):
        return (squares(x.reshape(-1, x.shape[-1]), lanes).reshape(x.shape[:-1]),)

    # rows under one vector, of vectors and a tail of each size, and of 1,100
    cases = [Case([x], dict(lanes=lanes, tail_group=4), want=lambda x=x, k=lanes: want(x, k))
             for x in (small(rng, (3, 5), operand, -2, 2), small(rng, (17,), operand), small(rng, (4, 31), operand),
                       small(rng, (2, 1100), operand, -2, 2))
             for lanes in (8, 4)]
    return cases + [Case([small(rng, (5,), operand)], dict(lanes=8, tail_group=0), refused=True)]


def _column_sum(rng, operand):
    from lazycore.frontends.torch.ops.sum_kernel import _four_at_a_time, _levels  # (eager's steps, checked there)

    def want(x, lanes):
        # eager's outer sum, column by column: whole blocks of 4 * lanes (4 under lanes columns)
        # a cascade down the rows, the rest four rows at a time
        flat = x.reshape(-1, *x.shape[-2:])
        out = np.empty((flat.shape[0], x.shape[-1]), x.dtype)
        width = x.shape[-1]
        block = 4 * lanes if width >= lanes else 4
        whole = width // block * block
        for i, m in enumerate(flat):
            rows = list(m)
            if whole:
                out[i, :whole] = _levels([r[:whole] for r in rows], np.zeros(whole, x.dtype))
            if whole < width:
                out[i, whole:] = _four_at_a_time([r[whole:] for r in rows], np.zeros(width - whole, x.dtype))
        out = np.where(out == 0, x.dtype.type(0), out)
        return (out.reshape(x.shape[:-2] + x.shape[-1:]),)

    cases = [Case([x], dict(lanes=lanes), want=lambda x=x, k=lanes: want(x, k))
             for x in (small(rng, (5, 3), operand, -2, 2), small(rng, (2, 40, 37), operand, -2, 2),
                       small(rng, (300, 70), operand, -2, 2))
             for lanes in (8, 4)]
    return cases + [Case([small(rng, (5,), operand)], dict(lanes=8), refused=True)]


# --- linalg ------------------------------------------------------------------------------


def _dot_general(rng, lhs):
    cases = []
    for key in ("matmul", "batched_matmul"):
        ls, rs, lb, rb, lc, rc, spec = DOTS[key]
        if is_int(lhs):  # products and sums wrap around, in NumPy too
            a, b = full_range(rng, ls, lhs), full_range(rng, rs, lhs)
            want = np.einsum(spec, a, b)
        else:
            a, b = small(rng, ls, lhs, -2, 2), small(rng, rs, lhs, -2, 2)
            wide = np.complex128 if is_complex(lhs) else F64
            want = np.einsum(spec, a.astype(wide), b.astype(wide)).astype(a.dtype)
        cases.append(Case([a, b], dict(lhs_batch=lb, rhs_batch=rb, lhs_contract=lc, rhs_contract=rc),
                          want=known(want), exact=is_int(lhs)))
    return cases


def _convolution(rng, input):
    cases = []
    for key in ("1d_stride_pad", "2d_groups"):
        xs, ws, strides, padding, lhs_dilation, rhs_dilation, groups = CONVS[key]
        x, w = small(rng, xs, input, -2, 2), small(rng, ws, input, -2, 2)
        want = conv_reference(x.astype(F64), w.astype(F64), strides, padding, lhs_dilation, rhs_dilation, groups)
        cases.append(Case([x, w], dict(strides=strides, padding=padding, lhs_dilation=lhs_dilation,
                                       rhs_dilation=rhs_dilation, groups=groups),
                          want=known(want.astype(x.dtype)), exact=not is_float(input)))
    return cases


# --- indexing ------------------------------------------------------------------------------


def _gather(rng, operand, start_indices):
    x = random_array(rng, (5, 3), operand)
    idx = np.array([4, 0, 2, 2], dtype=np.int64)
    attrs = dict(offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(),
                 start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
                 slice_sizes=(1, 3), indices_are_sorted=False)
    return [Case([x, idx.astype(np_dtype(start_indices))], attrs, want=known(x[idx]))]


SCATTER_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter(rng, operand, scatter_indices):
    x = small(rng, (5, 3), operand, -3, 3)
    upd = small(rng, (4, 3), operand, -3, 3)
    attrs = {**ROWS, "input_batching_dims": (), "scatter_indices_batching_dims": ()}
    cases = []
    for mode in ("replace", *SCATTER_UFUNCS):
        idx = np.array([[3], [0], [1], [4]] if mode == "replace" else [[3], [0], [3], [3]])
        if is_complex(operand) and mode in ("max", "min"):  # no order
            cases.append(Case([x, idx.astype(np_dtype(scatter_indices)), upd], dict(attrs, mode=mode), refused=True))
            continue
        want = x.astype(F64) if is_float(operand) else x.copy()
        if mode == "replace":
            want[idx[:, 0]] = upd
        else:
            SCATTER_UFUNCS[mode].at(want, idx[:, 0], upd.astype(want.dtype))
        cases.append(Case([x, idx.astype(np_dtype(scatter_indices)), upd], dict(attrs, mode=mode),
                          want=known(want.astype(x.dtype)), exact=not (is_float(operand) or is_complex(operand)),
                          refused=mode in ("add", "mul") and is_bool(operand)))
    return cases


# --- random -------------------------------------------------------------------------------


def _random_bits(out, case):
    state = case.operands[0]
    new_state, bits = out
    assert new_state.dtype == state.dtype and new_state.shape == state.shape
    assert not np.array_equal(new_state, state)
    assert bits.shape == case.kwargs["shape"] and bits.dtype == np_dtype(case.kwargs["dtype"])
    assert len(np.unique(bits)) > 1


def _rng_bit_generator(rng, state, bits):
    return [Case([np.arange(7, 7 + words).astype(np_dtype(state))], dict(algorithm=algorithm, shape=(4, 8), dtype=bits),
                 check=_random_bits)
            for algorithm, words in [("three_fry", 2), ("philox", 3), ("default", 2)]]


# On one device (this process) a mesh has one device: each collective runs
# with groups of one, its blocks are the whole operand. tests/test_ops_collectives.py
# runs them on 4 devices.
_COLLECTIVE_CASES = {
    "shard": [dict(mesh=(1, 1), sharding=(0, 1)), dict(mesh=(1,), sharding=(-1, 0))],
    "all_reduce": [dict(mesh=(1, 1), sharding=(0, -1), axis=0, reduction=r) for r in ("sum", "prod", "max", "min")],
    "all_gather": [dict(mesh=(1, 1), sharding=(0, 1), axis=1)],
    "reduce_scatter": [dict(mesh=(1,), sharding=(0, -1), axis=0, dim=1, reduction="sum")],
    "all_to_all": [dict(mesh=(1,), sharding=(0, -1), axis=0, split_dim=1, concat_dim=0)],
    # no pair: every block is zero
    "collective_permute": [dict(mesh=(1,), sharding=(0, -1), axis=0, pairs=(0, 0)),
                           dict(mesh=(1,), sharding=(0, -1), axis=0, pairs=())],
}

_COLLECTIVE_REFUSED = [
    dict(mesh=(1,), sharding=(0,)),  # one entry per dimension
    dict(mesh=(2,), sharding=(-1, 0)),  # 5 columns do not split in 2
    dict(mesh=(1,), sharding=(1, -1)),  # no mesh axis 1
]


def _collective(name):
    def make(rng, operand):
        x = small(rng, (4, 5), operand)
        extra = {k: v for k, v in _COLLECTIVE_CASES[name][0].items() if k not in ("mesh", "sharding")}
        cases = [Case([x], attrs, want=known(collective_reference(name, x, **attrs)))
                 for attrs in _COLLECTIVE_CASES[name]]
        return cases + [Case([x], dict(bad, **extra), refused=True) for bad in _COLLECTIVE_REFUSED]

    return make


# --- complex parts and the Fourier transform -------------------------------------------------


def _part(name):
    def make(rng, operand):
        x = small(rng, SHAPE, operand)
        return [Case([x], want=known(getattr(np, name)(x)))]

    return make


def _complex(rng, lhs):
    a, b = small(rng, SHAPE, lhs), small(rng, SHAPE, lhs)
    if is_float(lhs):
        a[0, :3], b[0, :3] = [np.nan, 0.0, -0.0], [1.0, np.inf, -0.0]
    want = np.empty(SHAPE, np.complex64 if lhs == "f32" else np.complex128)
    want.real, want.imag = a, b
    return [Case([a, b], want=known(want)),
            Case([a, b.astype(np.float32 if lhs == "f64" else np.float64)], refused=True)]


# (type, length, operand shape, NumPy's transform of the innermost len(length) dims)
_FFTS = [
    ("FFT", (5,), (2, 5), lambda x: np.fft.fft(x)),
    ("IFFT", (4,), (3, 4), lambda x: np.fft.ifft(x)),
    ("FFT", (3, 4), (2, 3, 4), lambda x: np.fft.fft2(x)),
    ("IFFT", (2, 3, 2), (2, 3, 2), lambda x: np.fft.ifftn(x)),
    ("RFFT", (7,), (2, 7), lambda x: np.fft.rfft(x)),
    ("RFFT", (3, 6), (3, 6), lambda x: np.fft.rfft2(x)),
    ("IRFFT", (6,), (2, 4), lambda x: np.fft.irfft(x, 6)),
    ("IRFFT", (3, 5), (2, 3, 3), lambda x: np.fft.irfft2(x, (3, 5))),
]


def _fft(rng, operand):
    cases = []
    for fft_type, length, shape, ref in _FFTS:
        x = small(rng, shape, operand)
        ok = (is_complex(operand) if fft_type != "RFFT" else operand in ("f32", "f64"))
        if not ok:
            cases.append(Case([x], dict(fft_type=fft_type, length=length), refused=True))
            continue
        want = ref(x.astype(np.complex128 if is_complex(operand) else F64))
        part = real_dtype(operand)
        want = want.astype(np_dtype(part) if want.dtype.kind == "f" else (np.complex64 if part == "f32" else np.complex128))
        cases.append(Case([x], dict(fft_type=fft_type, length=length), want=known(want), exact=False))
    if operand == "complex<f32>":  # a length the innermost dims do not have, an unknown type
        x = small(rng, (2, 4), operand)
        cases += [Case([x], dict(fft_type="FFT", length=(5,)), refused=True),
                  Case([x], dict(fft_type="DCT", length=(4,)), refused=True),
                  Case([x], dict(fft_type="FFT", length=(1, 2, 4, 1)), refused=True)]
    return cases


# --- barrier ------------------------------------------------------------------------------


def _optimization_barrier(rng, operands):
    x = small(rng, SHAPE, operands)
    others = [np.array([-(2**40), 7], np.int64), np.array([[True], [False]])]
    cases = [Case([[x]], want=known(x)), Case([[x, *others]], want=known(x, *others))]
    # its results are its operands' values: NaN, infinities and signed zeros too
    if is_float(operands):
        specials = SPECIALS.astype(np_dtype(operands))
        cases.append(Case([[specials, x]], want=known(specials, x)))
    return cases


# --- factorizations -------------------------------------------------------------------------------

LAPACK = ("f32", "f64", "complex<f32>", "complex<f64>")


def _matrix(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if is_complex(dtype):
        x = x + 1j * rng.standard_normal(shape)
    return x


def _as(x, dtype):
    return np.asarray(x).astype(np_dtype(dtype))


def _hermitian(x):
    return x + np.conj(np.swapaxes(x, -1, -2))


def _within(got, want, dtype, scale=10):
    t = TOL[real_dtype(dtype)] * scale
    np.testing.assert_allclose(np.asarray(got, np.complex128), np.asarray(want, np.complex128), rtol=t, atol=t)


def _refusals(rng, dtype):
    """A vector, a matrix with no rows, and (square ops) a wide matrix."""
    return [_as(rng.standard_normal(3), dtype), np.zeros((0, 3), np_dtype(dtype))]


def _cholesky(rng, operand):
    cases = []
    for shape in ((3, 3), (2, 4, 4)):
        x = _matrix(rng, shape, operand)
        spd = x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])
        want = np.linalg.cholesky(spd)
        cases.append(Case([_as(spd, operand)], want=known(_as(want, operand), np.zeros(shape[:-2], np.int32)),
                          exact=False))
    bad = np.diag([1.0, -1.0, 1.0])  # the leading minor of order 2 is not positive definite

    def second_minor(out, case):
        assert int(out[1]) == 2, out[1]

    cases.append(Case([_as(bad, operand)], check=second_minor))
    cases += [Case([x], refused=True) for x in _refusals(rng, operand) + [_as(np.ones((2, 3)), operand)]]
    return cases


def _swapped_rows(pivots, m):
    """The rows row swaps i <-> pivots[..., i] (in order) bring to each place."""
    rows = np.broadcast_to(np.arange(m, dtype=np.int32), pivots.shape[:-1] + (m,)).copy()
    for index in np.ndindex(pivots.shape[:-1]):
        for i, j in enumerate(pivots[index]):
            rows[index + (i,)], rows[index + (j,)] = rows[index + (j,)], rows[index + (i,)]
    return rows


def _lu(rng, operand):
    cases = []
    for shape in ((4, 4), (2, 3, 5), (5, 2)):
        x = _as(_matrix(rng, shape, operand), operand)

        def rebuilt(out, case, x=x):
            factor, pivots, info = out
            m, n = x.shape[-2:]
            k = min(m, n)
            lower = np.tril(factor[..., :, :k], -1) + np.eye(m, k)
            upper = np.triu(factor[..., :k, :])
            rows = _swapped_rows(pivots, m)
            _within(lower @ upper, np.take_along_axis(x, rows[..., :, None].astype(np.int64), -2), type_of(x).dtype)
            assert not info.any()

        cases.append(Case([x], check=rebuilt))
    cases += [Case([x], refused=True) for x in _refusals(rng, operand)]
    return cases


def _pivots_to_permutation(rng, pivots):
    if pivots != "i32":
        return [Case([small(rng, (3,), pivots)], dict(size=3), refused=True)]
    cases = []
    for shape, size in (((4,), 4), ((2, 3), 5), ((2, 1, 3), 3)):
        k = shape[-1]
        p = np.stack([rng.integers(i, size, shape[:-1]) for i in range(k)], -1).astype(np.int32)
        cases.append(Case([p], dict(size=size), want=known(_swapped_rows(p, size))))
    return cases + [Case([np.zeros(3, np.int32)], dict(size=2), refused=True)]


def _geqrf(rng, operand):
    cases = []
    for shape in ((4, 3), (2, 3, 5)):
        x = _as(_matrix(rng, shape, operand), operand)
        raw, tau = np.linalg.qr(x.astype(np.complex128 if is_complex(operand) else F64), mode="raw")
        cases.append(Case([x], want=known(_as(np.swapaxes(raw, -1, -2), operand), _as(tau, operand)), exact=False))
    return cases + [Case([x], refused=True) for x in _refusals(rng, operand)]


def _householder_product(rng, factor):
    cases = []
    if factor not in LAPACK:
        return [Case([small(rng, (3, 2), factor), small(rng, (2,), factor)], refused=True)]
    for shape in ((4, 3), (2, 3, 3)):
        x = _matrix(rng, shape, factor)
        raw, tau = np.linalg.qr(x, mode="raw")
        q = np.linalg.qr(x).Q
        cases.append(Case([_as(np.swapaxes(raw, -1, -2), factor), _as(tau, factor)], want=known(_as(q, factor)),
                          exact=False))
    cases.append(Case([_as(np.ones((2, 3)), factor), _as(np.ones(2), factor)], refused=True))  # m < n
    cases.append(Case([_as(np.ones((3, 2)), factor), _as(np.ones(3), factor)], refused=True))  # k > n
    return cases


def _eigh(rng, operand):
    cases = []
    for shape, lower in (((4, 4), True), ((2, 3, 3), False)):
        x = _as(_hermitian(_matrix(rng, shape, operand)), operand)
        values = np.linalg.eigvalsh(x.astype(np.complex128), UPLO="L" if lower else "U")

        def eigenpairs(out, case, x=x, values=values):
            vectors, got, info = out
            _within(got, values, type_of(x).dtype)
            _within(x @ vectors, vectors * got[..., None, :], type_of(x).dtype, scale=100)
            assert not info.any()

        cases.append(Case([x], dict(lower=lower), check=eigenpairs))
    return cases + [Case([x], dict(lower=True), refused=True)
                    for x in _refusals(rng, operand) + [_as(np.ones((2, 3)), operand)]]


def _svd(rng, operand):
    cases = []
    for shape, full in (((4, 3), False), ((2, 3, 5), True), ((3, 3), True)):
        x = _as(_matrix(rng, shape, operand), operand)
        values = np.linalg.svd(x.astype(np.complex128), compute_uv=False)

        def factors(out, case, x=x, values=values):
            s, u, vt, info = out
            k = s.shape[-1]
            _within(s, values, type_of(x).dtype)
            _within((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], x, type_of(x).dtype, scale=100)
            assert not info.any()

        cases.append(Case([x], dict(full_matrices=full), check=factors))
    return cases + [Case([x], dict(full_matrices=False), refused=True) for x in _refusals(rng, operand)]


def _triangular_solve(rng, a):
    if a not in LAPACK:
        return [Case([small(rng, (3, 3), a), small(rng, (3, 2), a)],
                     dict(left_side=True, lower=True, transpose_a="NO_TRANSPOSE", unit_diagonal=False), refused=True)]
    cases = []
    for left, lower, transpose, unit in ((True, True, "NO_TRANSPOSE", False), (False, False, "TRANSPOSE", True),
                                         (True, False, "ADJOINT", False)):
        m = _matrix(rng, (2, 3, 3), a) + 4 * np.eye(3)
        b = _matrix(rng, (2, 3, 2) if left else (2, 2, 3), a)
        t = np.tril(m) if lower else np.triu(m)
        if unit:
            t = t - t * np.eye(3) + np.eye(3)
        op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2), "ADJOINT": np.conj(np.swapaxes(t, -1, -2))}[transpose]
        want = np.linalg.solve(op, b) if left else np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
        kw = dict(left_side=left, lower=lower, transpose_a=transpose, unit_diagonal=unit)
        cases.append(Case([_as(m, a), _as(b, a)], kw, want=known(_as(want, a)), exact=False))
    kw = dict(left_side=True, lower=True, transpose_a="NO_TRANSPOSE", unit_diagonal=False)
    cases.append(Case([_as(np.eye(3), a), _as(np.ones((2, 2)), a)], kw, refused=True))  # b's rows
    cases.append(Case([_as(np.eye(3), a), _as(np.ones((3, 2)), a)], dict(kw, transpose_a="CONJ"), refused=True))
    return cases


# --- samples from the traits ------------------------------------------------------------------


def _folded(spec, operands):
    """A ``Case.want``: the row's fold on ``operands``, as the result's element type."""

    def want():
        with np.errstate(all="ignore"):
            out = spec.fold(*operands)
        assert out is not None, (f"the fold of lazy.{spec.name} leaves these values to the backend: "
                                 "give the op a sample of its own in SAMPLES")
        (result,) = spec.infer(*(type_of(np.asarray(x)) for x in operands))
        return (np.asarray(out).astype(np_dtype(result.dtype)),)

    return want


def fold_sample(spec) -> Sample | None:
    """The sample of an elementwise row of one element-type class that has a
    fold: every operand of each type of the class, small values and (floats)
    every combination of SPECIALS, splats of small values, compared with the
    fold; inexact types within TOL. None for any other row."""
    if not (spec.elementwise and spec.dtypes and spec.fold and not spec.attrs and not spec.result_params):
        return None
    accepted = tuple(d for d in DTYPES if DTYPE_CLASSES[spec.dtypes](d))
    arity = len(spec.operands)

    def make(rng, **types):
        (dtype,) = types.values()
        groups = [[small(rng, SHAPE, dtype) for _ in range(arity)]]
        # splats: constant folding folds bf16 and float8 only as splats
        groups.append([np.full(SHAPE, v) for v in small(rng, (arity,), dtype, 1, 5)])
        if is_float(dtype):
            grids = np.meshgrid(*[SPECIALS] * arity)
            groups.append([g.reshape(-1).astype(np_dtype(dtype)) for g in grids])
        exact = not (is_float(dtype) or is_complex(dtype))
        return [Case(xs, want=_folded(spec, xs), exact=exact) for xs in groups]

    return Sample({spec.operand_names[0]: accepted}, make)


# --- the table of samples --------------------------------------------------------------------

SAMPLES: dict[str, Sample] = {
    "constant": Sample({"value": ANY}, _constant),
    **{n: unary_sample(n, ARITH) for n in ("neg", "abs")},
    "sign": unary_sample("sign", NUMERIC),
    **{n: unary_sample(n, INEXACT) for n in ("exp", "log", "log1p", "expm1", "tanh", "sqrt", "rsqrt", "sin", "cos")},
    **{n: unary_sample(n, FLOAT) for n in ("logistic", "floor", "ceil", "round", "erf")},
    **{n: Sample({"operand": COMPLEX}, _part(n)) for n in ("real", "imag")},
    "complex": Sample({"lhs": ("f32", "f64")}, _complex),
    "fft": Sample({"operand": ANY}, _fft),
    **{n: Sample({"operand": LAPACK}, f) for n, f in (("cholesky", _cholesky), ("lu", _lu), ("geqrf", _geqrf),
                                                       ("eigh", _eigh), ("svd", _svd))},
    "householder_product": Sample({"factor": LAPACK}, _householder_product),
    "pivots_to_permutation": Sample({"pivots": ("i32",)}, _pivots_to_permutation),
    "triangular_solve": Sample({"a": LAPACK}, _triangular_solve),
    "not": unary_sample("not", INTEGRAL),
    "is_finite": Sample({"operand": FLOAT}, _is_finite),
    **{n: binary_sample(n, ARITH) for n in ("add", "sub", "mul", "div", "pow")},
    "rem": binary_sample("rem", NUMERIC),
    **{n: binary_sample(n, ORDERED) for n in ("maximum", "minimum")},
    "atan2": binary_sample("atan2", FLOAT),
    **{n: binary_sample(n, INTEGRAL) for n in ("and", "or", "xor")},
    **{n: Sample({"lhs": INT}, partial(_shift, ref)) for n, ref in (("shift_left", np.left_shift),
                                                                    ("shift_right", np.right_shift))},
    "compare": Sample({"lhs": ANY}, _compare),
    "select": Sample({"on_true": ANY, "pred": ("i1",)}, _select),
    "fma": Sample({"lhs": FLOAT}, _fma),
    "check": Sample({"operand": ANY, "failed": ("i1",)}, _check),
    "convert": Sample({"operand": ANY, "result": ANY}, _convert),
    "bitcast_convert": Sample({"operand": NUMERIC, "result": NUMERIC}, _bitcast_convert),
    "iota": Sample({"result": NUMERIC}, _iota),
    "broadcast_in_dim": _shape_sample(_broadcast_in_dim),
    "reshape": _shape_sample(_reshape),
    "permute": _shape_sample(_permute),
    "slice": _shape_sample(_slice),
    "dynamic_slice": Sample({"operand": ANY, "start_indices": INT}, _dynamic_slice),
    "dynamic_update_slice": Sample({"operand": ANY, "start_indices": INT}, _dynamic_update_slice),
    "concatenate": Sample({"lhs": ANY}, _concatenate),
    "pad": _shape_sample(_pad),
    "reverse": _shape_sample(_reverse),
    **{n: reduce_sample(n, ARITH) for n in ("reduce_sum", "reduce_prod")},
    **{n: reduce_sample(n, ORDERED) for n in ("reduce_max", "reduce_min")},
    **{n: arg_sample(n) for n in ("argmax", "argmin")},
    "sort": Sample({"operand": ORDERED, "indices": INT}, _sort),
    "lane_sum": Sample({"lhs": ("f32", "f64")}, _lane_sum),
    "lane_moments": Sample({"operand": ("f32", "f64")}, _lane_moments),
    "cascade_sum": Sample({"operand": ("f32", "f64")}, _cascade_sum),
    "vector_sum": Sample({"operand": ("f32", "f64")}, _vector_sum),
    "norm_squares": Sample({"operand": ("f32", "f64")}, _norm_squares),
    "column_sum": Sample({"operand": ("f32", "f64")}, _column_sum),
    "buffer_sum": Sample({"lhs": ("f32", "f64")}, _buffer_sum),
    "dot_general": Sample({"lhs": ARITH}, _dot_general),
    "convolution": Sample({"input": NUMERIC}, _convolution),
    "gather": Sample({"operand": ANY, "start_indices": INT}, _gather),
    "scatter": Sample({"operand": ANY, "scatter_indices": INT}, _scatter),
    "rng_bit_generator": Sample({"state": ("ui64",), "bits": UNSIGNED}, _rng_bit_generator),
    "optimization_barrier": Sample({"operands": ANY}, _optimization_barrier),
    **{n: Sample({"operand": ANY}, _collective(n)) for n in ("shard", "all_gather", "all_to_all", "collective_permute")},
    # (float8: XLA's CPU backend has no all-reduce of it)
    **{n: Sample({"operand": tuple(d for d in NUMERIC if d not in FLOAT8_DTYPES)}, _collective(n))
       for n in ("all_reduce", "reduce_scatter")},
}


def combos(axes: dict[str, tuple[str, ...]]):
    for types in itertools.product(*axes.values()):
        yield dict(zip(axes, types))


def make_cases(sample: Sample, types: dict[str, str]) -> list[Case]:
    return sample.make(np.random.default_rng(1234), **types)


def label(types: dict[str, str]) -> str:
    return ", ".join(f"{a}={t}" for a, t in types.items())


def _flat(operands):
    return [np.asarray(a) for o in operands for a in (o if isinstance(o, list) else [o])]


def operand_types(case: Case):
    return [[type_of(np.asarray(a)) for a in o] if isinstance(o, list) else type_of(np.asarray(o))
            for o in case.operands]


def run_cases(name: str, cases: list[Case]) -> list[list[list[np.ndarray]]]:
    """One module applying ``lazy.<name>`` per case, built, lowered, compiled and run.

    Each case runs on entry arguments; an op the canonicalizer folds also runs on
    the same values as constants, so the folded answer is checked as well.
    Returns, per case, the results of each way it ran."""
    inputs = [a for c in cases for a in _flat(c.operands)]
    ways = 2 if name in FOLDABLE else 1
    counts = []
    with new_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):

            @func.FuncOp.from_py_func(*(tensor_type(type_of(a)) for a in inputs), name="main")
            def main(*args):
                args, results = list(args), []
                for case in cases:
                    grouped, constants = [], []
                    for o in case.operands:
                        n = len(o) if isinstance(o, list) else 1
                        grouped.append(args[:n] if isinstance(o, list) else args[0])
                        if ways == 2:  # (a variadic group of several shapes is no one array)
                            constants.append(create("constant", value=np.asarray(o)).result)
                        args = args[n:]
                    for operands in (grouped, constants)[:ways]:
                        op = create(name, *operands, **case.kwargs)
                        counts.append(len(op.results))
                        results.extend(op.results)
                return results

        assert module.operation.verify()
        compiler.lower(module)  # verifies after every pass, the StableHLO included
        assert "lazy." not in str(module)
        outputs = compiler.compile_stablehlo(module).run_numpy(inputs)
    per_op = []
    for n in counts:
        per_op.append(outputs[:n])
        outputs = outputs[n:]
    return [per_op[i:i + ways] for i in range(0, len(per_op), ways)]


def check_case(case: Case, out: list[np.ndarray], what: str) -> None:
    if case.check is not None:
        case.check(out, case)
    if case.want is None:
        assert case.check is not None, f"{what}: a case needs a reference or a check"
        return
    wants = case.want()
    assert len(out) == len(wants)
    for got, want in zip(out, wants):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape, want.dtype, want.shape)
        dtype = type_of(want).dtype
        if is_complex(dtype):
            part = real_dtype(dtype)
            if case.exact:
                np.testing.assert_array_equal(got, want, err_msg=what)
            else:
                np.testing.assert_allclose(got, want, rtol=TOL[part], atol=TOL[part], err_msg=what)
        elif not is_float(dtype):
            np.testing.assert_array_equal(got, want, err_msg=what)
        elif case.exact:  # in f64: NumPy's NaN test does not know bf16
            np.testing.assert_array_equal(got.astype(F64), want.astype(F64), err_msg=what)
        else:
            np.testing.assert_allclose(got.astype(F64), want.astype(F64), rtol=TOL[dtype], atol=TOL[dtype],
                                       err_msg=what)


def lowering_failure(name: str, cases: list[Case]) -> str | None:
    """Why ``cases`` fail to build, lower, compile or run: the error's first diagnostic line."""
    try:
        run_cases(name, cases)
    except Exception as e:  # noqa: BLE001 - any failure of the stack is what is looked for
        lines = str(e).strip().splitlines() or [""]
        return f"{type(e).__name__}: " + next((ln.strip() for ln in lines if "error:" in ln), lines[0])
    return None


# The dialect's own ops: those whose rule its package declares (other test
# files define ops of their own at import, before this file is collected).
BUILTIN = [spec.name for spec in OPS.values() if spec.rule.__module__.startswith("lazycore.dialect.")]


@pytest.mark.parametrize("name", BUILTIN)
def test_op(name):
    """Refused types raise ShapeError; every accepted combination builds, lowers, runs and matches NumPy."""
    sample = SAMPLES.get(name) or fold_sample(spec_of(name))
    if sample is None:
        pytest.fail(f"lazy.{name} has no sample in tests/test_op_table.py SAMPLES: add one, with the element "
                    "types its rule accepts and a NumPy reference")
    check_sample(name, sample)


def check_sample(name: str, sample: Sample) -> None:
    spec = spec_of(name)
    problems = []
    for axis, accepted in sample.axes.items():
        others = {a: ts for a, ts in sample.axes.items() if a != axis}
        for dtype in sorted(set(DTYPES) - set(accepted)):
            for types in combos(others):
                types = {**types, axis: dtype}
                for case in make_cases(sample, types):
                    try:
                        spec.infer(*operand_types(case), **case.kwargs)
                    except ShapeError:
                        continue
                    problems.append(f"[{label(types)}] the rule accepts a type the sample says it refuses")
    runs = []  # (types, case)
    for types in combos(sample.axes):
        for case in make_cases(sample, types):
            if not case.refused:
                runs.append((types, case))
                continue
            with pytest.raises(ShapeError):
                spec.infer(*operand_types(case), **case.kwargs)
    try:
        outs = run_cases(name, [case for _, case in runs])
    except Exception:  # noqa: BLE001 - named per combination below
        outs = None
    if outs is None:
        # One module holds every combination: name each that fails on its own.
        failures = []
        for types in combos(sample.axes):
            why = lowering_failure(name, [c for t, c in runs if t == types])
            if why:
                failures.append(f"[{label(types)}] {why}")
        assert failures, f"lazy.{name}: the module of all combinations fails, but no combination alone"
        pytest.fail(f"lazy.{name}:\n" + "\n".join(problems + failures))
    for i, ((types, case), case_outs) in enumerate(zip(runs, outs)):
        for way, out in zip(("on arguments", "on constants"), case_outs):
            try:
                check_case(case, out, f"case {i} {way}")
            except AssertionError as e:
                problems.append(f"[{label(types)}] {way} {case.kwargs if 'value' not in case.kwargs else ''} {e}")
    if problems:
        pytest.fail(f"lazy.{name}:\n" + "\n".join(problems))


def test_samples_name_ops_of_the_table():
    assert set(SAMPLES) <= {spec.name for spec in OPS.values()}
    for name, sample in SAMPLES.items():
        for axis, types in sample.axes.items():
            assert set(types) <= set(DTYPES), (name, axis)


def test_element_names_are_what_mlir_prints():
    """from_mlir_type names common element types from their class (printing a
    type is slow): the names must be MLIR's own."""
    from lazycore.dialect.build import element_name, from_mlir_type
    from lazycore.dialect.mlir import ir
    from lazycore.dialect.build import new_context

    with new_context():
        for name in ["f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64",
                     "si8", "si32", "complex<f32>", "complex<f64>", "f8E4M3FN", "f8E5M2", "index"]:
            t = ir.Type.parse(name)
            assert element_name(t) == str(t) == name
        assert str(from_mlir_type(ir.Type.parse("tensor<2x0x3xui8>"))) == "tensor<2x0x3xui8>"


# --- the traits ------------------------------------------------------------------------------


def test_every_row_has_a_lowering_and_a_padding_decision():
    load_builtin_lowerings()
    problems = []
    for name in BUILTIN:
        spec = spec_of(name)
        if spec.full_name not in BUILTIN_LOWERINGS:
            problems.append(f"lazy.{name} has no lowering (passes/lowering/)")
        if spec.padding not in PADDING_KINDS:
            problems.append(f"lazy.{name} has no padding decision (padding= one of {', '.join(PADDING_KINDS)})")
        elif (padding.rule_for(name) is None) != (spec.padding == "refused"):
            problems.append(f"lazy.{name}: padding '{spec.padding}', but padding's rule is {padding.rule_for(name)}")
    own = {name for name in BUILTIN if spec_of(name).padding == "own"}
    if set(padding.OWN_RULES) != own:
        problems.append(f"padding's own rules {sorted(padding.OWN_RULES)} are not the rows saying 'own' {sorted(own)}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", [n for n in BUILTIN if spec_of(n).dtypes])
def test_elementwise_row_accepts_its_class(name):
    """The class an elementwise row names is what its rule accepts, and the result has the operands' shape."""
    spec = spec_of(name)
    shape = EXAMPLES[name].operands[0].shape
    for dtype in DTYPES:
        operands = [TensorType(shape, dtype)] * len(spec.operands)
        try:
            results = spec.infer(*operands)
        except ShapeError:
            assert not DTYPE_CLASSES[spec.dtypes](dtype), (name, dtype)
            continue
        assert DTYPE_CLASSES[spec.dtypes](dtype), (name, dtype)
        assert [r.shape for r in results] == [shape], (name, dtype)


# Combined left to right (accumulate), so that the positions added at the end
# change no rounding order (NumPy's sums are pairwise).
_COMBINERS = {"reduce_sum": np.add, "reduce_prod": np.multiply, "reduce_max": np.maximum, "reduce_min": np.minimum}


def _reduce_reference(name):
    if name in ARG:
        return lambda x: ARG[name](x, axis=-1)
    combine = _COMBINERS[name]
    return lambda x: combine.accumulate(x, axis=-1, dtype=x.dtype)[..., -1]


@pytest.mark.parametrize("name", [n for n in BUILTIN if spec_of(n).identity])
def test_reduction_identity_changes_nothing(name):
    """Positions holding the row's identity, after the others (where padding
    puts them), leave every reduction of a row as it was: NaN, infinities and
    the type's extremes among the values."""
    spec = spec_of(name)
    rng = np.random.default_rng(7)
    reduce = _reduce_reference(name)
    for dtype in SAMPLES[name].axes["operand"]:
        x = with_extremes(small(rng, (4, 6), dtype, -3, 3))
        if is_float(dtype):
            x[1, :3] = [np.nan, np.inf, -np.inf]
            x[2, :] = -np.inf  # a row of the lowest float
        wide = x.astype(F64) if is_float(dtype) else x
        fill = identity_value(spec.identity, dtype)
        padded = np.concatenate([x, np.broadcast_to(fill, (4, 3))], axis=-1)
        padded = padded.astype(F64) if is_float(dtype) else padded
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(reduce(padded), reduce(wide), err_msg=f"{name} {dtype}")


# The derived sample on rows that have samples of their own: it runs and
# holds for unary and binary rows, integral, real and complex classes.
@pytest.mark.parametrize("name", ["neg", "exp", "logistic", "div", "maximum", "atan2", "xor"])
def test_fold_sample(name):
    check_sample(name, fold_sample(spec_of(name)))
