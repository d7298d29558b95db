"""The one way nodes are made again: from encoded entries, on new operands.

A replay (a recorded lowering, a captured step, a float parameter's scalar
and the nodes made of it alone) and a graph rewrite that moves nodes onto
other operands (rolled layers, a captured step's call body put in place)
all make nodes whose op, attributes, result types and digest are known
already. They make them here, so that what a made-again node is (a plain
:class:`~lazycore.ir.graph.Node`, or a
:class:`~lazycore.ir.regions.RegionNode` sharing its bodies) is decided in
one place, :func:`node_again`, and every loop that makes a piece of graph
again is one of three forms of one routine, each where the others cost more
(docs/dev/replay.md measures them):

* :func:`entries` encodes an ordered list of nodes as entries (a captured
  step's fragment); :func:`made` interprets entries once (a fragment made
  once, or only hashed on inputs of a new kind);
* :class:`Source` generates straight-line code from entries for a piece
  replayed many times (:func:`maker`; :class:`lazycore.trace.fragment.Fragment`
  writes the lines inside its own replay function);
* :func:`onto` copies nodes already made onto moved operands, a loop's or
  call's body inlined (:func:`body_on`): a graph rewrite's copy, which reads
  the nodes themselves (encoding them as entries first would add a pass).

An entry is ``(op, operands, attrs, types, prefix)`` over numbered values
(:mod:`lazycore.trace.fragment` describes the numbering): ``operands`` are
value numbers, a tuple of numbers for a variadic group; ``attrs`` a dict, or
for a loop, branch or call the tuple of its bodies; ``prefix`` the digest
input before the operands (:func:`prefix`), read only where the digests are
not given (:func:`made`).
"""

from __future__ import annotations

from lazycore.dialect.spec import spec_of
from lazycore.ir.graph import Node, Value, digest, map_operands, node_prefix, operand_bytes
from lazycore.ir.memo import Memo
from lazycore.ir.regions import Body, RegionNode, region_prefix

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


def prefix(node: Node) -> bytes:
    """The node's digest input before its operands: its op, attributes and
    result types, and a loop's, branch's or call's bodies."""
    if type(node) is RegionNode:
        return region_prefix(node.op, node.bodies, node.types)
    return node_prefix(spec_of(node.op), node.attrs, node.types)[1]


def entries(nodes, at) -> list:
    """``nodes`` (in an order where operands come first) as entries, their
    operand values numbered by ``at(value)``."""
    return [(node.op, tuple(at(o) if type(o) is Value else tuple(at(x) for x in o) for o in node.operands),
             node.bodies if type(node) is RegionNode else node.attrs, node.types, prefix(node))
            for node in nodes]


def made(entries, env: list, digests=None, locs=None, loc=None, make: bool = True) -> tuple:
    """The entries interpreted once: each entry's node made on the values of
    the list ``env`` (what the operands number into besides the entries'
    results), its results appended to ``env``; returns the nodes' digests.
    ``digests``: each entry's, else hashed as
    :func:`~lazycore.ir.graph.make_node` hashes (its prefix, then its
    operands'). ``make`` False: the digests only, nothing made (a stand-in
    holding its digest takes each node's place in ``env``). ``locs``: each
    entry's source line, else ``loc`` for all."""
    out = []
    put = out.append
    for k, (op, operands, attrs, types, pre) in enumerate(entries):
        ops = tuple(env[i] if type(i) is int else tuple(env[j] for j in i) for i in operands)
        d = digest(pre + operand_bytes(ops)) if digests is None else digests[k]
        put(d)
        node = node_again(op, ops, attrs, types, d, loc if locs is None else locs[k]) if make else _Hashed(d)
        env.extend(Value(node, r) for r in range(len(types)))
    return tuple(out)


class _Hashed:
    """A node of a replay as far as hashing its users needs it: its digest."""

    __slots__ = ("digest",)

    def __init__(self, d: bytes):
        self.digest = d


def onto(order, get, new: dict, every: bool = False) -> None:
    """The nodes of ``order`` (post-order) made again on moved operands:
    ``get(value)`` is the value now in a value's place; ``new`` receives
    ``(id(node), index)`` -> the value replacing each result of a node made
    again. A ``call`` node's body is made again in its place
    (:func:`body_on`: inlined); a leaf stays; another node is made again
    where an operand moved, or always with ``every`` (a body's nodes on new
    operands: each copy its own nodes, none shared with another copy)."""
    for node in order:
        if node.is_leaf:
            continue
        operands = map_operands(node.operands, get)
        if type(node) is RegionNode and node.op == "call":
            values = body_on(node.bodies[0], operands[0])
        elif every or operands != node.operands:
            made_ = again(node, operands)
            values = [Value(made_, i) for i in range(len(node.types))]
        else:
            continue
        for i, v in enumerate(values):
            new[(id(node), i)] = v


def body_on(body: Body, operands: tuple) -> list:
    """What ``body`` yields, its nodes made again on ``operands`` (the values
    at its boundary positions), a ``call`` node's body inlined too."""
    at = body.boundary
    new: dict = {}

    def get(v):
        k = (id(v[0]), v[1])
        p = at.get(k)
        return operands[p] if p is not None else new.get(k, v)

    onto(body.order, get, new, every=True)
    return [get(v) for v in body.results]


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
