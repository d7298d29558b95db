"""Building blocks shared by the shape/dtype rules of the op families."""

from __future__ import annotations

from .types import (
    DTYPES,
    ShapeError,
    TensorType,
    is_bool,
    is_complex,
    is_float,
    is_int,
)

# Element-type classes an op accepts, by name, so a row in the op table can
# say ``dtypes="float"`` instead of a predicate.
DTYPE_CLASSES = {
    "any": lambda d: d in DTYPES,
    "float": is_float,
    "numeric": lambda d: is_float(d) or is_int(d),  # real numbers
    # StableHLO's arithmetic (add ... power, dot, reduce) takes complex too;
    # its orderings (maximum, compare LT, argmax) do not.
    "numeric or complex": lambda d: is_float(d) or is_int(d) or is_complex(d),
    "float or complex": lambda d: is_float(d) or is_complex(d),  # exp, log, sqrt ...
    "ordered": lambda d: d in DTYPES and not is_complex(d),
    "complex": is_complex,
    "integral": lambda d: is_int(d) or is_bool(d),  # bitwise / logical ops
    "int": is_int,
    "bool": is_bool,
}


def require_dtype(what: str, t: TensorType, klass: str) -> None:
    if not DTYPE_CLASSES[klass](t.dtype):
        raise ShapeError(f"{what} must have {klass} element type, got {t.dtype}")


def require_same(a: TensorType, b: TensorType, what: str = "operands") -> None:
    if a != b:
        raise ShapeError(f"{what} must have the same type, got {a} and {b}")


def require_rank(t: TensorType, rank: int, what: str = "operand") -> None:
    if t.rank != rank:
        raise ShapeError(f"{what} must have rank {rank}, got {t}")


def check_shape(shape, what: str = "shape") -> tuple[int, ...]:
    shape = tuple(shape)
    for d in shape:
        if not isinstance(d, int) or d < 0:
            raise ShapeError(f"{what} must hold non-negative integers, got {list(shape)}")
    return shape


def check_dims(dims, rank: int, what: str = "dims", unique: bool = True) -> tuple[int, ...]:
    """Dimensions in [0, rank), optionally without repeats."""
    dims = tuple(dims)
    for d in dims:
        if not (0 <= d < rank):
            raise ShapeError(f"{what} {list(dims)} out of range for rank {rank}")
    if unique and len(set(dims)) != len(dims):
        raise ShapeError(f"{what} {list(dims)} has repeated dimensions")
    return dims


def check_permutation(perm, rank: int, what: str = "permutation") -> tuple[int, ...]:
    perm = tuple(perm)
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"{what} {list(perm)} is not a permutation of [0, {rank})")
    return perm


def check_len(values, n: int, what: str) -> tuple[int, ...]:
    values = tuple(values)
    if len(values) != n:
        raise ShapeError(f"{what} must have {n} entries (one per dimension), got {len(values)}")
    return values
