"""Lowerings that fail (for tools/failing_pass.mlir): one raises, one declines."""

from lazycore.passes import register_lowering


def raises(op, rewriter):
    raise ValueError("this lowering of sign is broken")


register_lowering("sign", raises)
register_lowering("floor", lambda op, rewriter: None)  # declines every op
