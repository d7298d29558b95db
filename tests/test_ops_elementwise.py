"""Every elementwise op, run through the real stack (lazy -> StableHLO -> PJRT) vs NumPy.

Each test builds a one-op program, runs it on random inputs and compares
values and dtype with NumPy's answer for the semantics the op table states
(integer div/rem truncate toward zero, round is half to even, ...).

Every unary and binary row of the op table is checked on every element type
its class accepts (:func:`test_row_on_every_type_of_its_class`), from one
line of :data:`REFERENCES`: the NumPy function that computes it and the
domain of its inputs. A new row needs that line and nothing else here; the
hand-written cases below add the edges (half-way rounding, erf's tails,
division by zero, conversions).
"""

import math

import ml_dtypes
import numpy as np
import pytest

from lazycore.runtime import compiler
from lazycore.dialect import OPS
from lazycore.dialect.elementwise import COMPARISON_DIRECTIONS
from lazycore.dialect.rules import DTYPE_CLASSES
from lazycore.dialect.types import DTYPES, TensorType, is_complex, is_float, is_unsigned, to_numpy_dtype, type_of
from _bits import BY_HAND  # (tests/ is on the path)
from isolated import run_isolated

SHAPE = (3, 5)


def ty(x) -> str:
    return str(x if isinstance(x, TensorType) else type_of(np.asarray(x)))


def one_op(name: str, inputs, result: str, attrs: str = "") -> list[np.ndarray]:
    """Run ``lazy.<name>`` on ``inputs`` (as the entry arguments) and return its result."""
    args = ", ".join(f"%a{i}: {ty(x)}" for i, x in enumerate(inputs))
    uses = ", ".join(f"%a{i}" for i in range(len(inputs)))
    in_types = ", ".join(ty(x) for x in inputs)
    attr_text = f" {{{attrs}}}" if attrs else ""
    text = f"""
func.func @main({args}) -> {result} {{
  %0 = "lazy.{name}"({uses}){attr_text} : ({in_types}) -> {result}
  return %0 : {result}
}}"""
    (out,) = compiler.run_module(text, list(inputs))
    return out


def check_exact(out, want):
    assert out.dtype == want.dtype, (out.dtype, want.dtype)
    np.testing.assert_array_equal(out, want)


def check_close(out, want, rtol=2e-6, atol=1e-6):
    assert out.dtype == want.dtype, (out.dtype, want.dtype)
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


# --- unary ---------------------------------------------------------------------

# name -> (input maker from rng, NumPy reference, exact?)
def _normal(rng, dtype=np.float32):
    return (rng.standard_normal(SHAPE) * 3).astype(dtype)


def _positive(rng, dtype=np.float32):
    return rng.uniform(0.1, 10.0, SHAPE).astype(dtype)


def _halves(rng, dtype=np.float32):
    # .5 cases decide between half-to-even and half-away-from-zero rounding.
    return (rng.integers(-8, 8, SHAPE) + 0.5).astype(dtype)


UNARY_FLOAT_CASES = {
    "neg": (_normal, np.negative, True),
    "abs": (_normal, np.abs, True),
    "sign": (lambda r: np.where(r.random(SHAPE) < 0.2, 0, _normal(r)).astype(np.float32), np.sign, True),
    "exp": (_normal, np.exp, False),
    "log": (_positive, np.log, False),
    "log1p": (lambda r: r.uniform(-0.9, 5.0, SHAPE).astype(np.float32), np.log1p, False),
    "expm1": (_normal, np.expm1, False),
    "tanh": (_normal, np.tanh, False),
    "logistic": (_normal, lambda x: (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype), False),
    "sqrt": (_positive, np.sqrt, False),
    "rsqrt": (_positive, lambda x: (1 / np.sqrt(x.astype(np.float64))).astype(x.dtype), False),
    "floor": (_normal, np.floor, True),
    "ceil": (_normal, np.ceil, True),
    "round": (_halves, np.round, True),
    "sin": (_normal, np.sin, False),
    "cos": (_normal, np.cos, False),
}


# CI: test_row_on_every_type_of_its_class[<name>] takes the inexact ones' path (lazy.<name> on f32, among its types,
# within 4e-6); the exact ones (neg, abs, sign, floor, ceil, round), checked bit for bit here only, stay
@pytest.mark.parametrize("name", [n if UNARY_FLOAT_CASES[n][2] else pytest.param(n, marks=BY_HAND)
                                  for n in sorted(UNARY_FLOAT_CASES)])
