"""Lowerings of the reduction family (see lazycore.dialect.reduction)."""

from __future__ import annotations

from functools import partial

from lazycore.dialect import TensorType, attr, spec_of
from lazycore.dialect.folds import identity_value
from lazycore.dialect.types import is_bool, is_float

from . import hlo
from .registry import lowering


# lazy op -> (combiner for numbers, combiner for i1); each starts from its row's identity
REDUCERS = {
    "reduce_sum": ("add", None),
    "reduce_prod": ("multiply", None),
    "reduce_max": ("maximum", "or"),
    "reduce_min": ("minimum", "and"),
}


def reduce(name: str, x, dims: list[int], result_type):
    """``stablehlo.reduce`` of ``x`` over ``dims`` with ``lazy.<name>``'s combiner, from its identity."""
    t = hlo.type_of(x)
    combiner, bool_combiner = REDUCERS[name]
    if is_bool(t.dtype):
        combiner = bool_combiner
    scalar = TensorType((), t.dtype)
    init = hlo.constant(identity_value(spec_of(name).identity, t.dtype), scalar)
    return hlo.with_body(
        "reduce", [x, init], result_type, [scalar, scalar],
        lambda acc, v: [hlo.binary(combiner, acc, v)],
        dimensions=hlo.i64s(dims),
    ).result


def _reduce(name: str, op, rewriter):
    x = op.operands[0]
    dims = list(attr(op, "dims"))
    t = hlo.type_of(x)
    if name == "reduce_sum" and is_float(t.dtype) and all(t.shape[d] == 1 for d in dims):
        # a sum that adds one element to its zero: +0 for -0, as eager's and NumPy's
        # (XLA would fold the reduce into a reshape, keeping -0)
        return hlo.plus_zero(reduce(name, x, dims, op.results[0].type) if dims else x)
    if not dims:
        return x  # StableHLO would accept it, but there is nothing to compute
    return reduce(name, x, dims, op.results[0].type)


for _name in REDUCERS:
    lowering(_name)(partial(_reduce, _name))


def _or(a, b):
    return hlo.binary("or", a, b)


def _and(a, b):
    return hlo.binary("and", a, b)


def _arg_reduce(better: str, op, rewriter):
    """A (value, index) reduce whose comparator picks the winner of a total order.

    The order is: NaN above every number, then ``better`` (GT for argmax,
    LT for argmin), ties (NaN with NaN included) broken by the lower index.
    Being a total order makes the comparator associative and commutative, as
    ``stablehlo.reduce`` requires, and reproduces NumPy's "first extremum,
    first NaN wins".
    """
    x = op.operands[0]
    t = hlo.type_of(x)
    dim = attr(op, "dim")
    idx_dtype = hlo.type_of(op.results[0]).dtype
    iota = hlo.value("iota", [], TensorType(t.shape, idx_dtype), iota_dimension=hlo.i64(dim))
    val_s, idx_s = TensorType((), t.dtype), TensorType((), idx_dtype)
    # The init value loses to (or ties with, at a higher index than) every element.
    init_val = hlo.constant(identity_value(spec_of("argmax" if better == "GT" else "argmin").identity, t.dtype), val_s)
    init_idx = hlo.constant(0, idx_s)

    def body(a, ai, b, bi):
        equal = hlo.compare(a, b, "EQ")
        pick_a = hlo.compare(a, b, better)
        if is_float(t.dtype):
            a_nan, b_nan = hlo.compare(a, a, "NE"), hlo.compare(b, b, "NE")
            pick_a = _or(pick_a, _and(a_nan, hlo.unary("not", b_nan)))
            equal = _or(equal, _and(a_nan, b_nan))
        pick_a = _or(pick_a, _and(equal, hlo.compare(ai, bi, "LT")))
        return [hlo.select(pick_a, a, b), hlo.select(pick_a, ai, bi)]

    reduced = TensorType(hlo.type_of(op.results[0]).shape, t.dtype)
    new = hlo.with_body(
        "reduce", [x, iota, init_val, init_idx], [reduced, op.results[0].type],
        [val_s, idx_s, val_s, idx_s], body, dimensions=hlo.i64s([dim]),
    )
    return new.results[1]


lowering("argmax")(partial(_arg_reduce, "GT"))
lowering("argmin")(partial(_arg_reduce, "LT"))


@lowering("sort")
def _sort(op, rewriter):
    """``stablehlo.sort`` of the operand and an iota along ``dim``, stable,
    whose comparator orders numbers by ``<`` (``>`` descending) and puts NaN
    last (first descending), as torch's and NumPy's sorts do."""
    x = op.operands[0]
    t = hlo.type_of(x)
    dim = attr(op, "dim")
    descending = attr(op, "descending")
    idx_type = hlo.type_of(op.results[1])
    iota = hlo.value("iota", [], idx_type, iota_dimension=hlo.i64(dim))
    val_s, idx_s = TensorType((), t.dtype), TensorType((), idx_type.dtype)

    def before(a, ai, b, bi):
        first = hlo.compare(a, b, "GT" if descending else "LT")
        if is_float(t.dtype):
            a_nan, b_nan = hlo.compare(a, a, "NE"), hlo.compare(b, b, "NE")
            if descending:  # NaN first
                first = _or(_and(a_nan, hlo.unary("not", b_nan)), _and(first, hlo.unary("not", a_nan)))
            else:  # NaN last: a number comes before NaN
                first = _or(first, _and(hlo.unary("not", a_nan), b_nan))
        return [first]

    new = hlo.with_body("sort", [x, iota], [op.results[0].type, op.results[1].type],
                        [val_s, val_s, idx_s, idx_s], lambda a, b, ai, bi: before(a, ai, b, bi),
                        dimension=hlo.i64(dim), is_stable=hlo.boolean(True))
    return list(new.results)
