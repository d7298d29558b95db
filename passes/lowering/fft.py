"""Lowering of ``lazy.fft`` (see lazycore.dialect.fft): the op is ``stablehlo.fft``'s twin."""

from __future__ import annotations

from lazycore.dialect import attr
from lazycore.dialect.mlir import stablehlo

from . import hlo
from .registry import lowering


@lowering("fft")
def _fft(op, rewriter):
    return hlo.value("fft", list(op.operands), op.results[0].type,
                     fft_type=stablehlo.FftTypeAttr.get(attr(op, "fft_type")),
                     fft_length=hlo.i64s(attr(op, "length")))
