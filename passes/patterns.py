"""What rewrite patterns over ``lazy`` ops are written with.

A pattern is a function ``(op, rewriter) -> bool`` that returns False when it
rewrote the op (MLIR's Python pattern convention); :func:`pattern` files it
under the ops it applies to, by the module that wrote it, and a pass collects
the modules' patterns it applies (``lazy-canonicalize``: its own, constant
folding's and the partial updates'). The helpers read values
(``producer``, ``splat_value``...) and make constants.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from lazycore.dialect import create
from lazycore.dialect.build import from_mlir_type, splat_to_mlir, tensor_type
from lazycore.dialect.types import TensorType, is_bool, is_complex, is_float, real_dtype, to_numpy_dtype
from lazycore.dialect.mlir import ir

_WRITTEN: dict[str, list[tuple[str, Callable]]] = {}
"""Module name -> its (root op, pattern) pairs, in the order written."""


def pattern(*roots: str):
    """Decorator: the function is a pattern for ``lazy.<root>`` of each of ``roots``."""

    def wrap(fn):
        written = _WRITTEN.setdefault(fn.__module__, [])
        for r in roots:
            written.append((f"lazy.{r}", fn))
        return fn

    return wrap


def written_in(module: str) -> list[tuple[str, Callable]]:
    """The (root op, pattern) pairs the module ``module`` wrote, in its order."""
    return list(_WRITTEN.get(module, ()))


def defining_op(v: ir.Value):
    """The op producing ``v``, or None for a block argument."""
    owner = v.owner
    return owner if isinstance(owner, ir.OpView) or isinstance(owner, ir.Operation) else None


def producer(v: ir.Value, name: str):
    """The ``lazy.<name>`` op producing ``v``, or None."""
    o = defining_op(v)
    return o if o is not None and o.operation.name == f"lazy.{name}" else None


def type_of(v: ir.Value) -> TensorType:
    return from_mlir_type(v.type)


def splat_value(v: ir.Value):
    """The scalar (a NumPy scalar of the element type) of a splat ``lazy.constant``, or None.

    Read from the attribute's one stored element, so a splat of any size costs
    nothing to look at.
    """
    o = producer(v, "constant")
    if o is None:
        return None
    dtype = type_of(v).dtype
    if is_complex(dtype):
        return None  # no identity or fold here looks into complex numbers (nor can the bindings)
    attr = ir.DenseElementsAttr(o.attributes["value"])
    if not attr.is_splat:
        return None
    element = attr.get_splat_value()
    if is_bool(dtype):
        return np.bool_(ir.BoolAttr(element).value)
    if is_float(dtype):
        return to_numpy_dtype(dtype).type(ir.FloatAttr(element).value)
    return to_numpy_dtype(dtype).type(ir.IntegerAttr(element).value)


def is_splat_of(v: ir.Value, scalar) -> bool:
    s = splat_value(v)
    return s is not None and s == scalar


def splat_constant(scalar, t: TensorType) -> ir.Value:
    """``lazy.constant`` of type ``t`` with every element ``scalar``.

    ``create`` would hand MLIR every element of the array; a splat attribute
    stores one, which matters for large shapes.
    """
    if is_complex(t.dtype):  # no complex attribute ever (lazycore.dialect.build.create): two real splats
        z = complex(scalar)
        parts = [splat_constant(p, TensorType(t.shape, real_dtype(t.dtype))) for p in (z.real, z.imag)]
        return create("complex", *parts).result
    value = splat_to_mlir(scalar, t)
    return ir.Operation.create("lazy.constant", results=[tensor_type(t)], attributes={"value": value}).result


def replace(op, rewriter, value: ir.Value) -> bool:
    rewriter.replace_op(op, [value])
    return False
