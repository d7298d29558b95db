"""Lowerings of the indexing family: one to one onto gather and scatter."""

from __future__ import annotations

from lazycore.dialect import TensorType, attr
from lazycore.dialect.mlir import stablehlo

from . import hlo
from .registry import lowering


# StableHLO's dimension-number fields and the lazy attributes that hold them
_GATHER_DIMS = {name: name for name in (
    "offset_dims", "collapsed_slice_dims", "operand_batching_dims", "start_indices_batching_dims",
    "start_index_map", "index_vector_dim")}
_SCATTER_DIMS = {name: name for name in (
    "update_window_dims", "inserted_window_dims", "input_batching_dims", "scatter_indices_batching_dims",
    "index_vector_dim")} | {"scattered_dims_to_operand_dims": "scatter_dims_to_operand_dims"}


@lowering("gather")
def _gather(op, rewriter):
    dims = hlo.dimension_numbers(stablehlo.GatherDimensionNumbers, op, _GATHER_DIMS)
    return hlo.value(
        "gather",
        list(op.operands),
        op.results[0].type,
        dimension_numbers=dims,
        slice_sizes=op.attributes["slice_sizes"],
        indices_are_sorted=op.attributes["indices_are_sorted"],
    )


def _combiner(mode: str):
    """The scatter body: how an update meets the value already in place."""
    if mode == "replace":
        return lambda current, update: [update]
    name = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}[mode]
    return lambda current, update: [hlo.binary(name, current, update)]


@lowering("scatter")
def _scatter(op, rewriter):
    dims = hlo.dimension_numbers(stablehlo.ScatterDimensionNumbers, op, _SCATTER_DIMS)
    scalar = TensorType((), hlo.type_of(op.operands[0]).dtype)
    return hlo.with_body(
        "scatter",
        list(op.operands),
        op.results[0].type,
        [scalar, scalar],
        _combiner(attr(op, "mode")),
        scatter_dimension_numbers=dims,
    ).result