def test_unary_float(name, rng):
    make, ref, exact = UNARY_FLOAT_CASES[name]
    x = make(rng)
    out = one_op(name, [x], ty(x))
    (check_exact if exact else check_close)(out, ref(x))


def test_round_is_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997], dtype=np.float32)
    check_exact(one_op("round", [x], ty(x)), np.array([-2, -2, -0, 0, 2, 2, 4, 0], dtype=np.float32))


@pytest.mark.parametrize("name", ["neg", "abs", "sign"])
# CI: the int32 variants, and test_row_on_every_type_of_its_class[neg/abs/sign] on i8 and i64 (exact), take the
# int64 and int8 variants' path
@pytest.mark.parametrize("dtype", [np.int32, pytest.param(np.int64, marks=BY_HAND),
                                   pytest.param(np.int8, marks=BY_HAND)])
def test_unary_signed_int(name, dtype, rng):
    x = rng.integers(-50, 50, SHAPE).astype(dtype)
    check_exact(one_op(name, [x], ty(x)), {"neg": np.negative, "abs": np.abs, "sign": np.sign}[name](x))


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.uint8])
def test_not(dtype, rng):
    x = rng.integers(0, 2 if dtype == np.bool_ else 200, SHAPE).astype(dtype)
    want = np.logical_not(x) if dtype == np.bool_ else np.invert(x)
    check_exact(one_op("not", [x], ty(x)), want)


def test_is_finite():
    x = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 3e38], dtype=np.float32)
    check_exact(one_op("is_finite", [x], ty(TensorType(x.shape, "i1"))), np.isfinite(x))


def _erf_reference(x):
    return np.array([math.erf(float(v)) for v in x.reshape(-1)]).reshape(x.shape)


@pytest.mark.parametrize(
    "dtype, atol",
    [(np.float64, 1e-15), (np.float32, 4e-7), (np.float16, 1e-3), (ml_dtypes.bfloat16, 8e-3)],
)
def test_erf(dtype, atol, rng):
    # Dense over the range where erf is not yet +-1, plus the tails and specials.
    x = np.concatenate([rng.uniform(-6.5, 6.5, 2000), [0.0, -0.0, 1.0, -1.0, 0.9999, 1e-8, 20, -20, np.inf, -np.inf]])
    x = x.astype(dtype)
    out = one_op("erf", [x], ty(x))
    assert out.dtype == x.dtype
    want = _erf_reference(x.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=0, atol=atol)
    # erf is odd, so rounding must not break the symmetry.
    np.testing.assert_array_equal(one_op("erf", [-x], ty(x)), -out)


def test_erf_keeps_nan():
    x = np.array([np.nan, 0.5], dtype=np.float64)
    out = one_op("erf", [x], ty(x))
    assert np.isnan(out[0]) and out[1] == math.erf(0.5)


# --- binary --------------------------------------------------------------------

FLOAT_BINARY = {
    "add": (np.add, True),
    "sub": (np.subtract, True),
    "mul": (np.multiply, True),
    "div": (np.divide, True),
    "rem": (np.fmod, True),
    "maximum": (np.maximum, True),
    "minimum": (np.minimum, True),
    "atan2": (np.arctan2, False),
}


