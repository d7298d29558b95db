"""The one way nodes are made again: from encoded entries, on new operands.

A replay (a recorded lowering, a captured step, a float parameter's scalar
and the nodes made of it alone) and a graph rewrite that moves nodes onto
other operands (rolled layers, a captured step's call body put in place)
all make nodes whose op, attributes, result types and digest are known
already. They make them here, so that what a made-again node is (a plain
:class:`~lazycore.ir.graph.Node`, or a
:class:`~lazycore.ir.regions.RegionNode` sharing its bodies) is decided in
one place.

An entry is ``(op, operands, attrs, types, prefix)`` over numbered values
(:mod:`lazycore.trace.fragment` describes the numbering): ``operands`` are
value numbers, a tuple of numbers for a variadic group; ``attrs`` a dict, or
for a loop, branch or call the tuple of its bodies; ``prefix`` (the digest
input before the operands) is not read here. The digest of each node is
given: :func:`remake` never hashes.
"""

from __future__ import annotations

from lazycore.ir.graph import Node, Value
from lazycore.ir.regions import RegionNode

_new_value = tuple.__new__


def node_again(op: str, operands: tuple, attrs, types: tuple, d: bytes, loc=None) -> Node:
    """One node made again: ``attrs`` a dict for a plain node, the bodies (a
    tuple) for a region node, which shares them (they read outer values only
    through the operands)."""
    if type(attrs) is tuple:
        return RegionNode.remade(op, operands, attrs, types, d, loc)
    return Node(op, operands, attrs, types, d, loc)


def again(node: Node, operands: tuple) -> Node:
    """``node`` on other operands, with its digest and source line (a graph
    rewrite's copy: rolled layers, a call body put in place)."""
    return node_again(node.op, operands, node.bodies if type(node) is RegionNode else node.attrs, node.types,
                      node.digest, node.loc)


def remake(entries, env: list, digests, loc=None, locs=None) -> list:
    """Make every entry's node on the values ``env`` holds (the entries'
    operands number into it), appending each node's results to ``env`` in
    order; returns ``env``. ``digests``: each entry's digest; ``locs``:
    each entry's source line, else ``loc`` for all."""
    append = env.append
    get = env.__getitem__
    for k, (op, operands, attrs, types, _) in enumerate(entries):
        ops = tuple([get(i) if type(i) is int else tuple(map(get, i)) for i in operands])
        node = node_again(op, ops, attrs, types, digests[k], loc if locs is None else locs[k])
        if len(types) == 1:
            append(_new_value(Value, (node, 0)))
        else:
            for r in range(len(types)):
                append(_new_value(Value, (node, r)))
    return env
