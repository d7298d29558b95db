"""Recorded nodes made again by straight-line Python: the one way replays make nodes.

A recording (a lowering's, :mod:`.recipes`; a whole step's, :mod:`.capture`)
is replayed by a function generated for it once: one line per node, its
operands plain local names, its op, attributes, types (and, where fixed,
digest and source line) constants of the function. Interpreting the
recorded steps at every call cost more than the nodes it made.
"""

from __future__ import annotations

from lazycore.ir.graph import Node, Value
from lazycore.ir.tensor import LazyTensor


class Code:
    """One generated function in the making: its constants and its lines."""

    def __init__(self, header: str, **names):
        self.env = {"Node": Node, "TV": tuple.__new__, "Value": Value, "LT": LazyTensor, **names}
        self.lines = [header]

    def const(self, x) -> str:
        """A name the code reads ``x`` by."""
        name = f"c{len(self.env)}"
        self.env[name] = x
        return name

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def node(self, var: str, op: str, operands: list[str], attrs, types, digest: str, loc: str) -> None:
        """``var = Node(...)``; ``operands``, ``digest`` and ``loc`` are expressions."""
        ops = "".join(o + ", " for o in operands)
        self.line(f"{var} = Node({self.const(op)}, ({ops}), {self.const(attrs)}, {self.const(types)}, {digest}, {loc})")

    def function(self, label: str):
        exec(compile("\n".join(self.lines), f"<lazycore replay of {label}>", "exec"), self.env)
        name = self.lines[0].split()[1].split("(")[0]
        return self.env[name]


def value(node_var: str, index: int) -> str:
    """The expression for result ``index`` of the node bound to ``node_var``."""
    return f"TV(Value, ({node_var}, {index}))"
