"""Indexing ops: gather and scatter, with StableHLO's semantics and attributes.

Both ops are general enough to express every indexing pattern frontends need
(``take``/``index_select``, ``torch.gather``, embedding lookups, advanced
indexing, ``index_put``/``index_add``), so they mirror ``stablehlo.gather`` and
``stablehlo.scatter`` exactly; the rules below check the spec's constraints,
numbered as in https://openxla.org/stablehlo/spec, and give its result shape.
"""

from __future__ import annotations

from .rules import check_dims, require_dtype
from .spec import op
from .types import ShapeError, TensorType, is_bool

SCATTER_MODES = ("replace", "add", "mul", "max", "min")


def _sorted_unique(dims, rank: int, what: str) -> tuple[int, ...]:
    dims = check_dims(dims, rank, what)
    if list(dims) != sorted(dims):
        raise ShapeError(f"{what} {list(dims)} must be sorted")
    return dims


def _index_vector_size(indices: TensorType, index_vector_dim: int, what: str) -> int:
    """How many coordinates each index holds (an implicit trailing dim holds 1)."""
    if not (0 <= index_vector_dim <= indices.rank):
        raise ShapeError(f"index_vector_dim {index_vector_dim} out of range [0, {indices.rank}] for {what} {indices}")
    return indices.shape[index_vector_dim] if index_vector_dim < indices.rank else 1


def _check_batching(operand: TensorType, indices: TensorType, op_dims, idx_dims, index_vector_dim, names):
    """The batching dimensions of operand and indices pair up with equal sizes."""
    op_name, idx_name, idx_what = names
    idx_dims = check_dims(idx_dims, indices.rank, idx_name)
    if index_vector_dim in idx_dims:
        raise ShapeError(f"index_vector_dim {index_vector_dim} must not be one of {idx_name} {list(idx_dims)}")
    if len(op_dims) != len(idx_dims):
        raise ShapeError(f"{op_name} {list(op_dims)} and {idx_name} {list(idx_dims)} must have the same size")
    for o, i in zip(op_dims, idx_dims):
        if operand.shape[o] != indices.shape[i]:
            raise ShapeError(
                f"batching dimension sizes differ: operand dim {o} is {operand.shape[o]}, "
                f"{idx_what} dim {i} is {indices.shape[i]}"
            )


def _check_index_map(index_map, n_coords: int, batching, rank: int, what: str, size_rule: str) -> None:
    if len(index_map) != n_coords:
        raise ShapeError(f"{what} must have {size_rule} = {n_coords} entries, got {len(index_map)}")
    check_dims(tuple(index_map) + tuple(batching), rank, f"{what} ++ batching dims")


@op(
    "gather",
    ("operand", "start_indices"),
    attrs={
        "offset_dims": "i64[]",
        "collapsed_slice_dims": "i64[]",
        "operand_batching_dims": "i64[]",
        "start_indices_batching_dims": "i64[]",
        "start_index_map": "i64[]",
        "index_vector_dim": "i64",
        "slice_sizes": "i64[]",
        "indices_are_sorted": "bool",
    },
    padding="own",
)
def _gather(
    operand,
    start_indices,
    *,
    offset_dims,
    collapsed_slice_dims,
    operand_batching_dims,
    start_indices_batching_dims,
    start_index_map,
    index_vector_dim,
    slice_sizes,
    indices_are_sorted,
):
    """Slices of ``operand`` of size ``slice_sizes`` starting at ``start_indices``."""
    require_dtype("start_indices", start_indices, "int")
    n_coords = _index_vector_size(start_indices, index_vector_dim, "start_indices")  # C2
    if len(slice_sizes) != operand.rank:  # C20
        raise ShapeError(
            f"slice_sizes must have one entry per operand dimension ({operand.rank}), got {list(slice_sizes)}"
        )
    for d, (s, n) in enumerate(zip(slice_sizes, operand.shape)):  # C21
        if not (0 <= s <= n):
            raise ShapeError(f"slice_sizes[{d}] = {s} must be in [0, {n}] (operand dim {d})")
    collapsed = _sorted_unique(collapsed_slice_dims, operand.rank, "collapsed_slice_dims")  # C7, C8
    batching = _sorted_unique(operand_batching_dims, operand.rank, "operand_batching_dims")  # C10, C11
    dropped = check_dims(collapsed + batching, operand.rank, "collapsed_slice_dims ++ operand_batching_dims")  # C6
    for d in dropped:  # C9, C12
        if slice_sizes[d] > 1:
            raise ShapeError(f"slice_sizes[{d}] = {slice_sizes[d]} must be <= 1: dim {d} is collapsed or batching")
    if operand.rank != len(offset_dims) + len(dropped):  # C1
        raise ShapeError(
            f"operand rank {operand.rank} must equal size(offset_dims) + size(collapsed_slice_dims) "
            f"+ size(operand_batching_dims) = {len(offset_dims) + len(dropped)}"
        )
    _check_batching(operand, start_indices, batching, start_indices_batching_dims, index_vector_dim,
                    ("operand_batching_dims", "start_indices_batching_dims", "start_indices"))  # C13-C17
    _check_index_map(start_index_map, n_coords, batching, operand.rank, "start_index_map",
                     "the index vector size")  # C3, C18, C19

    batch_sizes = [n for d, n in enumerate(start_indices.shape) if d != index_vector_dim]
    offset_sizes = [s for d, s in enumerate(slice_sizes) if d not in dropped]
    rank = len(batch_sizes) + len(offset_sizes)
    offsets = _sorted_unique(offset_dims, rank, "offset_dims")  # C4, C5
    batch_iter, offset_iter = iter(batch_sizes), iter(offset_sizes)
    shape = tuple(next(offset_iter) if d in offsets else next(batch_iter) for d in range(rank))  # C22
    return TensorType(shape, operand.dtype)  # C23


