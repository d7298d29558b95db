"""Lowering of ``lazy.optimization_barrier`` (see lazycore.dialect.barrier)."""

from __future__ import annotations

from . import hlo
from .registry import lowering


@lowering("optimization_barrier")
def _optimization_barrier(op, rewriter):
    new = hlo.op("optimization_barrier", list(op.operands), [r.type for r in op.results])
    return list(new.results)