# CI: test_row_on_every_type_of_its_class[atan2] takes atan2's path (lazy.atan2 on f32 and f64, within 4e-6 and
# 1e-12; inexact here too); the exact ones stay
@pytest.mark.parametrize("name", [n if FLOAT_BINARY[n][1] else pytest.param(n, marks=BY_HAND)
                                  for n in sorted(FLOAT_BINARY)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_float(name, dtype, rng):
    ref, exact = FLOAT_BINARY[name]
    a, b = _normal(rng, dtype), _normal(rng, dtype)
    out = one_op(name, [a, b], ty(a))
    (check_exact if exact else check_close)(out, ref(a, b))


def test_pow_float(rng):
    a, b = _positive(rng), rng.uniform(-3, 3, SHAPE).astype(np.float32)
    check_close(one_op("pow", [a, b], ty(a)), np.power(a, b), rtol=1e-5)


def _trunc_div(a, b):
    q = np.abs(a) // np.abs(b)
    return (np.sign(a) * np.sign(b) * q).astype(a.dtype)


INT_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _trunc_div,  # toward zero, unlike NumPy's floor division
    "rem": np.fmod,  # sign of the dividend, unlike NumPy's %
    "maximum": np.maximum,
    "minimum": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
}


@pytest.mark.parametrize("name", sorted(INT_BINARY))
# CI: the int32 variants, and test_row_on_every_type_of_its_class[<name>] on i64 (exact, div and rem by signed
# divisors, truncating), take the int64 variants' path
@pytest.mark.parametrize("dtype", [np.int32, pytest.param(np.int64, marks=BY_HAND)])
def test_binary_signed_int(name, dtype, rng):
    a = rng.integers(-100, 100, SHAPE).astype(dtype)
    b = rng.integers(1, 9, SHAPE).astype(dtype) * rng.choice([-1, 1], SHAPE).astype(dtype)
    check_exact(one_op(name, [a, b], ty(a)), INT_BINARY[name](a, b))


def test_int_div_rem_truncate_toward_zero():
    a = np.array([7, -7, 7, -7, 0, 6], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, -3], dtype=np.int32)
    check_exact(one_op("div", [a, b], ty(a)), np.array([3, -3, -3, 3, 0, -2], dtype=np.int32))
    check_exact(one_op("rem", [a, b], ty(a)), np.array([1, -1, 1, -1, 0, 0], dtype=np.int32))


def divide_by_zero_everywhere():
    """Integer div and rem by zero on every integer type: the divisor as an
    argument, as a constant lazy-canonicalize folds, and as a constant only XLA
    sees (no lazy-canonicalize); each gives 0, NumPy's value."""
    a, b = np.array([7, -7, 0, 5, 1, 3]), np.array([0, 0, 0, 2, 1, -3])
    for dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        x, y = (np.abs(a), np.abs(b)) if dtype.startswith("u") else (a, b)
        x, y = x.astype(dtype), y.astype(dtype)
        t = ty(x)
        for name in ("div", "rem"):
            with np.errstate(all="ignore"):
                want = (x - np.fmod(x, y)) // y if name == "div" else np.fmod(x, y)
            assert (want[:3] == 0).all()
            on_argument = f"""
func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %r = "lazy.{name}"(%a, %b) : ({t}, {t}) -> {t}
  return %r : {t}
}}"""
            on_constant = f"""
func.func @main(%a: {t}) -> {t} {{
  %b = "lazy.constant"() {{value = dense<{y.tolist()}> : {t}}} : () -> {t}
  %r = "lazy.{name}"(%a, %b) : ({t}, {t}) -> {t}
  return %r : {t}
}}"""
            for text, inputs in ((on_argument, [x, y]), (on_constant, [x])):
                for pipeline in (compiler.DEFAULT_PIPELINE, "lazy-to-stablehlo"):
                    (out,) = compiler.run_module(text, inputs, pipeline=pipeline)
                    check_exact(out, want)


def test_int_division_by_zero_is_zero_and_never_reaches_xla():
    run_isolated(__file__, "divide_by_zero_everywhere")


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "rem", "maximum", "minimum", "and", "or", "xor"])
def test_binary_unsigned(name, rng):
    a = rng.integers(0, 250, SHAPE).astype(np.uint8)
    b = rng.integers(1, 250, SHAPE).astype(np.uint8)
    ref = {"div": np.floor_divide, "rem": np.remainder}.get(name) or INT_BINARY[name]
    check_exact(one_op(name, [a, b], ty(a)), ref(a, b))  # ui8 add/sub/mul wrap like NumPy


def test_pow_int(rng):
    a = rng.integers(-6, 6, SHAPE).astype(np.int32)
    b = rng.integers(0, 6, SHAPE).astype(np.int32)
    check_exact(one_op("pow", [a, b], ty(a)), np.power(a, b))


@pytest.mark.parametrize("name, ref", [("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor),
                                       ("maximum", np.maximum), ("minimum", np.minimum)])
def test_binary_bool(name, ref, rng):
    a, b = rng.random(SHAPE) < 0.5, rng.random(SHAPE) < 0.5
    check_exact(one_op(name, [a, b], ty(a)), ref(a, b))


# --- compare, select, convert ----------------------------------------------------

NUMPY_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
                 "GT": np.greater, "GE": np.greater_equal}


