"""Constant folding for ``lazy-canonicalize``.

Ops whose operands are all ``lazy.constant`` and whose row in the op table has
a ``fold`` (the elementwise ops: :mod:`lazycore.dialect.folds`, NumPy under
the dialect's semantics) are evaluated and replaced by a constant. Cases the
fold leaves to the backend (``INT_MIN / -1``, negative integer powers,
out-of-range float->int) and subnormals (XLA's CPU backend flushes them) are
left alone, so folding never changes a program's numbers.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from lazycore.dialect import OPS, attr, create, spec_of
from lazycore.dialect.types import is_complex, is_float8, to_numpy_dtype
from lazycore.dialect.mlir import ir

from .patterns import pattern, producer, replace, splat_constant, splat_value, type_of

# Non-splat constants are folded up to this many elements, so folding never
# bloats the module; splats of any size fold, costing one element.
FOLD_LIMIT = 16


FOLDABLE = tuple(spec.name for spec in OPS.values() if spec.fold is not None)
"""The ops whose row says how to evaluate them (``OpSpec.fold``)."""


def _evaluate(op, spec, args: list[np.ndarray], result):
    """The op's fold on the operand arrays, with its attributes and result
    parameters as the rule takes them; None where the value is the backend's."""
    kwargs = {name: attr(op, name) for name in spec.attrs}
    for p in spec.result_params:
        kwargs[p] = getattr(result, p)
    return spec.fold(*args, **kwargs)


def _has_subnormal(a: np.ndarray) -> bool:
    """XLA's CPU backend flushes subnormals to zero and NumPy does not: leave them be."""
    if a.dtype.kind != "f" and a.dtype != to_numpy_dtype("bf16"):
        return False
    wide = np.abs(a.astype(np.float64))
    return bool(np.any((wide > 0) & (wide < float(ml_dtypes.finfo(a.dtype).tiny))))


def constant_operand(v: ir.Value):
    """(array, is_splat) of a ``lazy.constant`` operand small or splat enough to fold."""
    o = producer(v, "constant")
    if o is None:
        return None
    scalar = splat_value(v)
    if scalar is not None:
        return np.asarray(scalar), True
    t = type_of(v)
    # NumPy cannot read bf16 out of an attribute, so only bf16 splats fold;
    # nor complex ones (the bindings refuse them), and those never fold.
    if t.size > FOLD_LIMIT or t.dtype == "bf16" or is_float8(t.dtype) or is_complex(t.dtype):
        return None
    return np.array(ir.DenseElementsAttr(o.attributes["value"])).reshape(t.shape), False


@pattern(*FOLDABLE)
def fold_constants(op, rewriter):
    """op(c1, ..., cn) -> c, evaluated with NumPy under the dialect's semantics

    For elementwise ops whose operands are all constants, each a splat or of
    at most FOLD_LIMIT elements. Cases left to the backend (``INT_MIN / -1``,
    float -> int overflow, ...) are not folded."""
    operands = []
    for v in op.operands:  # most ops have a non-constant operand: stop at the first
        o = constant_operand(v)
        if o is None or _has_subnormal(o[0]):
            return True
        operands.append(o)
    result = type_of(op.results[0])
    if is_complex(result.dtype):
        return True  # a real -> complex convert: left to the backend, as complex operands are
    dtype = to_numpy_dtype(result.dtype)
    with np.errstate(all="ignore"):
        value = _evaluate(op, spec_of(op.operation.name), [a for a, _ in operands], result)
        if value is None:
            return True
        value = np.asarray(value).astype(dtype)
    if _has_subnormal(value):
        return True
    with rewriter.ip, op.location:
        if all(splat for _, splat in operands):
            new = splat_constant(value.reshape(()), result)
        else:
            new = create("constant", value=np.broadcast_to(value, result.shape).copy()).result
    return replace(op, rewriter, new)