@op(
    "scatter",
    ("operand", "scatter_indices", "updates"),
    attrs={
        "update_window_dims": "i64[]",
        "inserted_window_dims": "i64[]",
        "input_batching_dims": "i64[]",
        "scatter_indices_batching_dims": "i64[]",
        "scatter_dims_to_operand_dims": "i64[]",
        "index_vector_dim": "i64",
        "mode": "str",
    },
    padding="own",
)
def _scatter(
    operand,
    scatter_indices,
    updates,
    *,
    update_window_dims,
    inserted_window_dims,
    input_batching_dims,
    scatter_indices_batching_dims,
    scatter_dims_to_operand_dims,
    index_vector_dim,
    mode,
):
    """``operand`` with the windows of ``updates`` combined in at ``scatter_indices``.

    ``mode`` is how an update combines with the value already there:
    ``replace`` (the order among duplicate indices is unspecified), ``add``,
    ``mul``, ``max`` or ``min``.
    """
    if mode not in SCATTER_MODES:
        raise ShapeError(f"mode must be one of {', '.join(SCATTER_MODES)}, got '{mode}'")
    if mode in ("add", "mul") and is_bool(operand.dtype):
        raise ShapeError(f"mode '{mode}' needs a numeric operand, got {operand.dtype}")
    if mode in ("max", "min"):
        require_dtype("operand", operand, "ordered")  # complex numbers have no order
    require_dtype("scatter_indices", scatter_indices, "int")
    if updates.dtype != operand.dtype:  # C6
        raise ShapeError(f"updates element type {updates.dtype} must match operand element type {operand.dtype}")
    n_coords = _index_vector_size(scatter_indices, index_vector_dim, "scatter_indices")  # C22
    inserted = _sorted_unique(inserted_window_dims, operand.rank, "inserted_window_dims")  # C10, C11
    batching = _sorted_unique(input_batching_dims, operand.rank, "input_batching_dims")  # C12, C13
    dropped = check_dims(inserted + batching, operand.rank, "inserted_window_dims ++ input_batching_dims")  # C9
    if operand.rank != len(update_window_dims) + len(dropped):  # C2
        raise ShapeError(
            f"operand rank {operand.rank} must equal size(update_window_dims) + size(inserted_window_dims) "
            f"+ size(input_batching_dims) = {len(update_window_dims) + len(dropped)}"
        )
    _check_batching(operand, scatter_indices, batching, scatter_indices_batching_dims, index_vector_dim,
                    ("input_batching_dims", "scatter_indices_batching_dims", "scatter_indices"))  # C14-C18
    _check_index_map(scatter_dims_to_operand_dims, n_coords, batching, operand.rank,
                     "scatter_dims_to_operand_dims", "the index vector size")  # C19-C21

    scatter_sizes = [n for d, n in enumerate(scatter_indices.shape) if d != index_vector_dim]
    window_bounds = [n for d, n in enumerate(operand.shape) if d not in dropped]
    rank = len(scatter_sizes) + len(window_bounds)
    if updates.rank != rank:  # C4
        raise ShapeError(
            f"updates rank {updates.rank} must equal the scatter dims of scatter_indices ({len(scatter_sizes)}) "
            f"plus size(update_window_dims) ({len(window_bounds)})"
        )
    windows = _sorted_unique(update_window_dims, rank, "update_window_dims")  # C7, C8
    scatter_dims = [d for d in range(rank) if d not in windows]
    for d, n in zip(scatter_dims, scatter_sizes):  # C4
        if updates.shape[d] != n:
            raise ShapeError(f"updates dim {d} is {updates.shape[d]}, but scatter_indices give {n}")
    for d, bound in zip(windows, window_bounds):  # C4
        if updates.shape[d] > bound:
            raise ShapeError(f"updates window dim {d} is {updates.shape[d]}, larger than the operand's {bound}")
    return operand
