"""Elementwise ops: constants, unary and binary math, comparisons, select, convert, bitcast_convert.

Like StableHLO, elementwise ops take operands of one type: no implicit
broadcasting or promotion. Frontends insert ``broadcast_in_dim``/``convert``.
"""

from __future__ import annotations

from .rules import check_shape, require_dtype, require_same
from .spec import define, op, OpSpec
from .types import (BOOL_DTYPE, ShapeError, TensorType, check_dtype, complex_dtype, is_complex, real_dtype,
                    to_numpy_dtype, type_of)

# --- constants ---------------------------------------------------------------


@op("constant", attrs={"value": "dense"})
def _constant(*, value):
    """A dense constant; a splat (one repeated value) prints as dense<v>. A
    complex value is built as lazy.complex of two real constants."""
    return type_of(value)


# --- unary -------------------------------------------------------------------

# name -> accepted element-type class
UNARY = {
    "neg": "numeric or complex",
    "abs": "numeric or complex",  # of an unsigned x: x; of a complex x, its modulus (own rule below)
    "sign": "numeric",  # of an unsigned x: 0 or 1; of a float zero +0.0, of NaN NaN (NumPy's)
    "exp": "float or complex",
    "log": "float or complex",  # complex: the principal branch, as NumPy and torch
    "log1p": "float or complex",
    "expm1": "float or complex",
    "tanh": "float or complex",
    "logistic": "float",
    "sqrt": "float or complex",
    "rsqrt": "float or complex",
    "floor": "float",
    "ceil": "float",
    "round": "float",  # half to even, as torch.round and numpy.round
    "erf": "float",
    "sin": "float or complex",
    "cos": "float or complex",
    "not": "integral",
    "is_finite": "float",  # result is i1
}


def _unary_rule(klass: str, result_bool: bool):
    def rule(x: TensorType):
        require_dtype("operand", x, klass)
        return TensorType(x.shape, "i1") if result_bool else x

    # The reference (docs/dialect.md) shows each row's rule by its docstring.
    rule.__doc__ = f"The operand has {klass} element type; the result has its " + (
        "shape and element type i1." if result_bool else "type."
    )
    return rule


for _name, _klass in UNARY.items():
    if _name == "abs":
        continue
    define(OpSpec(_name, ("operand",), _unary_rule(_klass, _name == "is_finite"),
                  summary=f"elementwise {_name}"))

# --- complex parts ---------------------------------------------------------


@op("abs", ("operand",), summary="elementwise abs")
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
    define(OpSpec(_name, ("operand",), _part_rule(_name), summary=f"elementwise {_name} part"))


@op("complex", ("lhs", "rhs"), summary="elementwise lhs + i * rhs")
def _complex(lhs: TensorType, rhs: TensorType):
    """Both operands have one type (no broadcasting), f32 or f64; the result has
    their shape and the complex type with parts of theirs."""
    require_same(lhs, rhs)
    require_dtype("operands", lhs, "float")
    if lhs.dtype not in ("f32", "f64"):
        raise ShapeError(f"operands must be f32 or f64 (the parts of a complex type), got {lhs.dtype}")
    return TensorType(lhs.shape, complex_dtype(lhs.dtype))


# --- binary ------------------------------------------------------------------

BINARY = {
    "add": ("numeric or complex", True),
    "sub": ("numeric or complex", False),
    "mul": ("numeric or complex", True),
    "div": ("numeric or complex", False),  # integer division truncates toward zero; integer x / 0 is 0 (NumPy's)
    "rem": ("numeric", False),  # sign follows the dividend (C fmod); integer x rem 0 is 0 (NumPy's)
    "pow": ("numeric or complex", False),  # integers wrap; x ** -n is 0 unless x is 1 or -1 (torch's; NumPy raises)
    "maximum": ("ordered", True),
    "minimum": ("ordered", True),
    "atan2": ("float", False),
    "and": ("integral", True),
    "or": ("integral", True),
    "xor": ("integral", True),
}


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


for _name, (_klass, _comm) in BINARY.items():
    define(OpSpec(_name, ("lhs", "rhs"), _binary_rule(_klass), commutative=_comm,
                  summary=f"elementwise {_name}"))

# --- comparison, select, convert ---------------------------------------------

COMPARISON_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


@op("compare", ("lhs", "rhs"), attrs={"direction": "str"})
def _compare(lhs, rhs, *, direction):
    """Elementwise comparison; i1 result. Floats compare as IEEE (NaN != NaN);
    complex numbers have no order, only EQ and NE."""
    if direction not in COMPARISON_DIRECTIONS:
        raise ShapeError(f"direction must be one of {', '.join(COMPARISON_DIRECTIONS)}, got '{direction}'")
    require_same(lhs, rhs)
    if is_complex(lhs.dtype) and direction not in ("EQ", "NE"):
        raise ShapeError(f"complex operands have no order: direction must be EQ or NE, got '{direction}'")
    return TensorType(lhs.shape, "i1")


@op("select", ("pred", "on_true", "on_false"))
def _select(pred, on_true, on_false):
    """pred ? on_true : on_false, elementwise; pred is i1 of the same shape."""
    require_dtype("pred", pred, "bool")
    require_same(on_true, on_false, "on_true and on_false")
    if pred.shape != on_true.shape:
        raise ShapeError(f"pred shape {list(pred.shape)} must match operand shape {list(on_true.shape)}")
    return on_true


@op("convert", ("operand",), result_params=("dtype",))
def _convert(x, *, dtype):
    """Element type conversion (float->int truncates toward zero; complex->real
    keeps the real part, real->complex has imaginary part 0)."""
    return TensorType(x.shape, check_dtype(dtype))


@op("bitcast_convert", ("operand",), result_params=("dtype",))
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


@op("iota", result_params=("shape", "dtype"), attrs={"dim": "i64"})
def _iota(*, shape, dtype, dim):
    """Values 0, 1, 2, ... along ``dim``, constant along the others."""
    shape = check_shape(shape)
    if not (0 <= dim < len(shape)):
        raise ShapeError(f"dim {dim} out of range for rank {len(shape)}")
    require_dtype("result", TensorType(shape, check_dtype(dtype)), "numeric")
    return TensorType(shape, dtype)
