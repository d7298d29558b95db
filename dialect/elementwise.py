"""Elementwise ops: constants, unary and binary math, comparisons, select, convert, bitcast_convert.

Like StableHLO, elementwise ops take operands of one type: no implicit
broadcasting or promotion. Frontends insert ``broadcast_in_dim``/``convert``.
"""

from __future__ import annotations

import numpy as np

from . import folds
from .rules import check_shape, require_dtype, require_same
from .spec import define, op, OpSpec
from .types import (BOOL_DTYPE, ShapeError, TensorType, check_dtype, complex_dtype, is_complex, real_dtype,
                    to_numpy_dtype, type_of)

# --- constants ---------------------------------------------------------------


@op("constant", attrs={"value": "dense"}, padding="own")
def _constant(*, value):
    """A dense constant; a splat (one repeated value) prints as dense<v>. A
    complex value is built as lazy.complex of two real constants."""
    return type_of(value)


# --- unary -------------------------------------------------------------------

# name: (accepted element-type class, how constant folding evaluates it)
_UNARY_ROWS = {
    "neg": ("numeric or complex", np.negative),
    "abs": ("numeric or complex", np.abs),  # of an unsigned x: x; of a complex x, its modulus (own rule below)
    "sign": ("numeric", np.sign),  # of an unsigned x: 0 or 1; of a float zero +0.0, of NaN NaN (NumPy's)
    "exp": ("float or complex", folds.via_f64(np.exp)),
    "log": ("float or complex", folds.via_f64(np.log)),  # complex: the principal branch, as NumPy and torch
    "log1p": ("float or complex", folds.via_f64(np.log1p)),
    "expm1": ("float or complex", folds.via_f64(np.expm1)),
    "tanh": ("float or complex", folds.via_f64(np.tanh)),
    "logistic": ("float", folds.logistic),
    "sqrt": ("float or complex", np.sqrt),  # correctly rounded, like IEEE sqrt
    "rsqrt": ("float or complex", folds.rsqrt),
    "floor": ("float", np.floor),
    "ceil": ("float", np.ceil),
    "round": ("float", np.rint),  # half to even, as torch.round and numpy.round
    "erf": ("float", folds.erf),
    "sin": ("float or complex", folds.via_f64(np.sin)),
    "cos": ("float or complex", folds.via_f64(np.cos)),
    "not": ("integral", folds.logical_not),
    "is_finite": ("float", np.isfinite),  # result is i1
}
UNARY = {name: klass for name, (klass, _) in _UNARY_ROWS.items()}
"""Unary op name -> the element-type class it accepts."""


def _unary_rule(klass: str, result_bool: bool):
    def rule(x: TensorType):
        require_dtype("operand", x, klass)
        return TensorType(x.shape, "i1") if result_bool else x

    # The reference (docs/dialect.md) shows each row's rule by its docstring.
    rule.__doc__ = f"The operand has {klass} element type; the result has its " + (
        "shape and element type i1." if result_bool else "type."
    )
    return rule


for _name, (_klass, _fold) in _UNARY_ROWS.items():
    if _name == "abs":
        continue
    define(OpSpec(_name, ("operand",), _unary_rule(_klass, _name == "is_finite"), summary=f"elementwise {_name}",
                  elementwise=True, dtypes=_klass, fold=_fold))

# exp with eager torch's vectorized float32 roundings (SLEEF's, folds.exp_sleef):
# one node where the torch frontend models an eager kernel's exp, instead of
# the ~40 nodes of SLEEF's steps (float32 logistic's CPU lowering takes them too).
define(OpSpec("exp_sleef", ("operand",), _unary_rule("float", False),
              summary="elementwise exp as eager torch's vectorized float32 exp rounds it (SLEEF's expf_u10); "
                      "float16/bfloat16/float8 in float32, float64 as eager's torch.exp (MKL VML's vdExp, "
                      "dialect/exp_f64.py)",
              elementwise=True, dtypes="float", fold=folds.exp_sleef))

# log with SLEEF's float32 roundings (logf_u10, dialect/log_f32.py): one node where
# the torch frontend models eager's log_softmax kernel, instead of ~109 nodes of its steps
define(OpSpec("log_sleef", ("operand",), _unary_rule("float", False),
              summary="elementwise log as eager torch's vectorized float32 kernels round it (SLEEF's logf_u10, "
                      "dialect/log_f32.py; not torch.log, which is MKL VML's vsLn); float16/bfloat16/float8 "
                      "in float32, float64 as lazy.log",
              elementwise=True, dtypes="float", fold=folds.log_sleef))

