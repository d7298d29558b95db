"""Loops kept as loops at a barrier: the chains of identical layers in a
walk (:mod:`lazycore.passes.rolled_chains` finds them, on lazy graph nodes
here).

Only the compiler looks at it, on a compile-cache miss;
``settings.roll_loops`` (``LAZYCORE_ROLL_LOOPS=1``) turns it on and is part
of the compile key. Nothing here touches MLIR.
"""

from __future__ import annotations

from lazycore.ir.graph import Node, Scalar, Value
from lazycore.passes.rolled_chains import MIN_COPIES, Chain, find_chains as _find_chains  # noqa: F401


def find_chains(order: list[Node], outputs: list[Value]) -> list[Chain]:
    """The chains to emit as loops in a walk, in walk order."""
    return _find_chains(order, outputs, scalar_leaf=lambda node: type(node) is Scalar)


def find_chain(order: list[Node], outputs: list[Value]) -> Chain | None:
    """The largest chain in a walk, or None."""
    chains = find_chains(order, outputs)
    return max(chains, key=lambda c: len(c.copies) * len(c.copies[0])) if chains else None
