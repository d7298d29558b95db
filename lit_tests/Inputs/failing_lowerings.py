"""Lowerings that fail (for tools/failing_pass.mlir): one raises, one builds
results of the wrong type, one declines where nothing else lowers the op."""

from lazycore.passes import Decline, register_lowering
from lazycore.passes.lowering import hlo


def raises(op, rewriter):
    raise ValueError("this lowering of sign is broken")


def widens(op, rewriter):
    return hlo.convert(hlo.unary("ceil", op.operands[0]), "f64")


def only_f64(op, rewriter):
    if str(op.operands[0].type) != "tensor<4xf64>":
        raise Decline("only f64 here")
    return hlo.unary("floor", op.operands[0])


register_lowering("sign", raises)
register_lowering("ceil", widens)
register_lowering("floor", only_f64)
