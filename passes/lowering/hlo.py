"""Small builders for StableHLO ops, used by the lowerings.

The MLIR bindings carry no generated StableHLO op classes, so ops are made
with ``ir.Operation.create``; these helpers keep the lowerings short.
All of them insert at the current insertion point and location.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lazycore.dialect import TensorType, attr, from_mlir_type, tensor_type
from lazycore.dialect.types import to_numpy_dtype
from lazycore.dialect.mlir import ir, stablehlo


def op(name: str, operands: Sequence[ir.Value], results, **attrs) -> ir.Operation:
    """``stablehlo.<name>`` with result type(s) ``results`` (ir or TensorType)."""
    if not isinstance(results, (list, tuple)) or isinstance(results, TensorType):
        results = [results]
    results = [tensor_type(r) if isinstance(r, TensorType) else r for r in results]
    return ir.Operation.create(
        f"stablehlo.{name}",
        results=results,
        operands=list(operands),
        attributes={k: v for k, v in attrs.items() if v is not None},
    )


def value(name: str, operands: Sequence[ir.Value], result, **attrs) -> ir.Value:
    """Like :func:`op`, for single-result ops: returns the result value."""
    return op(name, operands, result, **attrs).result


def type_of(v: ir.Value) -> TensorType:
    return from_mlir_type(v.type)


def i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))


def boolean(v: bool) -> ir.BoolAttr:
    return ir.BoolAttr.get(bool(v))


def i64s(vs: Sequence[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in vs])


def direction(d: str) -> ir.Attribute:
    return stablehlo.ComparisonDirectionAttr.get(d)


def constant_attr(array) -> ir.Attribute:
    """A dense elements attribute of ``array``'s type (replica groups, pairs)."""
    from lazycore.dialect.build import attr_to_mlir

    return attr_to_mlir("dense", np.asarray(array))


def constant(array, t: TensorType | None = None) -> ir.Value:
    """A ``stablehlo.constant``; a scalar with ``t`` is splat to type ``t``."""
    from lazycore.dialect.build import attr_to_mlir, splat_to_mlir

    if t is not None and t.dtype.startswith("complex"):
        z = np.asarray(array, dtype=to_numpy_dtype(t.dtype))
        part = t._replace(dtype=t.dtype[len("complex<"):-1])
        return value("complex", [constant(z.real, part), constant(z.imag, part)], t)
    if t is not None and np.ndim(array) == 0:
        attr = splat_to_mlir(array, t)
    else:
        if t is not None:  # (values broadcast to t's shape)
            array = np.full(t.shape, array, dtype=to_numpy_dtype(t.dtype))
        array = np.asarray(array)
        if array.dtype.kind == "c":  # no complex attribute ever (see lazycore.dialect.build.create)
            re, im = constant(np.array(array.real, order="C")), constant(np.array(array.imag, order="C"))
            return value("complex", [re, im], type_of(re)._replace(dtype=f"complex<{type_of(re).dtype}>"))
        attr = attr_to_mlir("dense", array)
    return ir.Operation.create("stablehlo.constant", results=[attr.type], attributes={"value": attr}).result


def splat_like(scalar, v: ir.Value) -> ir.Value:
    """A constant with the type of ``v``, every element ``scalar``."""
    return constant(scalar, type_of(v))


def compare(lhs: ir.Value, rhs: ir.Value, d: str) -> ir.Value:
    t = type_of(lhs)
    return value("compare", [lhs, rhs], TensorType(t.shape, "i1"), comparison_direction=direction(d))


def select(pred: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return value("select", [pred, a, b], a.type)


def plus_zero(v: ir.Value) -> ir.Value:
    """``0 + v`` for a real float ``v``: ``v`` with ``-0`` made ``+0`` (what a sum
    from zero gives), as a select: XLA's simplifier drops an add of a zero
    constant, and folds a reduce that keeps the element count into a reshape."""
    zero = splat_like(0, v)
    return select(compare(v, zero, "EQ"), zero, v)


def convert(v: ir.Value, dtype: str) -> ir.Value:
    t = type_of(v)
    if t.dtype == dtype:
        return v
    return value("convert", [v], TensorType(t.shape, dtype))


def binary(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return value(name, [a, b], a.type)


def unary(name: str, a: ir.Value) -> ir.Value:
    return value(name, [a], a.type)


def with_body(
    name: str,
    operands: Sequence[ir.Value],
    results,
    block_args: Sequence[TensorType],
    body: Callable[..., Sequence[ir.Value]],
    **attrs,
) -> ir.Operation:
    """An op with one single-block region (reduce, scatter, reduce_window...).

    ``body(*block_args)`` builds the region's ops and returns the values that
    ``stablehlo.return`` yields.
    """
    if not isinstance(results, (list, tuple)):
        results = [results]
    results = [tensor_type(r) if isinstance(r, TensorType) else r for r in results]
    new = ir.Operation.create(
        f"stablehlo.{name}",
        results=results,
        operands=list(operands),
        attributes={k: v for k, v in attrs.items() if v is not None},
        regions=1,
    )
    block = new.regions[0].blocks.append(*[tensor_type(t) for t in block_args])
    with ir.InsertionPoint(block):
        out = body(*block.arguments)
        ir.Operation.create("stablehlo.return", operands=list(out))
    return new


def counted_loop(count: int, values: list, body) -> list:
    """``values`` after iterations ``0 .. count - 1`` of ``body(i, values)`` (``i``
    an i32 scalar; it returns the new values, of the same types): a
    ``stablehlo.while``, whose iterations run in order, unlike a ``reduce``'s."""
    types = [TensorType((), "i32")] + [type_of(v) for v in values]
    loop = ir.Operation.create("stablehlo.while", results=[tensor_type(c) for c in types],
                               operands=[constant(np.array(0, np.int32))] + list(values), regions=2)
    cond = loop.regions[0].blocks.append(*[tensor_type(c) for c in types])
    with ir.InsertionPoint(cond):
        more = compare(cond.arguments[0], constant(np.array(count, np.int32)), "LT")
        ir.Operation.create("stablehlo.return", operands=[more])
    region = loop.regions[1].blocks.append(*[tensor_type(c) for c in types])
    with ir.InsertionPoint(region):
        i, *carried = region.arguments
        out = body(i, carried)
        ir.Operation.create("stablehlo.return",
                            operands=[binary("add", i, constant(np.array(1, np.int32))), *out])
    return list(loop.results)[1:]


def dimension_numbers(builder, op, fields: dict[str, str]):
    """``builder.get(field=<the op's attribute>, ...)``: StableHLO dimension
    numbers from a lazy op's attributes (``fields``: field -> attribute name)."""
    return builder.get(**{field: attr(op, name) for field, name in fields.items()})
