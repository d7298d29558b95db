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

import struct
import sys
from itertools import chain
from operator import attrgetter

from lazycore.ir.context import LOCK
from lazycore.ir.graph import Data, Node, Value

# The encoding: the node count (8 bytes), the nodes' digests in walk order
# (16 bytes each), then 64-bit integers in postfix order: each node's
# operand references, then the node's header (NODE - its operand count, or
# LEAF); a variadic group's members' references are followed by GROUP and
# its size. A reference is a node's walk position (>= 0) and the result
# index, or BOUNDARY and the position of a boundary value. After END, the
# outputs' references. Each item's first integer says what it is, so the
# encoding is self-delimiting, hence unambiguous.
LEAF = -1
GROUP = -2
END = -3
BOUNDARY = -4
NODE = -5

DEPTH = 400
"""Nesting levels the walk recurses (a call per node is the cheapest visit
in Python) before an explicit stack takes over (any depth)."""

_DIGEST = attrgetter("digest")

_REPEATABLE = frozenset({"scalar", "constant"})
"""The leaves whose one-operand users the encoding takes once per walk: two
equal ops (a broadcast, a convert) on the same scalar parameter or constant
encode as one node used twice, as do two equal constants. Which steps share
such a node depends on how they were traced: a recorded lowering's replays
share its constants and their broadcasts, and a replay of a recording
another step made brings that recording's own, beside those the step traced
(an ``nn.MultiheadAttention`` over sequence lengths in shape buckets
compiled a program twice per bucket, differing in one ``broadcast_in_dim``
of a zero; a replay brings its recording's constants in the same way).
Both nodes stay in the walk's order and in the program, whose ``cse``
merges them: the encoding says what the program computes, not how the
trace shared it."""


def encode(outputs, boundary: dict | None = None) -> tuple[list[Node], list[Node], bytes]:
    """``(order, leaves, encoding)`` of the graph behind ``outputs`` (values):
    its nodes in post-order (operands first, first operand first, a shared
    node once), the leaves among them in that order, and the structural
    encoding. ``boundary``: ``(id(node), index)`` -> position for values
    outside the piece (a body's placeholders and the outer values it reads),
    which are referred to and not walked.

    A node placed by this walk carries the walk's mark and its position
    (:attr:`Node.mark`, :attr:`Node.at`) instead of an entry in a position
    map: slot reads are the cheapest test in Python, and the walk is the
    barrier's largest host cost. The marks are shared state: the walk holds
    :data:`lazycore.ir.context.LOCK`."""
    with LOCK:
        return _encode(outputs, boundary or None)


def _encode(outputs, boundary):
    order: list[Node] = []
    leaves: list[Node] = []
    edges: list[int] = []
    put = edges.append
    place = order.append
    V = Value
    mark = object()  # this walk's: a node whose mark it is is placed (or, at -1, a boundary value's)
    encoded: list[Node] = []  # the nodes the encoding counts: order less the repeated scalar nodes
    count = encoded.append
    repeats: dict = {}  # (digest, operand position, result), or a constant's digest -> the first such node

    def repeated(node) -> bool:
        """``node``, a constant or an op on one operand, repeats one placed
        before: an equal constant, or an equal op on the same scalar or
        constant. It takes that node's position, so the encoding is that of
        a graph sharing it (:data:`_REPEATABLE`)."""
        if node.operands:
            o = node.operands[0]
            if type(o) is not V:
                return False
            n = o[0]
            if n.at < 0 or n.operands or n.op not in _REPEATABLE:  # (at -1: a boundary value)
                return False
            first = repeats.setdefault((node.digest, n.at, o[1]), node)
            if first is node:
                return False
            del edges[-2:]  # (its operand's reference)
        elif node.op == "constant":  # (its digest holds its value)
            first = repeats.setdefault(node.digest, node)
            if first is node:
                return False
        else:
            return False
        node.mark = mark
        node.at = first.at
        place(node)
        return True

    def visit(node, d):
        """Place ``node`` after its operands (recursing ``d`` more levels)."""
        operands = node.operands
        for o in operands:
            if type(o) is V:
                n = o[0]
                if n.mark is not mark:
                    if d:
                        visit(n, d - 1)
                    else:
                        deep(n)
                put(n.at)
                put(o[1])
            else:
                for v in o:
                    n = v[0]
                    if n.mark is not mark:
                        if d:
                            visit(n, d - 1)
                        else:
                            deep(n)
                    put(n.at)
                    put(v[1])
                put(GROUP)
                put(len(o))
        if len(operands) <= 1 and repeated(node):
            return
        node.mark = mark
        node.at = len(encoded)
        place(node)
        count(node)
        if operands:
            put(NODE - len(operands))
        elif node.is_leaf:
            leaves.append(node)
            put(LEAF)
        else:
            put(NODE)

    def outer(v) -> bool:
        """``v`` is a boundary value: marked at -1, never walked."""
        if (id(v[0]), v[1]) in boundary:
            v[0].mark = mark
            v[0].at = -1
            return True
        return False

    def ref(v) -> None:
        p = v[0].at
        if p < 0:
            put(BOUNDARY)
            put(boundary[(id(v[0]), v[1])])
        else:
            put(p)
            put(v[1])

    def deep(root) -> None:
        """:func:`visit` with an explicit stack: any depth, and boundary values."""
        stack = []
        node, it = root, iter(root.operands)
        while True:
            for o in it:
                if type(o) is V:
                    n = o[0]
                    if n.mark is not mark and not (boundary and outer(o)):
                        stack.append((node, it, o))
                        node, it = n, iter(n.operands)
                        break
                    ref(o)
                elif type(o) is int:  # a group's end: its size
                    put(GROUP)
                    put(o)
                else:  # a group: its members, then its end
                    it = chain(o, (len(o),), it)
                    break
            else:
                if len(node.operands) <= 1 and repeated(node):
                    if not stack:
                        return
                    node, it, o = stack.pop()
                    ref(o)
                    continue
                node.mark = mark
                node.at = len(encoded)
                place(node)
                count(node)
                k = len(node.operands)
                if k:
                    put(NODE - k)
                elif node.is_leaf:
                    leaves.append(node)
                    put(LEAF)
                else:
                    put(NODE)
                if not stack:
                    return
                node, it, o = stack.pop()
                ref(o)

    # the recursion's budget: what the interpreter's limit leaves, less a margin
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    budget = max(0, min(DEPTH, sys.getrecursionlimit() - depth - 100))
    for out in outputs:
        n = out[0]
        if n.mark is mark:
            continue
        if boundary is None:
            visit(n, budget)
        elif not outer(out):
            deep(n)
    put(END)
    for out in outputs:
        ref(out)
    # (struct packs a list of integers ~5x faster than array does)
    return order, leaves, (len(encoded).to_bytes(8, "little") + b"".join(map(_DIGEST, encoded))
                           + struct.pack(f"{len(edges)}q", *edges))


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
