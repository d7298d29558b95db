"""A fused lowering: log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)).

Written as ``log(1 + exp(x))`` (torch and NumPy code alike), softplus loses
every digit below 1e-7 for x < -16 (1 + exp(x) rounds to 1) and overflows to
inf for x > 88 in float32. This lowering of ``lazy.log`` matches that chain
and emits the stable form; any other ``log`` it declines, and the built-in
lowering takes it. Load it with ``import`` (it registers itself) or
``lazy-opt --load-python-module examples/softplus_lowering.py``.
"""

import numpy as np

from lazycore.dialect import attr
from lazycore.passes import Decline, register_lowering
from lazycore.passes.lowering import hlo


def producer(value, *names):
    """The op, one of ``names``, that computes ``value``, or None (another op, a block argument)."""
    owner = value.owner
    return owner if getattr(owner, "name", None) in names else None


EXPS = ("lazy.exp", "lazy.exp_vml", "lazy.exp_sleef")  # (torch's CPU exps: eager's roundings of exp)


@register_lowering("log")
def stable_softplus(op, rewriter):
    add = producer(op.operands[0], "lazy.add")
    if add is None:
        return None  # declined: the next lowering of lazy.log (here the built-in one) lowers it
    for e, c in (add.operands, reversed(add.operands)):
        exp, one = producer(e, *EXPS), producer(c, "lazy.constant")
        if exp is not None and one is not None and np.all(attr(one, "value") == 1):
            break
    else:
        raise Decline("its operand is not 1 + exp(x)")
    x = exp.operands[0]
    small = hlo.unary("log_plus_one", hlo.unary("exponential", hlo.unary("negate", hlo.unary("abs", x))))
    return hlo.binary("add", hlo.binary("maximum", x, hlo.splat_like(0, x)), small)
