"""Lowerings of the random family."""

from __future__ import annotations

import numpy as np

from lazycore.dialect import TensorType, attr
from lazycore.dialect.mlir import stablehlo

from . import hlo
from .registry import lowering

# lazy algorithm names -> StableHLO's RngAlgorithm enum
ALGORITHMS = {"three_fry": "THREE_FRY", "philox": "PHILOX", "default": "DEFAULT"}


@lowering("rng_bit_generator")
def _rng_bit_generator(op, rewriter):
    """The bits drawn flat and reshaped: XLA lays a draw of several
    dimensions out by its shape (its 32-bit ThreeFry splits the first even
    dimension in halves), a flat draw as its stream, so a value's bits are
    the stream's first ones in row-major order whatever its shape (a draw at
    bucket sizes reads the unpadded draw's bits: lazycore.runtime.padding)."""
    algorithm = ALGORITHMS[attr(op, "algorithm")]
    bits = hlo.type_of(op.results[1])
    flat = TensorType((int(np.prod(bits.shape, dtype=np.int64)),), bits.dtype)
    new = hlo.op(
        "rng_bit_generator",
        list(op.operands),
        [op.results[0].type, flat],
        rng_algorithm=stablehlo.RngAlgorithmAttr.get(algorithm),
    )
    if flat.shape == bits.shape:
        return list(new.results)
    return [new.results[0], hlo.value("reshape", [new.results[1]], bits)]
