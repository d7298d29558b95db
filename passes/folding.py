"""Constant folding for ``lazy-canonicalize``.

Elementwise ops whose operands are all ``lazy.constant`` are evaluated with
NumPy under the dialect's semantics (integer division truncates toward zero,
``rem`` takes the dividend's sign, integer division or remainder by zero is
0) and replaced by a constant. Cases left to the backend (``INT_MIN / -1``,
negative integer powers, out-of-range float->int) and subnormals (XLA's CPU
backend flushes them) are left alone, so folding never changes a program's
numbers.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from lazycore.dialect import attr, create
from lazycore.dialect.types import is_complex, is_float8, to_numpy_dtype
from lazycore.mlir import ir

from .canonicalize import pattern, producer, replace, splat_constant, splat_value, type_of

# Non-splat constants are folded up to this many elements, so folding never
# bloats the module; splats of any size fold, costing one element.
FOLD_LIMIT = 16


def _via_f64(f):
    """Transcendentals: evaluated in f64 and rounded once to the element type."""
    return lambda x: np.asarray(f(x.astype(np.float64))).astype(x.dtype)


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


UNARY_FOLDS = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,  # +0.0 for -0.0, NaN for NaN: the op's
    "exp": _via_f64(np.exp),
    "log": _via_f64(np.log),
    "log1p": _via_f64(np.log1p),
    "expm1": _via_f64(np.expm1),
    "tanh": _via_f64(np.tanh),
    "logistic": _via_f64(lambda x: 1 / (1 + np.exp(-x))),
    "sqrt": np.sqrt,  # correctly rounded, like IEEE sqrt
    "rsqrt": _via_f64(lambda x: 1 / np.sqrt(x)),
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,  # half to even
    "erf": _via_f64(np.vectorize(math.erf, otypes=[np.float64])),
    "sin": _via_f64(np.sin),
    "cos": _via_f64(np.cos),
    "not": _not,
    "is_finite": np.isfinite,
}


def _int_division_defined(a, b) -> bool:
    """INT_MIN / -1 is left to the backend: it does not fold."""
    if np.issubdtype(a.dtype, np.signedinteger):
        return not np.any((a == np.iinfo(a.dtype).min) & (b == -1))
    return True


def _div(a, b):
    if np.issubdtype(a.dtype, np.floating):
        return np.divide(a, b)
    if not _int_division_defined(a, b):
        return None
    # Truncating division; a - fmod(a, b) is an exact multiple of b. NumPy's
    # integer loops give 0 for a zero divisor, as the op does.
    return (a - np.fmod(a, b)) // b


def _rem(a, b):
    if np.issubdtype(a.dtype, np.integer) and not _int_division_defined(a, b):
        return None
    return np.fmod(a, b)  # sign of the dividend; 0 for a zero divisor


def _pow(a, b):
    if np.issubdtype(a.dtype, np.floating):
        return _via_f64(lambda x: np.power(x, b.astype(np.float64)))(a)
    if np.any(b < 0):
        return None  # integer x ** -n is left to the backend
    return np.power(a, b)  # wraps like XLA's square-and-multiply


def _extremum(npf, prefer_negative_zero: bool):
    def f(a, b):
        if not np.issubdtype(a.dtype, np.floating):
            return npf(a, b)
        # IEEE: max(-0.0, +0.0) is +0.0 and min is -0.0, whatever the order;
        # NumPy returns whichever operand came first.
        tie = np.where(np.signbit(a) == prefer_negative_zero, a, b)
        return np.where(a == b, tie, npf(a, b))

    return f


BINARY_FOLDS = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _div,
    "rem": _rem,
    "pow": _pow,
    "maximum": _extremum(np.maximum, prefer_negative_zero=False),
    "minimum": _extremum(np.minimum, prefer_negative_zero=True),
    "atan2": lambda a, b: _via_f64(lambda x: np.arctan2(x, b.astype(np.float64)))(a),
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}

COMPARE_FOLDS = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
                 "GT": np.greater, "GE": np.greater_equal}


def _convert(x, dtype: np.dtype):
    if np.issubdtype(x.dtype, np.floating) and np.issubdtype(dtype, np.integer):
        # float -> int truncates; NaN and out-of-range values are the backend's call.
        info = np.iinfo(dtype)
        t = np.trunc(x.astype(np.float64))
        if np.any(np.isnan(t)) or np.any(t < info.min) or np.any(t > info.max):
            return None
    return x.astype(dtype)


def _evaluate(name: str, op, args, dtype: np.dtype):
    if name in UNARY_FOLDS:
        return UNARY_FOLDS[name](*args)
    if name in BINARY_FOLDS:
        return BINARY_FOLDS[name](*args)
    if name == "compare":
        return COMPARE_FOLDS[attr(op, "direction")](*args)
    if name == "select":
        return np.where(*args)
    if name == "convert":
        return _convert(args[0], dtype)
    if name == "bitcast_convert":
        return args[0].view(dtype)
    raise AssertionError(name)


FOLDABLE = tuple(UNARY_FOLDS) + tuple(BINARY_FOLDS) + ("compare", "select", "convert", "bitcast_convert")


def _has_subnormal(a: np.ndarray) -> bool:
    """XLA's CPU backend flushes subnormals to zero and NumPy does not: leave them be."""
    if a.dtype.kind != "f" and a.dtype != to_numpy_dtype("bf16"):
        return False
    wide = np.abs(a.astype(np.float64))
    return bool(np.any((wide > 0) & (wide < float(ml_dtypes.finfo(a.dtype).tiny))))


def constant_operand(v: ir.Value):
    """(array, is_splat) of a ``lazy.constant`` operand small or splat enough to fold."""
    o = producer(v, "constant")
    if o is None:
        return None
    scalar = splat_value(v)
    if scalar is not None:
        return np.asarray(scalar), True
    t = type_of(v)
    # NumPy cannot read bf16 out of an attribute, so only bf16 splats fold;
    # nor complex ones (the bindings refuse them), and those never fold.
    if t.size > FOLD_LIMIT or t.dtype == "bf16" or is_float8(t.dtype) or is_complex(t.dtype):
        return None
    return np.array(ir.DenseElementsAttr(o.attributes["value"])).reshape(t.shape), False


@pattern(*FOLDABLE)
def fold_constants(op, rewriter):
    """op(c1, ..., cn) -> c, evaluated with NumPy under the dialect's semantics

    For elementwise ops whose operands are all constants, each a splat or of
    at most FOLD_LIMIT elements. Cases left to the backend (``INT_MIN / -1``,
    float -> int overflow, ...) are not folded."""
    operands = []
    for v in op.operands:  # most ops have a non-constant operand: stop at the first
        o = constant_operand(v)
        if o is None or _has_subnormal(o[0]):
            return True
        operands.append(o)
    result = type_of(op.results[0])
    if is_complex(result.dtype):
        return True  # a real -> complex convert: left to the backend, as complex operands are
    dtype = to_numpy_dtype(result.dtype)
    with np.errstate(all="ignore"):
        value = _evaluate(op.operation.name.removeprefix("lazy."), op, [a for a, _ in operands], dtype)
        if value is None:
            return True
        value = np.asarray(value).astype(dtype)
    if _has_subnormal(value):
        return True
    with rewriter.ip, op.location:
        if all(splat for _, splat in operands):
            new = splat_constant(value.reshape(()), result)
        else:
            new = create("constant", value=np.broadcast_to(value, result.shape).copy()).result
    return replace(op, rewriter, new)
