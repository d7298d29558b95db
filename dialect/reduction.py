"""Reductions: sum, max, min, prod over a set of dims, and argmax/argmin.

Reduced dims are removed from the shape (no keepdims: a frontend that wants
them reshapes afterwards), so the op stays a plain StableHLO reduce.
"""

from __future__ import annotations

from .rules import check_dims, require_dtype
from .spec import OpSpec, define
from .types import ShapeError, TensorType, check_dtype

# name: (accepted element-type class, identity). Sum and product of booleans
# have no single obvious meaning (count? any?), so frontends convert first;
# max/min of booleans are any/all.
_REDUCE_ROWS = {
    "reduce_sum": ("numeric or complex", "zero"),
    "reduce_max": ("ordered", "low"),
    "reduce_min": ("ordered", "high"),
    "reduce_prod": ("numeric or complex", "one"),
}
REDUCE = {name: klass for name, (klass, _) in _REDUCE_ROWS.items()}
"""Reduction name -> the element-type class it accepts."""


def drop_dims(shape: tuple[int, ...], dims) -> tuple[int, ...]:
    dropped = set(dims)
    return tuple(d for i, d in enumerate(shape) if i not in dropped)


def _reduce_rule(klass: str):
    def rule(x: TensorType, *, dims):
        require_dtype("operand", x, klass)
        dims = check_dims(dims, x.rank)
        return TensorType(drop_dims(x.shape, dims), x.dtype)

    # The reference (docs/dialect.md) shows each row's rule by its docstring.
    rule.__doc__ = (
        f"The operand has {klass} element type; ``dims`` are distinct dimensions of it. "
        "The result is the operand's shape without ``dims``, of the operand's element type."
    )
    return rule


for _name, (_klass, _identity) in _REDUCE_ROWS.items():
    define(OpSpec(_name, ("operand",), _reduce_rule(_klass), attrs={"dims": "i64[]"}, identity=_identity,
                  summary=f"{_name.removeprefix('reduce_')} over dims, which are removed from the shape"))


def _arg_rule(x: TensorType, *, dim, dtype):
    """``dim`` is a non-empty dimension of the operand. The result is the
    operand's shape without ``dim``, of the integer element type ``dtype``
    its type declares. Complex numbers have no order."""
    require_dtype("operand", x, "ordered")
    check_dims([dim], x.rank, "dim")
    if x.shape[dim] == 0:
        # NumPy raises here too: an empty dimension has no first extremum.
        raise ShapeError(f"dim {dim} is empty in {x}: an arg-reduction needs at least one element")
    require_dtype("result", TensorType((), check_dtype(dtype)), "int")
    return TensorType(drop_dims(x.shape, [dim]), dtype)


# Their identity is the far end of the type: masked positions come after the
# valid ones, so holding it, none of them is ever the first extremum.
for _name, _identity in (("argmax", "low"), ("argmin", "high")):
    define(OpSpec(_name, ("operand",), _arg_rule, attrs={"dim": "i64"}, result_params=("dtype",), identity=_identity,
                  summary=f"index of the first {_name[3:]} along dim (NaN counts as the extreme, "
                          "as in NumPy); dim is removed; the result dtype is an integer type"))

def _sort_rule(x: TensorType, *, dim, descending, dtype):
    """``dim`` is a dimension of the operand (rank 1 or more); ``values`` has
    the operand's type and ``indices`` its shape, of the integer element type
    ``dtype`` its type declares. Complex numbers have no order."""
    require_dtype("operand", x, "ordered")
    if x.rank == 0:
        raise ShapeError(f"sort needs an operand of rank 1 or more, got {x}")
    check_dims([dim], x.rank, "dim")
    require_dtype("indices", TensorType((), check_dtype(dtype)), "int")
    return x, TensorType(x.shape, dtype)


define(OpSpec("sort", ("operand",), _sort_rule, attrs={"dim": "i64", "descending": "bool"},
              results=("values", "indices"), result_params=("dtype",), params_from="indices", padding="refused",
              summary="the operand sorted along dim, stably (equal elements keep their order; NaN after every "
                      "number, before every number when descending), and the position along dim each value "
                      "came from, as the integer dtype"))

__all__ = ["REDUCE", "drop_dims"]
