"""The one way nodes are made again: from encoded entries, on new operands.

A replay (a recorded lowering, a captured step, a float parameter's scalar
and the nodes made of it alone) and a graph rewrite that moves nodes onto
other operands (rolled layers, a captured step's call body put in place)
all make nodes whose op, attributes, result types and digest are known
already. They make them here, so that what a made-again node is (a plain
:class:`~lazycore.ir.graph.Node`, or a
:class:`~lazycore.ir.regions.RegionNode` sharing its bodies) is decided in
one place: :func:`node_again` for one node (:func:`again`: a node copied onto
other operands), :class:`Source` for entries replayed many times, as
generated code (:meth:`Source.entries` writes the lines; :func:`maker` is a
ready function over a list of values; :class:`lazycore.trace.fragment.Fragment`
writes them inside its own replay function).

An entry is ``(op, operands, attrs, types, prefix)`` over numbered values
(:mod:`lazycore.trace.fragment` describes the numbering): ``operands`` are
value numbers, a tuple of numbers for a variadic group; ``attrs`` a dict, or
for a loop, branch or call the tuple of its bodies; ``prefix`` (the digest
input before the operands) is not read here. The digest of each node is
given: nothing here hashes.
"""

from __future__ import annotations

from lazycore.ir.graph import Node, Value
from lazycore.ir.memo import Memo
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


class Source:
    """One generated function in the making: its constants and its lines.

    Straight-line code made once per recording (one line per node, its op,
    attributes and types constants of the function) makes a recording's
    nodes at each replay for less than the nodes cost; an interpreter
    walking the entries cost more than the nodes it made. Compiling is the
    expensive part (~0.4 ms a function), and recordings of one shape (the
    same ops over the same numbering, other types and attributes) have the
    same text, their constants being names: the code is compiled once per
    text (:data:`_COMPILED`) and only bound to each recording's constants."""

    def __init__(self, header: str, **names):
        self.env = {"Node": Node, "TV": _new_value, "Value": Value, "REGION": RegionNode.remade, **names}
        self.lines = [header]

    def const(self, x) -> str:
        """A name the code reads ``x`` by."""
        name = f"c{len(self.env)}"
        self.env[name] = x
        return name

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def entries(self, entries, names: list, digests: str, loc: str, locs=None) -> None:
        """Lines making each entry's node (:func:`node_again`'s choice, made
        while generating), reading its operands by the names in ``names``
        (value numbers -> expressions) and appending its results' names.
        ``digests``: an expression indexed by entry; ``loc`` the location
        expression, or ``locs`` each entry's."""
        for k, (op, operands, attrs, types, _) in enumerate(entries):
            ops = "".join((names[i] if type(i) is int else "(" + "".join(names[j] + ", " for j in i) + ")") + ", "
                          for i in operands)
            at = loc if locs is None else self.const(locs[k])
            make = "REGION" if type(attrs) is tuple else "Node"  # a loop or branch: its bodies, shared
            self.line(f"n{k} = {make}({self.const(op)}, ({ops}), {self.const(attrs)}, {self.const(types)}, "
                      f"{digests}[{k}], {at})")
            for r in range(len(types)):
                names.append(f"TV(Value, (n{k}, {r}))")

    def function(self, label: str):
        text = "\n".join(self.lines)
        key = (text, label)
        code = _COMPILED.get(key)
        if code is None:
            code = _COMPILED.put(key, compile(text, f"<lazycore replay of {label}>", "exec"))
        exec(code, self.env)
        return self.env[self.lines[0].split()[1].split("(")[0]]


_COMPILED = Memo("ir.generated_code", 4096)
"""(source text, label) -> its compiled code (:class:`Source`)."""


def maker(entries, n_values: int, locs=None, label: str = "entries"):
    """``make(env, digests, loc)``: each entry's node made on the values of
    the list ``env`` (its first ``n_values`` are what the entries' operands
    number into besides each other's results), the results appended to
    ``env``; generated code (:class:`Source`). ``locs``: each entry's source
    line, else the ``loc`` given at the call."""
    code = Source("def make(env, ds, loc):")
    names = [f"v{i}" for i in range(n_values)]
    if n_values:
        code.line("".join(n + ", " for n in names) + "= env[:" + str(n_values) + "]")
    first = len(names)
    code.entries(entries, names, "ds", "loc", locs)
    made = names[first:]
    if made:
        code.line("env.extend((" + "".join(n + ", " for n in made) + "))")
    code.line("return env")
    return code.function(f"{label}, {len(entries)} nodes")
