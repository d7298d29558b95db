"""float8_e5m2 values moved as bytes.

XLA's CPU backend computes with float8_e5m2 through float16, data movement
included: a concatenate, select, pad, slice or dynamic slice of e5m2 values
turns every NaN into 0x7F (its sign and payload lost), where NumPy
(ml_dtypes) and eager torch copy bytes (a scatter that replaces, too).
These ops move values without
looking at them, so their lowerings here take e5m2 operands as ui8 (a
bitcast, which XLA keeps bit for bit) and bitcast the results back: the
same op on the same bytes, which XLA leaves alone. Other float8 types keep
their bits through XLA's data movement and lower as any type.
"""

from __future__ import annotations

from lazycore.dialect import OPS, attr, create, from_mlir_type
from lazycore.dialect.types import TensorType

from . import hlo
from .registry import BUILTIN, Lowering

MOVED_AS_BYTES = ("select", "concatenate", "pad", "slice", "dynamic_slice", "dynamic_update_slice", "scatter")
E5M2 = "f8E5M2"


def _as_bytes(v):
    t = from_mlir_type(v.type)
    return hlo.value("bitcast_convert", [v], TensorType(t.shape, "ui8")) if t.dtype == E5M2 else v


def _through_bytes(builtin):
    def lowering(op, rewriter):
        if not any(from_mlir_type(r.type).dtype == E5M2 for r in op.results):
            return builtin(op, rewriter)
        spec = OPS[op.operation.name]
        kwargs = {name: attr(op, name) for name in spec.attrs}
        if kwargs.get("mode", "replace") != "replace":  # a scatter that adds computes: not bytes
            return builtin(op, rewriter)
        operands = [_as_bytes(v) for v in op.operands]
        if spec.variadic:  # regroup: the variadic group is the operands between the fixed ones
            i = [n.endswith("*") for n in spec.operands].index(True)
            after = len(spec.operands) - i - 1
            end = len(operands) - after
            operands = operands[:i] + [operands[i:end]] + operands[end:]
        on_bytes = create(spec.name, *operands, **kwargs)
        results = builtin(on_bytes, rewriter)  # the same op on bytes, lowered here
        results = [results] if not isinstance(results, (list, tuple)) else list(results)
        on_bytes.erase()  # (its lowering read its operands, not it)
        return [hlo.value("bitcast_convert", [r], TensorType(from_mlir_type(r.type).shape, E5M2))
                if from_mlir_type(o.type).dtype == E5M2 else r for r, o in zip(results, op.results)]

    lowering.__lazycore_through_bytes__ = True
    return lowering


def install() -> None:
    for name in MOVED_AS_BYTES:
        full = f"lazy.{name}"
        entry = BUILTIN[full]
        if not getattr(entry.fn, "__lazycore_through_bytes__", False):
            BUILTIN[full] = Lowering(_through_bytes(entry.fn), full, entry.site, builtin=True)
