"""A lazy-opt plugin (--load-python-module): importing it registers a lowering
and two passes through lazycore's own API, as a user's module would."""

from lazycore.dialect.mlir import ir
from lazycore.passes import PassError, register_lowering, register_pass
from lazycore.passes.lowering import hlo


def tanh_via_logistic(op, rewriter):
    """tanh(x) = 2 * logistic(2x) - 1."""
    x = op.operands[0]
    two = hlo.splat_like(2.0, x)
    s = hlo.unary("logistic", hlo.binary("multiply", two, x))
    return hlo.binary("subtract", hlo.binary("multiply", two, s), hlo.splat_like(1.0, x))


register_lowering("tanh", tanh_via_logistic)


@register_pass("plugin-count-ops", "Record the number of lazy ops on the module", options={"attr": "attribute name"})
def count_ops(attr="plugin.lazy_ops"):
    def run(module_op):
        n = 0

        def visit(op):
            nonlocal n
            n += op.name.startswith("lazy.")
            return ir.WalkResult.ADVANCE

        module_op.walk(visit)
        module_op.attributes[attr] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)

    return run


@register_pass("plugin-no-exp", "Refuse modules that use lazy.exp, at the op")
def no_exp():
    def run(module_op):
        found = []

        def visit(op):
            if op.name == "lazy.exp":
                found.append(op.location)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        # raised out here: the bindings turn an exception inside a walk into a RuntimeError
        module_op.walk(visit)
        if found:
            raise PassError("plugin-no-exp: lazy.exp is not allowed here", found[0])

    return run
