"""One example per op of the table, for the dialect reference (``docs/dialect.md``).

An example is the op's operand types and the keyword arguments
:func:`lazycore.dialect.create` takes (attributes as Python values, result
parameters). The reference builds the op from it, so its result types come
from the op's own rule, and prints it; ``tests/test_dialect_doc.py`` parses
every printed example back and verifies it. An op added to the table without
an example fails that test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .spec import OPS
from .types import TensorType


def t(text: str) -> TensorType:
    """``"2x3xf32"`` -> TensorType((2, 3), "f32"); ``"f32"`` is a scalar;
    ``"2xcomplex<f32>"`` is complex (its ``x`` is no dimension separator)."""
    head, sep, dtype = text.rpartition("complex<")
    *dims, real = head.split("x") if sep else text.split("x")
    dtype = sep + dtype if sep else real
    return TensorType(tuple(int(d) for d in dims if d), dtype)


@dataclass(frozen=True)
class Example:
    operands: tuple = ()
    """One TensorType per operand; a list of them for a variadic group."""
    kwargs: dict = field(default_factory=dict)


# Ops that only take integers (or booleans) get i32 operands, complex parts
# complex<f32> ones, the rest f32.
_SAMPLE_DTYPE = {"integral": "i32", "int": "i32", "bool": "i1", "complex": "complex<f32>"}


def _elementwise(spec) -> Example:
    """An elementwise op of one element-type class: operands 2x3 of a type of it."""
    return Example((t(f"2x3x{_SAMPLE_DTYPE.get(spec.dtypes, 'f32')}"),) * len(spec.operands))


# Elementwise rows of one element-type class get theirs from their traits;
# the others are written here.
_DERIVED = {spec.name: _elementwise(spec) for spec in OPS.values()
            if spec.elementwise and spec.dtypes and spec.rule.__module__.startswith(f"{__package__}.")}

EXAMPLES: dict[str, Example] = {
    "constant": Example(kwargs=dict(value=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))),
    **_DERIVED,
    "complex": Example((t("2x3xf32"), t("2x3xf32"))),
    # a real transform of 8 points along the last dimension: 8 -> 5 complex bins
    "fft": Example((t("2x8xf32"),), dict(fft_type="RFFT", length=(8,))),
    # a batch of two 4x4 matrices factored one by one
    "cholesky": Example((t("2x4x4xf32"),)),
    "lu": Example((t("2x4x3xf64"),)),
    "pivots_to_permutation": Example((t("2x3xi32"),), dict(size=4)),
    "geqrf": Example((t("5x3xf32"),)),
    "householder_product": Example((t("5x3xf32"), t("3xf32"))),
    "eigh": Example((t("2x4x4xcomplex<f32>"),), dict(lower=True)),
    "svd": Example((t("3x5xf64"),), dict(full_matrices=False)),
    "triangular_solve": Example((t("4x4xf32"), t("4x2xf32")),
                                dict(left_side=True, lower=True, transpose_a="NO_TRANSPOSE", unit_diagonal=False)),
    "compare": Example((t("2x3xf32"), t("2x3xf32")), dict(direction="LT")),
    "select": Example((t("2x3xi1"), t("2x3xf32"), t("2x3xf32"))),
    "check": Example((t("2x3xi32"), t("i1")), dict(message="integer division by zero", error="RuntimeError")),
    "convert": Example((t("2x3xf32"),), dict(dtype="i32")),
    "bitcast_convert": Example((t("2x3xf32"),), dict(dtype="i32")),
    "iota": Example(kwargs=dict(dim=1, shape=(2, 3), dtype="i32")),
    "broadcast_in_dim": Example((t("3xf32"),), dict(dims=(1,), shape=(2, 3))),
    "reshape": Example((t("2x3xf32"),), dict(shape=(3, 2))),
    "permute": Example((t("2x3xf32"),), dict(dims=(1, 0))),
    "slice": Example((t("4x6xf32"),), dict(start=(0, 1), limit=(4, 6), strides=(2, 2))),
    "dynamic_slice": Example((t("4x6xf32"), [t("i64"), t("i64")]), dict(sizes=(2, 3))),
    "dynamic_update_slice": Example((t("4x6xf32"), t("2x3xf32"), [t("i64"), t("i64")])),
    "concatenate": Example((t("2x3xf32"), t("2x2xf32")), dict(dim=1)),
    "pad": Example((t("2x3xf32"), t("f32")), dict(low=(1, 0), high=(0, 1), interior=(0, 1))),
    "reverse": Example((t("2x3xf32"),), dict(dims=(1,))),
    **{spec.name: Example((t("2x3xf32"),), dict(dims=(1,))) for spec in OPS.values()
       if spec.identity is not None and "dims" in spec.attrs},
    "argmax": Example((t("2x3xf32"),), dict(dim=1, dtype="i64")),
    "sort": Example((t("2x3xf32"),), dict(dim=1, descending=False, dtype="i64")),
    # rows of 20 float32s: two whole vectors of 8 lanes and a tail of 4
    "lane_sum": Example((t("4x20xf32"), t("4x20xf32")), dict(lanes=8, halving=True, fused=False)),
    "lane_moments": Example((t("4x20xf32"),), dict(lanes=8)),
    "cascade_sum": Example((t("40xf32"),), dict(step=16, levels=8)),
    "vector_sum": Example((t("3x40xf32"),), dict(lanes=8, threads=1)),
    "norm_squares": Example((t("3x45xf32"),), dict(lanes=8, tail_group=4)),
    "column_sum": Example((t("2x40x3xf32"),), dict(lanes=8)),
    "buffer_sum": Example((t("6x4xf32"), t("2x6x4xf32"), t("6xi64")), dict(threads=2)),
    "argmin": Example((t("2x3xf32"),), dict(dim=1, dtype="i64")),
    # a matrix product: contract lhs dim 1 with rhs dim 0
    "dot_general": Example(
        (t("2x3xf32"), t("3x4xf32")), dict(lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    ),
    # a 3x3 convolution, 2 -> 4 channels, padding 1 keeps 5x5
    "convolution": Example(
        (t("1x2x5x5xf32"), t("4x2x3x3xf32")),
        dict(strides=(1, 1), padding=(1, 1, 1, 1), lhs_dilation=(1, 1), rhs_dilation=(1, 1), groups=1),
    ),
    # rows 4 of x[idx] (numpy.take along axis 0)
    "gather": Example(
        (t("5x3xf32"), t("4x1xi64")),
        dict(offset_dims=(1,), collapsed_slice_dims=(0,), operand_batching_dims=(),
             start_indices_batching_dims=(), start_index_map=(0,), index_vector_dim=1,
             slice_sizes=(1, 3), indices_are_sorted=False),
    ),
    # x[idx] += updates, row by row (index_add along axis 0)
    "scatter": Example(
        (t("5x3xf32"), t("4x1xi64"), t("4x3xf32")),
        dict(update_window_dims=(1,), inserted_window_dims=(0,), input_batching_dims=(),
             scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
             mode="add"),
    ),
    # two values through one barrier: their results are the values themselves
    "optimization_barrier": Example(([t("2x3xf32"), t("4xi64")],)),
    "rng_bit_generator": Example((t("2xui64"),), dict(algorithm="three_fry", shape=(2, 3), dtype="ui32")),
    # rows split over the first axis of a 2x2 mesh, replicated over the second
    "shard": Example((t("8x6xf32"),), dict(mesh=(2, 2), sharding=(0, -1))),
    # the sum of the 2 row blocks
    "all_reduce": Example((t("8x6xf32"),), dict(mesh=(2, 2), sharding=(0, -1), axis=0, reduction="sum")),
    "all_gather": Example((t("8x6xf32"),), dict(mesh=(2, 2), sharding=(0, 1), axis=1)),
    # the sum of the 4 row blocks, its columns split over the axis
    "reduce_scatter": Example((t("8x8xf32"),), dict(mesh=(4,), sharding=(0, -1), axis=0, dim=1, reduction="sum")),
    "all_to_all": Example((t("8x6xf32"),), dict(mesh=(2,), sharding=(0, -1), axis=0, split_dim=1, concat_dim=0)),
    # every row block moves one position along the axis, cyclically
    "collective_permute": Example((t("8x6xf32"),), dict(mesh=(4,), sharding=(0, -1), axis=0, pairs=(0, 1, 1, 2, 2, 3, 3, 0))),
}
