"""The walk of an ordered piece of graph and its one structural encoding.

A barrier's program, a loop or branch body, a padded step, a failure's
retry: each is the graph behind some output values, visited once in
post-order (operands first, first operand first, a shared node once). Its
encoding pins that graph's structure (every node's digest and its operands
as walk positions), so two pieces of graph with equal encodings compile to
the same program: the compile key and a region node's digest both use it.

:func:`encode` is the one algorithm; :class:`Walk` is a barrier's use of it
(the parameters split into device data and scalar packs), and
:class:`lazycore.ir.regions.Body` a body's, whose outer values (its
``boundary``) are referred to by operand position instead of being walked.
"""

from __future__ import annotations

from array import array

from lazycore.ir.graph import Data, Node, Value

# The encoding, as 64-bit integers after the node count and the digests:
# per node, LEAF, or its operand count and each operand (a value: its
# reference; a variadic group: GROUP, its size, its members' references),
# then END and the outputs' references. A reference is the node's walk
# position and the result index, or, for a boundary value, one integer
# BOUNDARY - its position. Self-delimiting, so unambiguous.
LEAF = -1
GROUP = -2
END = -3
BOUNDARY = -4


def encode(outputs, boundary: dict | None = None) -> tuple[list[Node], list[Node], bytes]:
    """``(order, leaves, encoding)`` of the graph behind ``outputs`` (values):
    its nodes in post-order, the leaves among them in that order, and the
    structural encoding. ``boundary``: ``(id(node), index)`` -> position for
    values outside the piece (a body's placeholders and the outer values it
    reads), which are referred to and not walked."""
    order: list[Node] = []
    leaves: list[Node] = []
    pos: dict[Node, int] = {}  # nodes hash by identity; an outer (boundary) node is at -1
    digests: list[bytes] = []
    edges: list[int] = []
    put = edges.append

    def outer(v) -> bool:
        """``v`` is a boundary value: placed at -1, never walked."""
        if (id(v[0]), v[1]) in boundary:
            pos[v[0]] = -1
            return True
        return False

    for out in outputs:
        if out[0] in pos or (boundary and outer(out)):
            continue
        stack = [out[0]]
        while stack:
            node = stack[-1]
            if node in pos:  # pushed twice before it was placed
                stack.pop()
                continue
            operands = node.operands
            # push the operands not placed yet (first operand on top), and
            # place the node once none is left
            n = len(stack)
            for o in reversed(operands):
                if type(o) is Value:
                    if o[0] not in pos and not (boundary and outer(o)):
                        stack.append(o[0])
                else:
                    for v in reversed(o):
                        if v[0] not in pos and not (boundary and outer(v)):
                            stack.append(v[0])
            if len(stack) != n:
                continue
            stack.pop()
            pos[node] = len(order)
            order.append(node)
            digests.append(node.digest)
            if node.is_leaf:
                leaves.append(node)
                put(LEAF)
                continue
            put(len(operands))
            for o in operands:
                if type(o) is Value:
                    p = pos[o[0]]
                    if p < 0:
                        put(BOUNDARY - boundary[(id(o[0]), o[1])])
                    else:
                        put(p)
                        put(o[1])
                else:
                    put(GROUP)
                    put(len(o))
                    for v in o:
                        p = pos[v[0]]
                        if p < 0:
                            put(BOUNDARY - boundary[(id(v[0]), v[1])])
                        else:
                            put(p)
                            put(v[1])
    put(END)
    for out in outputs:
        p = pos[out[0]]
        if p < 0:
            put(BOUNDARY - boundary[(id(out[0]), out[1])])
        else:
            put(p)
            put(out[1])
    # the node count, the fixed-width digests, then the self-delimiting
    # integers
    return order, leaves, len(order).to_bytes(8, "little") + b"".join(digests) + array("q", edges).tobytes()


class Walk:
    """The graph behind a barrier's outputs, in post-order, and its structural
    encoding (the compile key's graph part); its leaves are the program's
    parameters."""

    def __init__(self, outputs: list[Value]):
        self.outputs = outputs
        self.order, self.params, self.encoding = encode(outputs)
        # Scalar leaves travel packed, one vector per dtype (one transfer each
        # instead of one per number); entry arguments are the device-data
        # leaves first, then the packs. Both orders follow the walk, which the
        # encoding pins, so equal keys mean equal layouts.
        self.data: list[Node] = []
        self.packs: dict[str, list[Node]] = {}
        for leaf in self.params:
            if type(leaf) is Data:
                self.data.append(leaf)
            elif leaf.op == "arg":  # a body's placeholder (lazycore.ir.regions.Arg)
                raise TypeError(
                    "a value computed from the carried values or operands of a loop or branch body was read while "
                    "the body is traced (lazycore.while_loop, fori_loop, scan, cond): it has no value until the "
                    "program runs; use lazycore.cond or a select instead of Python control flow on it")
            else:
                self.packs.setdefault(leaf.types[0].dtype, []).append(leaf)