@pytest.mark.parametrize("direction", COMPARISON_DIRECTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32])
def test_compare(direction, dtype, rng):
    # Small integers so that EQ/NE see equal pairs; the float case adds NaN.
    a = rng.integers(0, 4, SHAPE).astype(dtype)
    b = rng.integers(0, 4, SHAPE).astype(dtype)
    if dtype == np.float32:
        a[0, 0] = b[0, 1] = np.nan
    out = one_op("compare", [a, b], ty(TensorType(SHAPE, "i1")), f'direction = "{direction}"')
    check_exact(out, NUMPY_COMPARE[direction](a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_select(dtype, rng):
    p = rng.random(SHAPE) < 0.5
    a, b = (rng.integers(0, 2 if dtype == np.bool_ else 100, SHAPE).astype(dtype) for _ in range(2))
    check_exact(one_op("select", [p, a, b], ty(a)), np.where(p, a, b))


CONVERSIONS = [
    (np.float32, np.int32),  # truncates toward zero
    (np.float64, np.int64),
    (np.int32, np.float32),
    (np.float32, np.float64),
    (np.float64, np.float16),
    (np.float32, ml_dtypes.bfloat16),
    (np.int64, np.int8),  # wraps, keeping the low bits
    (np.uint8, np.int32),
    (np.int32, np.bool_),  # nonzero -> true
    (np.float32, np.bool_),
    (np.bool_, np.float32),
    (np.bool_, np.int32),
]


@pytest.mark.parametrize("src, dst", CONVERSIONS, ids=lambda d: np.dtype(d).name)
def test_convert(src, dst, rng):
    if np.dtype(src) == np.bool_:
        x = rng.random(SHAPE) < 0.5
    elif np.issubdtype(src, np.floating):
        x = (rng.standard_normal(SHAPE) * 50).astype(src)
        x[0, :3] = [0.0, -2.7, 2.7]
    else:
        x = rng.integers(np.iinfo(src).min, np.iinfo(src).max, SHAPE, dtype=src, endpoint=True)
        x[0, 0] = 0
    out = one_op("convert", [x], ty(TensorType(SHAPE, type_of(np.empty(0, dst)).dtype)))
    check_exact(out, x.astype(dst))


# --- ops without operands ----------------------------------------------------------


def _no_operand_program(op_text: str, result: str) -> str:
    return f"""
func.func @main() -> {result} {{
  %0 = {op_text} : () -> {result}
  return %0 : {result}
}}"""


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["f32", "i32", "ui8", "f64"])
def test_iota(dim, dtype):
    shape = (2, 3, 4)
    t = str(TensorType(shape, dtype))
    (out,) = compiler.run_module(_no_operand_program(f'"lazy.iota"() {{dim = {dim}}}', t), [])
    want = np.broadcast_to(
        np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(3)]), shape
    ).astype(to_numpy_dtype(dtype))
    check_exact(out, want)


@pytest.mark.parametrize(
    "literal, want",
    [
        ("dense<[[1.5, -2.0], [0.25, 3.0]]> : tensor<2x2xf32>", np.array([[1.5, -2.0], [0.25, 3.0]], np.float32)),
        ("dense<7> : tensor<3xi64>", np.full(3, 7, np.int64)),
        ("dense<[true, false, true]> : tensor<3xi1>", np.array([True, False, True])),
        ("dense<-3> : tensor<2x2xi8>", np.full((2, 2), -3, np.int8)),
        ("dense<2.5> : tensor<2xbf16>", np.full(2, 2.5, ml_dtypes.bfloat16)),
    ],
)
def test_constant(literal, want):
    t = literal.rsplit(":", 1)[1].strip()
    (out,) = compiler.run_module(_no_operand_program(f'"lazy.constant"() {{value = {literal}}}', t), [])
    check_exact(out, want)


# --- every unary and binary row, on every type of its class, from the op table ---------------------


def _trunc_div_or_divide(a, b):
    if a.dtype.kind in "iu":
        return _trunc_div(a, b)
    return np.divide(a, b)


