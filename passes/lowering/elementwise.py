"""Lowerings of the elementwise family (see lazycore.dialect.elementwise)."""

from __future__ import annotations

from functools import partial

from lazycore.dialect.build import attr_to_mlir

from . import hlo
from .registry import lowering

# lazy op -> StableHLO op with the same operands, attributes-free, same semantics.
ONE_TO_ONE = {
    "neg": "negate",
    "abs": "abs",
    "sign": "sign",
    "exp": "exponential",
    "log": "log",
    "log1p": "log_plus_one",
    "expm1": "exponential_minus_one",
    "tanh": "tanh",
    "logistic": "logistic",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "floor": "floor",
    "ceil": "ceil",
    "round": "round_nearest_even",
    "sin": "sine",
    "cos": "cosine",
    "not": "not",
    "is_finite": "is_finite",
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
    "rem": "remainder",
    "pow": "power",
    "maximum": "maximum",
    "minimum": "minimum",
    "atan2": "atan2",
    "and": "and",
    "or": "or",
    "xor": "xor",
    "select": "select",
    "convert": "convert",
}


def _same_operands(hlo_name, op, rewriter):
    return hlo.value(hlo_name, list(op.operands), op.results[0].type)


for _lazy, _hlo in ONE_TO_ONE.items():
    lowering(_lazy)(partial(_same_operands, _hlo))


@lowering("constant")
def _constant(op, rewriter):
    return hlo.value("constant", [], op.results[0].type, value=op.attributes["value"])


@lowering("compare")
def _compare(op, rewriter):
    d = str(op.attributes["direction"]).strip('"')
    return hlo.compare(op.operands[0], op.operands[1], d)


@lowering("iota")
def _iota(op, rewriter):
    dim = attr_to_mlir("i64", int(op.attributes["dim"].value))
    return hlo.value("iota", [], op.results[0].type, iota_dimension=dim)