# exp as eager torch's torch.exp computes it on the CPU (MKL VML's vsExp / vdExp steps)
define(OpSpec("exp_vml", ("operand",), _unary_rule("float", False),
              summary="elementwise exp as eager torch's float32 torch.exp (MKL VML's vsExp, dialect/exp_f32.py) "
                      "and float64 one (vdExp, as lazy.exp_sleef's float64) compute it; narrower floats in float32",
              elementwise=True, dtypes="float", fold=folds.exp_vml))

# --- complex parts ---------------------------------------------------------


@op("abs", ("operand",), summary="elementwise abs", elementwise=True, dtypes=UNARY["abs"],
    fold=_UNARY_ROWS["abs"][1])
def _abs(x: TensorType):
    """The operand has numeric or complex element type; the result has its shape, and its
    type for a real operand, the float type of the parts for a complex one."""
    require_dtype("operand", x, UNARY["abs"])
    return TensorType(x.shape, real_dtype(x.dtype))


def _part_rule(part: str):
    def rule(x: TensorType):
        require_dtype("operand", x, "complex")
        return TensorType(x.shape, real_dtype(x.dtype))

    rule.__doc__ = (f"The {part} part of a complex operand; the result has its shape and the "
                    "float element type of its parts.")
    return rule


for _name in ("real", "imag"):
    define(OpSpec(_name, ("operand",), _part_rule(_name), summary=f"elementwise {_name} part",
                  elementwise=True, dtypes="complex"))


@op("complex", ("lhs", "rhs"), summary="elementwise lhs + i * rhs", elementwise=True)
def _complex(lhs: TensorType, rhs: TensorType):
    """Both operands have one type (no broadcasting), f32 or f64; the result has
    their shape and the complex type with parts of theirs."""
    require_same(lhs, rhs)
    require_dtype("operands", lhs, "float")
    if lhs.dtype not in ("f32", "f64"):
        raise ShapeError(f"operands must be f32 or f64 (the parts of a complex type), got {lhs.dtype}")
    return TensorType(lhs.shape, complex_dtype(lhs.dtype))


# --- binary ------------------------------------------------------------------

# name: (accepted element-type class, commutative, how constant folding evaluates it)
_BINARY_ROWS = {
    "add": ("numeric or complex", True, np.add),
    "sub": ("numeric or complex", False, np.subtract),
    "mul": ("numeric or complex", True, np.multiply),
    # integer division truncates toward zero; integer x / 0 is 0 (NumPy's)
    "div": ("numeric or complex", False, folds.div),
    "rem": ("numeric", False, folds.rem),  # sign follows the dividend (C fmod); integer x rem 0 is 0 (NumPy's)
    # integers wrap; x ** -n is 0 unless x is 1 or -1 (torch's; NumPy raises)
    "pow": ("numeric or complex", False, folds.power),
    "maximum": ("ordered", True, folds.maximum),
    "minimum": ("ordered", True, folds.minimum),
    "atan2": ("float", False, folds.atan2),
    "and": ("integral", True, np.bitwise_and),
    "or": ("integral", True, np.bitwise_or),
    "xor": ("integral", True, np.bitwise_xor),
    # a shift by a negative amount or by the width or more: 0 left, the sign's bits right (arithmetic for
    # a signed type, logical for an unsigned one), as torch's and NumPy's shifts (and StableHLO's) give
    "shift_left": ("int", False, np.left_shift),
    "shift_right": ("int", False, np.right_shift),
}
BINARY = {name: (klass, commutative) for name, (klass, commutative, _) in _BINARY_ROWS.items()}
"""Binary op name -> (the element-type class it accepts, whether it is commutative)."""


def _binary_rule(klass: str):
    def rule(lhs: TensorType, rhs: TensorType):
        require_same(lhs, rhs)
        require_dtype("operands", lhs, klass)
        return lhs

    rule.__doc__ = (
        f"Both operands have one type (no broadcasting, no promotion), of {klass} element type; "
        "the result has that type."
    )
    return rule