# name -> (NumPy reference, domain of the inputs: a key of DOMAINS). Floats
# are computed in float64 (complex128) and rounded once to the result type;
# integers in their own type, wrapping as the op does.
REFERENCES = {
    "neg": (np.negative, "real"),
    "abs": (np.abs, "real"),
    "sign": (np.sign, "real"),
    "exp": (np.exp, "real"),
    "exp_sleef": (np.exp, "real"),  # within an ulp (its bits: tests/torch/test_exp_sleef.py)
    "exp_vml": (np.exp, "real"),  # within an ulp (its bits: tests/torch/test_exp_vml32.py)
    "log": (np.log, "positive"),
    "log_sleef": (np.log, "positive"),  # within an ulp (its bits: tests/torch/test_log_sleef.py)
    "log1p": (np.log1p, "above -1"),
    "expm1": (np.expm1, "real"),
    "tanh": (np.tanh, "real"),
    "logistic": (lambda x: 1 / (1 + np.exp(-x)), "real"),
    "sqrt": (np.sqrt, "positive"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "positive"),
    "floor": (np.floor, "real"),
    "ceil": (np.ceil, "real"),
    "round": (np.rint, "halves"),  # half to even
    "erf": (np.vectorize(math.erf, otypes=[np.float64]), "real"),
    "sin": (np.sin, "real"),
    "cos": (np.cos, "real"),
    "not": (np.invert, "real"),  # logical on i1, bitwise on integers
    "is_finite": (np.isfinite, "real"),
    "real": (np.real, "real"),
    "imag": (np.imag, "real"),
    "add": (np.add, "real"),
    "sub": (np.subtract, "real"),
    "mul": (np.multiply, "real"),
    "div": (_trunc_div_or_divide, "divisor"),  # integers truncate toward zero
    "rem": (np.fmod, "divisor"),  # the sign of the dividend
    "pow": (np.power, "power"),
    "maximum": (np.maximum, "real"),
    "minimum": (np.minimum, "real"),
    "atan2": (np.arctan2, "real"),
    "and": (np.bitwise_and, "real"),
    "or": (np.bitwise_or, "real"),
    "xor": (np.bitwise_xor, "real"),
    "shift_left": (np.left_shift, "shift"),
    "shift_right": (np.right_shift, "shift"),
}


def _reals(rng, dtype, low, high):
    """Values in [low, high) of ``dtype`` (a lazy element type name)."""
    if dtype == "i1":
        return rng.random(SHAPE) < 0.5
    dt = to_numpy_dtype(dtype)
    if is_float(dtype):
        return rng.uniform(low, high, SHAPE).astype(dt)
    if is_unsigned(dtype):
        low, high = max(low, 0), max(high, 1)
    return rng.integers(math.floor(low), math.ceil(high), SHAPE).astype(dt)


def _values(rng, dtype, low, high, imag=(-2, 2)):
    if is_complex(dtype):
        part = dtype[len("complex<"):-1]
        return (_reals(rng, part, low, high) + 1j * _reals(rng, part, *imag)).astype(to_numpy_dtype(dtype))
    return _reals(rng, dtype, low, high)


def _divisor(rng, dtype):
    if dtype == "i1":
        return np.ones(SHAPE, bool)
    signs = 1 if is_unsigned(dtype) else rng.choice([-1, 1], SHAPE)
    if is_float(dtype) or is_complex(dtype):
        return (_values(rng, dtype, 0.5, 3) * signs).astype(to_numpy_dtype(dtype))
    return (_values(rng, dtype, 1, 10) * signs).astype(to_numpy_dtype(dtype))


def _halves(rng, dtype):
    if is_float(dtype):
        return (rng.integers(-8, 8, SHAPE) + 0.5).astype(to_numpy_dtype(dtype))
    return _values(rng, dtype, -50, 50)


# domain -> operand index -> inputs of that element type
DOMAINS = {
    "real": lambda rng, dtype, i: _values(rng, dtype, -3, 3) if is_float(dtype) or is_complex(dtype)
    else _values(rng, dtype, -50, 50),
    "positive": lambda rng, dtype, i: _values(rng, dtype, 0.1, 8, imag=(-1, 1)),
    "above -1": lambda rng, dtype, i: _values(rng, dtype, -0.9, 5, imag=(-0.5, 0.5)),
    "halves": lambda rng, dtype, i: _halves(rng, dtype),
    "divisor": lambda rng, dtype, i: DOMAINS["real"](rng, dtype, i) if i == 0 else _divisor(rng, dtype),
    # counts from below 0 to past the type's width (0 left, the sign's fill right outside it)
    "shift": lambda rng, dtype, i: _values(rng, dtype, -50, 50) if i == 0 else
    rng.integers(-2, 8 * to_numpy_dtype(dtype).itemsize + 3, SHAPE).astype(to_numpy_dtype(dtype)),
    # no negative integer exponents (integer x ** -n is 0 unless x is 1 or -1; NumPy raises)
    "power": lambda rng, dtype, i: (_values(rng, dtype, 0.1, 4, imag=(-1, 1)) if i == 0 else
                                    _values(rng, dtype, -2, 2, imag=(-1, 1))) if is_float(dtype) or is_complex(dtype)
    else _values(rng, dtype, -6, 6) if i == 0 else _values(rng, dtype, 0, 6),
}

