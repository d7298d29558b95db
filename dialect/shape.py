"""Shape-manipulation ops: broadcast, reshape, permute, slices, concatenate, pad, reverse.

Each op has the semantics of the StableHLO op it lowers to (named in its
docstring), so that the rule here, the verifier and XLA agree on every shape.
None of them changes the element type.
"""

from __future__ import annotations

from .rules import check_dims, check_len, check_permutation, check_shape, require_dtype, require_rank
from .spec import op
from .types import ShapeError, TensorType


@op("broadcast_in_dim", ("operand",), attrs={"dims": "i64[]"}, result_params=("shape",), padding="own")
def _broadcast_in_dim(x: TensorType, *, dims, shape):
    """stablehlo.broadcast_in_dim: operand dim i becomes result dim dims[i]."""
    shape = check_shape(shape)
    dims = check_len(dims, x.rank, "dims")
    check_dims(dims, len(shape), "dims")
    for i, (d, size) in enumerate(zip(dims, x.shape)):
        if size not in (1, shape[d]):
            raise ShapeError(
                f"operand dim {i} of size {size} maps to result dim {d} of size {shape[d]}; "
                f"it must be 1 or equal to it"
            )
    return TensorType(shape, x.dtype)


@op("reshape", ("operand",), result_params=("shape",), padding="own")
def _reshape(x: TensorType, *, shape):
    """stablehlo.reshape: same elements in row-major order, new shape."""
    result = TensorType(check_shape(shape), x.dtype)
    if result.size != x.size:
        raise ShapeError(
            f"reshape must keep the element count: {x} has {x.size} elements, "
            f"shape {list(result.shape)} has {result.size}"
        )
    return result


@op("permute", ("operand",), attrs={"dims": "i64[]"}, padding="own")
def _permute(x: TensorType, *, dims):
    """stablehlo.transpose: result dim i is operand dim dims[i]."""
    dims = check_permutation(dims, x.rank, "dims")
    return TensorType(tuple(x.shape[d] for d in dims), x.dtype)


@op("slice", ("operand",), attrs={"start": "i64[]", "limit": "i64[]", "strides": "i64[]"}, padding="own")
def _slice(x: TensorType, *, start, limit, strides):
    """stablehlo.slice: elements start, start+stride, ... below limit, per dim."""
    start = check_len(start, x.rank, "start")
    limit = check_len(limit, x.rank, "limit")
    strides = check_len(strides, x.rank, "strides")
    shape = []
    for i, (b, e, s, n) in enumerate(zip(start, limit, strides, x.shape)):
        if s < 1:
            raise ShapeError(f"strides must be positive, got {list(strides)}")
        if not (0 <= b <= e <= n):
            raise ShapeError(f"dim {i} needs 0 <= start <= limit <= {n}, got start {b} and limit {e}")
        shape.append(-(-(e - b) // s))
    return TensorType(tuple(shape), x.dtype)


def _check_start_indices(indices, rank: int) -> None:
    """One rank-0 integer tensor per dimension, all of one type (as StableHLO asks)."""
    if len(indices) != rank:
        raise ShapeError(f"start_indices must have {rank} entries (one per dimension), got {len(indices)}")
    for i, t in enumerate(indices):
        require_rank(t, 0, f"start_indices[{i}]")
        require_dtype(f"start_indices[{i}]", t, "int")
    if len({t.dtype for t in indices}) > 1:
        raise ShapeError(f"start_indices must share one element type, got {', '.join(t.dtype for t in indices)}")


# (padding refuses a window at runtime start indices: where it lands in a padded
# dimension depends on values; its own rules make these ops, never pad them)
@op("dynamic_slice", ("operand", "start_indices*"), attrs={"sizes": "i64[]"}, padding="refused")
def _dynamic_slice(x: TensorType, start_indices, *, sizes):
    """stablehlo.dynamic_slice: a ``sizes`` window at runtime start indices.

    Starts are clamped to [0, dim - size], so the window always fits."""
    _check_start_indices(start_indices, x.rank)
    sizes = check_len(sizes, x.rank, "sizes")
    for i, (s, n) in enumerate(zip(sizes, x.shape)):
        if not (0 <= s <= n):
            raise ShapeError(f"sizes[{i}] = {s} must lie in [0, {n}], the operand's dim {i}")
    return TensorType(sizes, x.dtype)


@op("dynamic_update_slice", ("operand", "update", "start_indices*"), padding="refused")
def _dynamic_update_slice(x: TensorType, update: TensorType, start_indices):
    """stablehlo.dynamic_update_slice: ``update`` written at clamped start indices."""
    _check_start_indices(start_indices, x.rank)
    if update.dtype != x.dtype:
        raise ShapeError(f"update must have the operand's element type {x.dtype}, got {update.dtype}")
    require_rank(update, x.rank, "update")
    for i, (u, n) in enumerate(zip(update.shape, x.shape)):
        if u > n:
            raise ShapeError(f"update dim {i} of size {u} is larger than the operand's ({n})")
    return x


@op("concatenate", ("lhs", "rhs"), attrs={"dim": "i64"}, padding="own")
def _concatenate(lhs, rhs, *, dim):
    """stablehlo.concatenate of two inputs joined along ``dim``; other dims must match.

    Binary because IRDL gives all operands of a variadic group one type
    variable, so a variadic concatenate could not join different shapes.
    Frontends chain it; XLA flattens nested concatenates.
    """
    if not (0 <= dim < lhs.rank):
        raise ShapeError(f"dim {dim} out of range for rank {lhs.rank}")
    if lhs.dtype != rhs.dtype or lhs.rank != rhs.rank:
        raise ShapeError(f"inputs must share element type and rank, got {lhs} and {rhs}")
    for i, (a, b) in enumerate(zip(lhs.shape, rhs.shape)):
        if i != dim and a != b:
            raise ShapeError(f"inputs must agree on every dim but {dim}, got {lhs} and {rhs}")
    shape = list(lhs.shape)
    shape[dim] += rhs.shape[dim]
    return TensorType(tuple(shape), lhs.dtype)


@op("pad", ("operand", "padding_value"), attrs={"low": "i64[]", "high": "i64[]", "interior": "i64[]"}, padding="own")
def _pad(x: TensorType, padding_value: TensorType, *, low, high, interior):
    """stablehlo.pad: ``low``/``high`` edge padding (negative crops) and
    ``interior`` padding between elements, filled with ``padding_value``."""
    require_rank(padding_value, 0, "padding_value")
    if padding_value.dtype != x.dtype:
        raise ShapeError(f"padding_value must have the operand's element type {x.dtype}, got {padding_value.dtype}")
    low = check_len(low, x.rank, "low")
    high = check_len(high, x.rank, "high")
    interior = check_len(interior, x.rank, "interior")
    if any(p < 0 for p in interior):
        raise ShapeError(f"interior padding must be non-negative, got {list(interior)}")
    shape = []
    for i, (n, lo, hi, mid) in enumerate(zip(x.shape, low, high, interior)):
        size = lo + n + max(n - 1, 0) * mid + hi
        if size < 0:
            raise ShapeError(f"padding crops dim {i} to a negative size ({size})")
        shape.append(size)
    return TensorType(tuple(shape), x.dtype)


@op("reverse", ("operand",), attrs={"dims": "i64[]"}, padding="own")
def _reverse(x: TensorType, *, dims):
    """stablehlo.reverse: element order flipped along each of ``dims``."""
    check_dims(dims, x.rank, "dims")
    return x
