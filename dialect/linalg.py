"""Linear algebra: dot_general and convolution, with StableHLO's semantics.

Convolution fixes PyTorch's layouts (input N,C,spatial..., kernel
O,I/groups,spatial..., output N,O,spatial...) instead of carrying dimension
numbers: every frontend we target agrees on them, and a transpose in front is
cheaper to reason about than a layout attribute on every op.
"""

from __future__ import annotations

from .rules import check_dims, check_len, require_dtype
from .spec import op
from .types import ShapeError, TensorType


def _free_dims(rank: int, *used) -> list[int]:
    taken = {d for group in used for d in group}
    return [d for d in range(rank) if d not in taken]


def _check_side(name: str, t: TensorType, batch, contract) -> None:
    check_dims(batch, t.rank, f"{name}_batch")
    check_dims(contract, t.rank, f"{name}_contract")
    if set(batch) & set(contract):
        raise ShapeError(f"{name}_batch {list(batch)} and {name}_contract {list(contract)} overlap")


def _pair_sizes(lhs: TensorType, rhs: TensorType, ld, rd, what: str) -> None:
    if len(ld) != len(rd):
        raise ShapeError(f"lhs_{what} {list(ld)} and rhs_{what} {list(rd)} must have the same length")
    for a, b in zip(ld, rd):
        if lhs.shape[a] != rhs.shape[b]:
            raise ShapeError(
                f"{what} dims must have equal sizes: lhs dim {a} is {lhs.shape[a]}, rhs dim {b} is {rhs.shape[b]}"
            )


@op("dot_general", ("lhs", "rhs"),
    attrs={"lhs_batch": "i64[]", "rhs_batch": "i64[]", "lhs_contract": "i64[]", "rhs_contract": "i64[]"},
    padding="own")
def _dot_general(lhs, rhs, *, lhs_batch, rhs_batch, lhs_contract, rhs_contract):
    """Batched contraction; result dims are batch, then lhs free, then rhs free."""
    if lhs.dtype != rhs.dtype:
        raise ShapeError(f"lhs and rhs must have the same element type, got {lhs.dtype} and {rhs.dtype}")
    require_dtype("operands", lhs, "numeric or complex")
    _check_side("lhs", lhs, lhs_batch, lhs_contract)
    _check_side("rhs", rhs, rhs_batch, rhs_contract)
    _pair_sizes(lhs, rhs, lhs_batch, rhs_batch, "batch")
    _pair_sizes(lhs, rhs, lhs_contract, rhs_contract, "contract")
    shape = [lhs.shape[d] for d in lhs_batch]
    shape += [lhs.shape[d] for d in _free_dims(lhs.rank, lhs_batch, lhs_contract)]
    shape += [rhs.shape[d] for d in _free_dims(rhs.rank, rhs_batch, rhs_contract)]
    return TensorType(tuple(shape), lhs.dtype)


def conv_output_size(size: int, kernel: int, stride: int, low: int, high: int,
                     lhs_dilation: int, rhs_dilation: int) -> int:
    """One spatial output size; PyTorch's formula, extended by input dilation as in StableHLO."""
    dilated_input = (size - 1) * lhs_dilation + 1 if size else 0
    padded = low + dilated_input + high
    window = (kernel - 1) * rhs_dilation + 1
    if padded < window:
        raise ShapeError(
            f"dilated kernel size {window} exceeds padded input size {padded} "
            f"(input {size}, padding {low}+{high}, lhs_dilation {lhs_dilation})"
        )
    return (padded - window) // stride + 1


@op("convolution", ("input", "kernel"),
    attrs={"strides": "i64[]", "padding": "i64[]", "lhs_dilation": "i64[]", "rhs_dilation": "i64[]",
           "groups": "i64"}, padding="own")
def _convolution(x, w, *, strides, padding, lhs_dilation, rhs_dilation, groups):
    """N-d convolution (cross-correlation, as PyTorch) in N,C,spatial layout."""
    if x.dtype != w.dtype:
        raise ShapeError(f"input and kernel must have the same element type, got {x.dtype} and {w.dtype}")
    require_dtype("operands", x, "numeric")
    if x.rank < 3:
        raise ShapeError(f"input must have rank >= 3 (N, C, spatial...), got {x}")
    if w.rank != x.rank:
        raise ShapeError(f"kernel must have the rank of the input ({x.rank}), got {w}")
    n_spatial = x.rank - 2
    check_len(strides, n_spatial, "strides")
    check_len(padding, 2 * n_spatial, "padding (low, high per spatial dim)")
    check_len(lhs_dilation, n_spatial, "lhs_dilation")
    check_len(rhs_dilation, n_spatial, "rhs_dilation")
    for what, values in (("strides", strides), ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if any(v < 1 for v in values):
            raise ShapeError(f"{what} must be positive, got {list(values)}")
    if any(p < 0 for p in padding):
        raise ShapeError(f"padding must be non-negative, got {list(padding)}")
    if groups < 1:
        raise ShapeError(f"groups must be positive, got {groups}")
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    if c != i * groups:
        raise ShapeError(
            f"input channels ({c}) must equal kernel input channels ({i}) times groups ({groups})"
        )
    if o % groups:
        raise ShapeError(f"kernel output channels ({o}) must be divisible by groups ({groups})")
    spatial = tuple(
        conv_output_size(x.shape[2 + k], w.shape[2 + k], strides[k], padding[2 * k], padding[2 * k + 1],
                         lhs_dilation[k], rhs_dilation[k])
        for k in range(n_spatial)
    )
    return TensorType((n, o) + spatial, x.dtype)


__all__ = ["conv_output_size"]
