"""Lowerings of the shape family (see lazycore.dialect.shape).

Every shape op has the semantics of one StableHLO op, so each lowering is that
op with the same operands and result type and the attributes renamed; the
attribute kinds already match (DenseI64ArrayAttr, i64 IntegerAttr).
"""

from __future__ import annotations

from functools import partial

from . import hlo
from .registry import lowering

# lazy op -> (StableHLO op, {lazy attribute: StableHLO attribute})
RENAMED = {
    "broadcast_in_dim": ("broadcast_in_dim", {"dims": "broadcast_dimensions"}),
    "reshape": ("reshape", {}),
    "permute": ("transpose", {"dims": "permutation"}),
    "slice": ("slice", {"start": "start_indices", "limit": "limit_indices", "strides": "strides"}),
    "dynamic_slice": ("dynamic_slice", {"sizes": "slice_sizes"}),
    "dynamic_update_slice": ("dynamic_update_slice", {}),
    "concatenate": ("concatenate", {"dim": "dimension"}),
    "pad": ("pad", {"low": "edge_padding_low", "high": "edge_padding_high", "interior": "interior_padding"}),
    "reverse": ("reverse", {"dims": "dimensions"}),
}


def _renamed(hlo_name: str, names: dict[str, str], op, rewriter):
    # Variadic ops carry operandSegmentSizes; StableHLO's ops have one flat
    # operand list, so only the attributes named in the table are carried over.
    attrs = {new: op.attributes[old] for old, new in names.items()}
    return hlo.value(hlo_name, list(op.operands), op.results[0].type, **attrs)


for _lazy, (_hlo, _names) in RENAMED.items():
    lowering(_lazy)(partial(_renamed, _hlo, _names))
