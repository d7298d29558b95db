"""Elementwise ops: constants, unary and binary math, comparisons, select, convert, bitcast_convert.

Like StableHLO, elementwise ops take operands of one type: no implicit
broadcasting or promotion. Frontends insert ``broadcast_in_dim``/``convert``.
"""

from __future__ import annotations

from .rules import check_shape, require_dtype, require_same
from .spec import define, op, OpSpec
from .types import BOOL_DTYPE, ShapeError, TensorType, check_dtype, to_numpy_dtype, type_of

# --- constants ---------------------------------------------------------------


@op("constant", attrs={"value": "dense"})
def _constant(*, value):
    """A dense constant; a splat (one repeated value) prints as dense<v>."""
    return type_of(value)


# --- unary -------------------------------------------------------------------

# name -> accepted element-type class
UNARY = {
    "neg": "numeric",
    "abs": "numeric",  # of an unsigned x: x
    "sign": "numeric",  # of an unsigned x: 0 or 1; of a float zero +0.0, of NaN NaN (NumPy's)
    "exp": "float",
    "log": "float",
    "log1p": "float",
    "expm1": "float",
    "tanh": "float",
    "logistic": "float",
    "sqrt": "float",
    "rsqrt": "float",
    "floor": "float",
    "ceil": "float",
    "round": "float",  # half to even, as torch.round and numpy.round
    "erf": "float",
    "sin": "float",
    "cos": "float",
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
    define(OpSpec(_name, ("operand",), _unary_rule(_klass, _name == "is_finite"),
                  summary=f"elementwise {_name}"))

# --- binary ------------------------------------------------------------------

BINARY = {
    "add": ("numeric", True),
    "sub": ("numeric", False),
    "mul": ("numeric", True),
    "div": ("numeric", False),  # integer division truncates toward zero; integer x / 0 is 0 (NumPy's)
    "rem": ("numeric", False),  # sign follows the dividend (C fmod); integer x rem 0 is 0 (NumPy's)
    "pow": ("numeric", False),  # integers wrap; x ** -n is 0 unless x is 1 or -1 (torch's; NumPy raises)
    "maximum": ("any", True),
    "minimum": ("any", True),
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
    """Elementwise comparison; i1 result. Floats compare as IEEE (NaN != NaN)."""
    if direction not in COMPARISON_DIRECTIONS:
        raise ShapeError(f"direction must be one of {', '.join(COMPARISON_DIRECTIONS)}, got '{direction}'")
    require_same(lhs, rhs)
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
    """Element type conversion (float->int truncates toward zero)."""
    return TensorType(x.shape, check_dtype(dtype))


@op("bitcast_convert", ("operand",), result_params=("dtype",))
def _bitcast_convert(x, *, dtype):
    """The same bits read as another element type of the same width (torch's
    ``view(dtype)``, NumPy's ``view``); i1 has no width in memory and is refused."""
    dtype = check_dtype(dtype)
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
