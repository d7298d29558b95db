"""Lowerings of the linalg family (see lazycore.dialect.linalg)."""

from __future__ import annotations

import numpy as np

from lazycore.dialect import attr
from lazycore.dialect.types import to_numpy_dtype
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
    x, w = op.operands
    xt, wt = hlo.type_of(x), hlo.type_of(w)
    spatial = list(range(2, xt.rank))
    numbers = stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=0, input_feature_dimension=1, input_spatial_dimensions=spatial,
        kernel_output_feature_dimension=0, kernel_input_feature_dimension=1,
        kernel_spatial_dimensions=spatial,
        output_batch_dimension=0, output_feature_dimension=1, output_spatial_dimensions=spatial,
    )
    padding = np.array(attr(op, "padding"), dtype=np.int64).reshape(len(spatial), 2)
    strides, lhs_dil, rhs_dil = attr(op, "strides"), attr(op, "lhs_dilation"), attr(op, "rhs_dilation")
    groups = attr(op, "groups")
    if groups == 1 and xla_would_swap(xt.shape[2:], wt.shape[2:], padding, strides, lhs_dil, rhs_dil):
        x = _padded(x, padding, lhs_dil)
        padding, lhs_dil = np.zeros_like(padding), (1,) * len(spatial)
    return hlo.value(
        "convolution", [x, w], op.results[0].type,
        window_strides=hlo.i64s(strides),
        padding=ir.DenseElementsAttr.get(padding),
        lhs_dilation=hlo.i64s(lhs_dil),
        rhs_dilation=hlo.i64s(rhs_dil),
        dimension_numbers=numbers,
        feature_group_count=hlo.i64(groups),
        batch_group_count=hlo.i64(1),
        precision_config=_highest_precision(),
    )


# XLA's ConvOperandSwapper exchanges input and kernel when the kernel's
# spatial extent is larger than the input's (ResNet's last stage at small
# images: 3x3 kernels over 2x2 maps, forward and backward). The swapped
# convolution carries a window reversal and batch-last layouts that neither
# XLA's CPU convolution library nor its Eigen kernel take, so it runs as a
# naive loop: 65-70 ms for one 4x512x2x2 by 512x512x3x3 convolution where
# eager's oneDNN takes 7 ms (jax.jit's own conv and its gradient do the
# same). Padding the input explicitly first makes the input the larger
# operand, so XLA keeps the convolution as written (4 ms there). The rule
# below is the swapper's (xla/hlo/transforms/simplifiers/conv_operand_swapper.cc):
# dimensions where kernel and input are the same size and the window is plain
# (a pure contraction) do not count.
def xla_would_swap(in_sp, k_sp, padding, strides, lhs_dil, rhs_dil) -> bool:
    kernel_product = input_product = 1
    for i, (n, k) in enumerate(zip(in_sp, k_sp)):
        plain = padding[i][0] == 0 and padding[i][1] == 0 and rhs_dil[i] == 1
        if plain and n == k and lhs_dil[i] == 1 and strides[i] == 1:
            continue
        if plain and lhs_dil[i] == k and strides[i] == k - 1:
            continue
        kernel_product *= k
        one_by_full = (n == 1 and strides[i] == 1 and rhs_dil[i] == 1
                       and padding[i][0] == k - 1 and padding[i][1] == k - 1)
        input_product *= k if one_by_full else n
    return kernel_product > input_product


def _padded(x: ir.Value, padding, lhs_dil) -> ir.Value:
    """``x`` with the convolution's edge padding and base dilation applied by a ``stablehlo.pad``."""
    t = hlo.type_of(x)
    lead = [0] * (t.rank - len(padding))
    low = lead + [int(p[0]) for p in padding]
    high = lead + [int(p[1]) for p in padding]
    interior = lead + [int(d) - 1 for d in lhs_dil]
    shape = tuple(s + lo + hi + max(s - 1, 0) * it for s, lo, hi, it in zip(t.shape, low, high, interior))
    zero = hlo.constant(np.zeros((), dtype=to_numpy_dtype(t.dtype)))
    return hlo.value("pad", [x, zero], t._replace(shape=shape), edge_padding_low=hlo.i64s(low),
                     edge_padding_high=hlo.i64s(high), interior_padding=hlo.i64s(interior))
