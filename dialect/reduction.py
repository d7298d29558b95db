"""Reductions: sum, max, min, prod over a set of dims, and argmax/argmin.

Reduced dims are removed from the shape (no keepdims: a frontend that wants
them reshapes afterwards), so the op stays a plain StableHLO reduce.
"""

from __future__ import annotations

from .rules import check_dims, require_dtype
from .spec import OpSpec, define
from .types import ShapeError, TensorType, check_dtype

# name -> accepted element-type class. Sum and product of booleans have no
# single obvious meaning (count? any?), so frontends convert first; max/min of
# booleans are any/all.
REDUCE = {
    "reduce_sum": "numeric or complex",
    "reduce_max": "ordered",
    "reduce_min": "ordered",
    "reduce_prod": "numeric or complex",
}


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


for _name, _klass in REDUCE.items():
    define(OpSpec(_name, ("operand",), _reduce_rule(_klass), attrs={"dims": "i64[]"},
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


for _name in ("argmax", "argmin"):
    define(OpSpec(_name, ("operand",), _arg_rule, attrs={"dim": "i64"}, result_params=("dtype",),
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
              results=("values", "indices"), result_params=("dtype",), params_from="indices",
              summary="the operand sorted along dim, stably (equal elements keep their order; NaN after every "
                      "number, before every number when descending), and the position along dim each value "
                      "came from, as the integer dtype"))

__all__ = ["REDUCE", "drop_dims"]
