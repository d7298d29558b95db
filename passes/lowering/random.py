"""Lowerings of the random family."""

from __future__ import annotations

from lazycore.dialect import attr
from lazycore.dialect.mlir import stablehlo

from . import hlo
from .registry import lowering

# lazy algorithm names -> StableHLO's RngAlgorithm enum
ALGORITHMS = {"three_fry": "THREE_FRY", "philox": "PHILOX", "default": "DEFAULT"}


@lowering("rng_bit_generator")
def _rng_bit_generator(op, rewriter):
    algorithm = ALGORITHMS[attr(op, "algorithm")]
    new = hlo.op(
        "rng_bit_generator",
        list(op.operands),
        [r.type for r in op.results],
        rng_algorithm=stablehlo.RngAlgorithmAttr.get(algorithm),
    )
    return list(new.results)