for _name, (_klass, _comm, _fold) in _BINARY_ROWS.items():
    define(OpSpec(_name, ("lhs", "rhs"), _binary_rule(_klass), commutative=_comm, summary=f"elementwise {_name}",
                  elementwise=True, dtypes=_klass, fold=_fold))

@op("fma", ("lhs", "rhs", "addend"), summary="elementwise fused multiply-add lhs * rhs + addend",
    elementwise=True, dtypes="float")
def _fma(lhs: TensorType, rhs: TensorType, addend: TensorType):
    """lhs * rhs + addend as one fused multiply-add, where eager computes one
    (``fmadd`` in torch's addcmul, add with alpha, lerp): all three operands
    have one float type, the result has it. The lowering is a product and a
    sum that ``lazy-keep-roundings`` leaves for the backend to contract (XLA's
    CPU backend does); every other product is rounded on its own. A type
    narrower than float32 computes in float32 and rounds once at the end, as
    eager's halves do. Not folded: NumPy has no fused multiply-add."""
    require_same(lhs, rhs, "lhs and rhs")
    require_same(lhs, addend, "lhs and addend")
    require_dtype("operands", lhs, "float")
    return lhs


# --- comparison, select, convert ---------------------------------------------

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


@op("compare", ("lhs", "rhs"), attrs={"direction": "str"}, elementwise=True, fold=folds.compare)
def _compare(lhs, rhs, *, direction):
    """Elementwise comparison; i1 result. Floats compare as IEEE (NaN != NaN);
    complex numbers have no order, only EQ and NE."""
    if direction not in COMPARISON_DIRECTIONS:
        raise ShapeError(f"direction must be one of {', '.join(COMPARISON_DIRECTIONS)}, got '{direction}'")
    require_same(lhs, rhs)
    if is_complex(lhs.dtype) and direction not in ("EQ", "NE"):
        raise ShapeError(f"complex operands have no order: direction must be EQ or NE, got '{direction}'")
    return TensorType(lhs.shape, "i1")


@op("select", ("pred", "on_true", "on_false"), elementwise=True, fold=np.where)
def _select(pred, on_true, on_false):
    """pred ? on_true : on_false, elementwise; pred is i1 of the same shape."""
    require_dtype("pred", pred, "bool")
    require_same(on_true, on_false, "on_true and on_false")
    if pred.shape != on_true.shape:
        raise ShapeError(f"pred shape {list(pred.shape)} must match operand shape {list(on_true.shape)}")
    return on_true


@op("convert", ("operand",), result_params=("dtype",), elementwise=True, fold=folds.convert)
def _convert(x, *, dtype):
    """Element type conversion (float->int truncates toward zero; float64 ->
    float16 or bfloat16 rounds once to nearest even, as NumPy's cast, not
    through float32; complex->real keeps the real part, real->complex has
    imaginary part 0)."""
    return TensorType(x.shape, check_dtype(dtype))


@op("bitcast_convert", ("operand",), result_params=("dtype",), elementwise=True, fold=folds.bitcast_convert)
def _bitcast_convert(x, *, dtype):
    """The same bits read as another element type of the same width (torch's
    ``view(dtype)``, NumPy's ``view``); i1 has no width in memory and is refused."""
    dtype = check_dtype(dtype)
    if is_complex(x.dtype) or is_complex(dtype):
        raise ShapeError(f"bitcast_convert of {x.dtype} to {dtype}: complex types are not reinterpreted")
    if BOOL_DTYPE in (x.dtype, dtype):
        raise ShapeError(f"bitcast_convert of {x.dtype} to {dtype}: i1 has no bit width to reinterpret")
    have, want = to_numpy_dtype(x.dtype).itemsize, to_numpy_dtype(dtype).itemsize
    if have != want:
        raise ShapeError(f"bitcast_convert of {x.dtype} to {dtype}: element widths differ ({8 * have} and {8 * want} bits)")
    return TensorType(x.shape, dtype)


@op("iota", result_params=("shape", "dtype"), attrs={"dim": "i64"}, padding="own")
def _iota(*, shape, dtype, dim):
    """Values 0, 1, 2, ... along ``dim``, constant along the others."""
    shape = check_shape(shape)
    if not (0 <= dim < len(shape)):
        raise ShapeError(f"dim {dim} out of range for rank {len(shape)}")
    require_dtype("result", TensorType(shape, check_dtype(dtype)), "numeric")
    return TensorType(shape, dtype)
