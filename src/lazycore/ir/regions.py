"""Nodes that own sub-graphs: loops and branches kept as loops and branches.

A :class:`RegionNode` is one ``while`` or ``case`` applied to outer values;
its :class:`Body` objects are the graphs a loop body or a branch was traced
into, once, over :class:`Arg` placeholders. A body reads outer values only
through the node's operands (the trace layer passes every value a body
closes over in as an operand), so a body is a closed graph: its :attr:`Body.encoding`
(:func:`lazycore.ir.walk.encode`, as a barrier's walk: every inner node's
digest and its operands as walk positions, the placeholders and captured
values by operand position) pins its structure,
and the node's digest covers it. Two loops with equal bodies hash equal
whatever they were traced from; the compile cache keys them like any node.

Nothing here touches MLIR: the barrier's module builder emits the regions.
"""

from __future__ import annotations

from lazycore.dialect.types import TensorType
from lazycore.ir.graph import Node, Value, digest, index_bytes, operand_bytes
from lazycore.ir.walk import encode

KINDS = ("while", "case", "call")


def _arg_digest(position: int, t: TensorType) -> bytes:
    return digest(repr(("arg", position, tuple(t.shape), t.dtype)).encode())


class Arg(Node):
    """The placeholder for a region's block argument ``position`` while its
    body is traced. It has no value: a barrier never computes it."""

    __slots__ = ("position",)
    is_leaf = True
    log_when_made = False

    def __init__(self, position: int, t: TensorType):
        super().__init__("arg", (), {}, (t,), _arg_digest(position, t))
        self.position = position


class Body:
    """One traced region: its inner nodes in post-order, what it yields, and
    the outer values it reads (by operand position of the region node)."""

    __slots__ = ("args", "order", "results", "boundary", "encoding")

    def __init__(self, args: list[Arg], results: list[Value], boundary: dict[tuple[int, int], int]):
        """``results``: the yielded values; ``boundary``: ``(id(node), index)``
        -> operand position, for the placeholders and every outer value the
        body reads (its inner nodes are the others)."""
        self.args = args
        self.results = results
        self.boundary = boundary
        self.order, _, self.encoding = encode(results, boundary)


class RegionNode(Node):
    """A ``while``, ``case`` or ``call`` node: its operands are outer values,
    its bodies the regions (``while``: cond, body; ``case``: branch 0, branch
    1; ``call``: the one body).

    ``while``: operands ``(carried,)``, a group; results the carried values'
    types. ``case``: operands ``(index, operands)``; results what the
    branches yield. ``call``: operands ``(operands,)``; results what the body
    yields (a captured step, :mod:`lazycore.trace.capture`, emitted inline)."""

    __slots__ = ("bodies",)

    def __init__(self, kind: str, operands: tuple, bodies: tuple[Body, ...], types: tuple[TensorType, ...], loc=None):
        if kind not in KINDS:
            raise ValueError(f"unknown region op '{kind}'")
        super().__init__(kind, operands, {}, types, digest(region_prefix(kind, bodies, types) + operand_bytes(operands)),
                         loc)
        self.bodies = bodies

    @classmethod
    def remade(cls, kind: str, operands: tuple, bodies: tuple[Body, ...], types: tuple, d: bytes, loc=None):
        """The node again on new operands, its digest ``d`` known (a replayed
        captured step: :class:`lazycore.trace.fragment.Fragment`). The bodies
        are shared: they read outer values only through the operands."""
        node = cls.__new__(cls)
        Node.__init__(node, kind, operands, {}, types, d, loc)
        node.bodies = bodies
        return node


def region_prefix(kind: str, bodies, types) -> bytes:
    """A region node's digest input before its operands (the part
    :func:`lazycore.ir.graph.node_prefix` is for a plain node)."""
    parts = [kind.encode(), b"|", repr(tuple((tuple(t.shape), t.dtype) for t in types)).encode()]
    for body in bodies:
        parts += (b"|R", index_bytes(len(body.encoding) & 0xFFFF), digest(body.encoding))
    return b"".join(parts)
