"""Lowerings of the linalg family (see lazycore.dialect.linalg)."""

from __future__ import annotations

import numpy as np

from lazycore.dialect import attr
from lazycore.dialect.mlir import ir, stablehlo

from . import hlo
from .registry import lowering


def _highest_precision() -> ir.ArrayAttr:
    # Eager torch and NumPy compute f32 products in full f32; XLA's default
    # precision may use TF32/bf16 passes on GPUs. Ask for the eager numbers.
    p = ir.Attribute.parse("#stablehlo<precision HIGHEST>")
    return ir.ArrayAttr.get([p, p])


@lowering("dot_general")
def _dot_general(op, rewriter):
    numbers = hlo.dimension_numbers(stablehlo.DotDimensionNumbers, op, {
        "lhs_batching_dimensions": "lhs_batch", "rhs_batching_dimensions": "rhs_batch",
        "lhs_contracting_dimensions": "lhs_contract", "rhs_contracting_dimensions": "rhs_contract"})
    return hlo.value(
        "dot_general", list(op.operands), op.results[0].type,
        dot_dimension_numbers=numbers, precision_config=_highest_precision(),
    )


@lowering("convolution")
def _convolution(op, rewriter):
    # lazy.convolution's layouts are fixed (N, C, spatial...), so the
    # dimension numbers are the identity ones for the operand rank.
    spatial = list(range(2, hlo.type_of(op.operands[0]).rank))
    numbers = stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=0, input_feature_dimension=1, input_spatial_dimensions=spatial,
        kernel_output_feature_dimension=0, kernel_input_feature_dimension=1,
        kernel_spatial_dimensions=spatial,
        output_batch_dimension=0, output_feature_dimension=1, output_spatial_dimensions=spatial,
    )
    padding = np.array(attr(op, "padding"), dtype=np.int64).reshape(len(spatial), 2)
    return hlo.value(
        "convolution", list(op.operands), op.results[0].type,
        window_strides=hlo.i64s(attr(op, "strides")),
        padding=ir.DenseElementsAttr.get(padding),
        lhs_dilation=hlo.i64s(attr(op, "lhs_dilation")),
        rhs_dilation=hlo.i64s(attr(op, "rhs_dilation")),
        dimension_numbers=numbers,
        feature_group_count=hlo.i64(attr(op, "groups")),
        batch_group_count=hlo.i64(1),
        precision_config=_highest_precision(),
    )