# The tolerance of a float result (relative and absolute): two units in the
# last place of the type, a little more where XLA approximates (f32 tanh ...).
TOLERANCE = {"f64": 1e-12, "f32": 4e-6, "f16": 2e-3, "bf16": 1.6e-2, "f8E4M3FN": 0.25, "f8E4M3FNUZ": 0.25,
             "f8E5M2": 0.5, "f8E5M2FNUZ": 0.5, "complex<f32>": 1e-5, "complex<f64>": 1e-12}

# Unary and binary rows of the dialect's own table (other test files define ops of their own).
ROWS = sorted(spec.name for spec in OPS.values() if spec.elementwise and spec.dtypes and len(spec.operands) in (1, 2)
              and spec.rule.__module__.startswith("lazycore.dialect."))


def _wide(x: np.ndarray) -> np.ndarray:
    dtype = type_of(x).dtype
    if is_complex(dtype):
        return x.astype(np.complex128)
    return x.astype(np.float64) if is_float(dtype) else x


def run_many(name: str, cases: list[list[np.ndarray]], results: list[str]) -> list[np.ndarray]:
    """``lazy.<name>`` on each case's inputs, all in one program (one compile per op)."""
    args, ops, outs, k = [], [], [], 0
    for i, (inputs, result) in enumerate(zip(cases, results)):
        names = []
        for x in inputs:
            args.append(f"%a{k}: {ty(x)}")
            names.append(f"%a{k}")
            k += 1
        ops.append(f'  %r{i} = "lazy.{name}"({", ".join(names)}) : ({", ".join(ty(x) for x in inputs)}) -> {result}')
        outs.append((f"%r{i}", result))
    text = (f"func.func @main({', '.join(args)}) -> ({', '.join(r for _, r in outs)}) {{\n" + "\n".join(ops)
            + f"\n  return {', '.join(v for v, _ in outs)} : {', '.join(r for _, r in outs)}\n}}")
    return compiler.run_module(text, [x for inputs in cases for x in inputs])


@pytest.mark.parametrize("name", ROWS)
def test_row_on_every_type_of_its_class(name):
    if name not in REFERENCES:
        pytest.fail(f"lazy.{name} has no reference: add one line to REFERENCES in tests/test_ops_elementwise.py, "
                    f'"{name}": (<the NumPy function computing it>, <a domain of DOMAINS: {", ".join(DOMAINS)}>)')
    ref, domain = REFERENCES[name]
    spec = OPS[f"lazy.{name}"]
    rng = np.random.default_rng(sum(map(ord, name)))
    dtypes = [d for d in DTYPES if DTYPE_CLASSES[spec.dtypes](d)]
    cases = [[DOMAINS[domain](rng, d, i) for i in range(len(spec.operands))] for d in dtypes]
    results = [spec.infer(*(type_of(x) for x in inputs))[0] for inputs in cases]
    outs = run_many(name, cases, [str(r) for r in results])
    problems = []
    for dtype, inputs, result, out in zip(dtypes, cases, results, outs):
        want_dt = to_numpy_dtype(result.dtype)
        with np.errstate(all="ignore"):
            want = np.asarray(ref(*map(_wide, inputs))).astype(want_dt)
        try:
            assert out.dtype == want_dt, f"dtype {out.dtype}, want {want_dt}"
            if is_float(result.dtype) or is_complex(result.dtype):
                tol = TOLERANCE[result.dtype]
                np.testing.assert_allclose(_wide(out), _wide(want), rtol=tol, atol=tol)
            else:
                np.testing.assert_array_equal(out, want)
        except AssertionError as e:
            problems.append(f"[{dtype}] {str(e).strip()}\n  inputs: {[x.tolist() for x in inputs]}")
    assert not problems, f"lazy.{name}:\n" + "\n".join(problems)


def test_references_name_rows_of_the_table():
    assert not set(REFERENCES) - set(ROWS), f"REFERENCES names no row: {sorted(set(REFERENCES) - set(ROWS))}"
    for name, (_, domain) in REFERENCES.items():
        assert domain in DOMAINS, (name, domain)
