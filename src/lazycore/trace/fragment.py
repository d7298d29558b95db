"""A recorded piece of graph and the one way to make it again.

Per-op recordings (a lowering's, :mod:`.recipes`; view reads and writes go
through them) and captured steps (:mod:`.capture`) both end as a
:class:`Fragment`: the nodes a traced call made, as plain data, over
numbered values. Values ``0 .. n_inputs-1`` are the inputs given at a replay,
then come the constants kept as they are, then each entry's results in order.
An entry is ``(op, operands, attrs, types, prefix)``: operands are value
numbers (a tuple of numbers for a variadic group), ``prefix`` the digest
input before the operands (:func:`lazycore.ir.graph.node_prefix`). A loop or
branch's entry has its bodies in place of the attributes, and is made again
as a :class:`~lazycore.ir.regions.RegionNode` sharing them.

:meth:`Fragment.replay` makes the nodes on new input values with straight-line
Python generated once per fragment (one line per node, its op, attributes
and types constants of the function): interpreting the entries at every call
cost more than the nodes it made. The first replay still interprets them:
generating and compiling the code costs ~0.4 ms a fragment, and most of a
first step's fragments are replayed once in it (131 of 185 for a small GPT
step), 70-90 ms of its trace in a process whose program was on disk. The
nodes get the digests
:func:`~lazycore.ir.graph.make_node` would give them: hashed once per kind of
inputs (their digests) and then looked up, so a replayed step hashes exactly
as a traced one and compiles nothing new. Source locations are the call's
(one for every node of a lowering) or each entry's own (a captured step).
"""

from __future__ import annotations

from lazycore.ir.graph import Node, Value, digest, operand_bytes
from lazycore.ir.regions import RegionNode
from lazycore.ir.tensor import LazyTensor

_DIGESTS_KEPT = 64
"""Kinds of inputs a fragment keeps node digests for: one signature may serve
a few places in a step (two ReLUs of one shape, a chain of 25 scalings)."""

MISS = object()


class Fragment:
    """Nodes to make again on new input values (see the module docs).

    ``n_handles``: how many of the inputs :meth:`replay` takes as handles (it
    reads their values), before the ones it takes as values. ``result``: what
    :meth:`replay` returns: None for the list of output values, else the
    outputs as tensors, ``(output index, device)``, nested in ``(sequence
    type, results)``."""

    __slots__ = ("entries", "n_inputs", "consts", "outputs", "locs", "n_handles", "result", "label", "_digests",
                 "fast", "_interpreted")

    def __init__(self, entries, n_inputs: int, consts, outputs, locs=None, label: str = "a recording",
                 n_handles: int = 0, result=None):
        self.entries = tuple(entries)
        self.n_inputs = n_inputs
        self.consts = tuple(consts)
        """Values used as they are (constants, scalar parameters made while recording)."""
        self.outputs = tuple(outputs)
        """Value numbers :meth:`replay` returns, in order."""
        self.locs = locs
        """Each entry's source location, or None: the location given to :meth:`replay`."""
        self.n_handles = n_handles
        self.result = result
        self.label = label
        self._digests: dict = {}
        """Input digests -> the entries' digests on such inputs."""
        self.fast = None
        """``fast(handles, values, loc)``: the replay as generated code, made
        at the first :meth:`replay`; returns ``MISS`` for inputs of a kind
        not hashed yet. (A caller on the per-op path calls it first.)"""
        self._interpreted = False

    def remember(self, inputs, digests) -> None:
        """The entries' ``digests`` on input values ``inputs`` (as recorded: no
        hashing at the first replay)."""
        if len(self._digests) >= _DIGESTS_KEPT:
            self._digests.clear()
        self._digests[_key(inputs)] = tuple(digests)

    def replay(self, handles=(), values=(), loc=None):
        """The outputs made again on the inputs: ``handles`` (``n_handles`` of
        them), then ``values``."""
        fast = self.fast
        if fast is None:
            if not self._interpreted:  # the first replay (module doc)
                self._interpreted = True
                return self._interpret(handles, values, loc)
            fast = self.fast = self._generate()
        out = fast(handles, values, loc)
        if out is MISS:
            self._hash([h._value for h in handles] + list(values))
            out = fast(handles, values, loc)
        return out

    def _hash(self, inputs) -> None:
        """The entries' digests on inputs of a new kind, as ``make_node`` gives them."""
        env = list(inputs) + list(self.consts)
        digests = []
        for _, operands, _, types, prefix in self.entries:
            ops = _operands(env, operands)
            d = digest(prefix + operand_bytes(ops))
            digests.append(d)
            hashed = _Hashed(d)
            env.extend(Value(hashed, r) for r in range(len(types)))
        self.remember(inputs, digests)

    def _interpret(self, handles, values, loc):
        """What the generated code does, entry by entry."""
        inputs = [h._value for h in handles[:self.n_handles]] + list(values[:self.n_inputs - self.n_handles])
        ds = self._digests.get(_key(inputs))
        if ds is None:
            self._hash(inputs)
            ds = self._digests[_key(inputs)]
        env = inputs + list(self.consts)
        for k, (op, operands, attrs, types, _) in enumerate(self.entries):
            ops = _operands(env, operands)
            at = loc if self.locs is None else self.locs[k]
            if type(attrs) is tuple:  # a loop or branch: its bodies, shared
                node = RegionNode.remade(op, ops, attrs, types, ds[k], at)
            else:
                node = Node(op, ops, attrs, types, ds[k], at)
            env.extend(tuple.__new__(Value, (node, r)) for r in range(len(types)))
        outs = [env[p] for p in self.outputs]

        def result(spec):
            if spec is None:
                return None
            first, second = spec
            if type(first) is int:
                return LazyTensor(outs[first], second)
            return first([result(o) for o in second])

        return outs if self.result is None else result(self.result)

    def _generate(self):
        code = _Code("def fast(handles, values, loc):", MISS=MISS, DIGESTS=self._digests)
        names = [f"v{i}" for i in range(self.n_inputs)] + [code.const(c) for c in self.consts]
        for i in range(self.n_inputs):
            code.line(f"v{i} = handles[{i}]._value" if i < self.n_handles else f"v{i} = values[{i - self.n_handles}]")
        key = "".join(f"v{i}[0].digest, v{i}[1], " for i in range(self.n_inputs))
        code.line(f"ds = DIGESTS.get(({key}))")
        code.line("if ds is None:")
        code.line("    return MISS")
        for k, (op, operands, attrs, types, _) in enumerate(self.entries):
            ops = [names[i] if type(i) is int else "(" + "".join(names[j] + ", " for j in i) + ")" for i in operands]
            loc = "loc" if self.locs is None else code.const(self.locs[k])
            if type(attrs) is tuple:  # a loop or branch: its bodies, shared (lazycore.ir.regions)
                code.line(f"n{k} = REGION({code.const(op)}, ({''.join(o + ', ' for o in ops)}), {code.const(attrs)}, "
                          f"{code.const(types)}, ds[{k}], {loc})")
            else:
                code.node(f"n{k}", op, ops, attrs, types, f"ds[{k}]", loc)
            for r in range(len(types)):
                names.append(f"TV(Value, (n{k}, {r}))")
        outs = [names[p] for p in self.outputs]

        def result(spec) -> str:
            if spec is None:
                return "None"
            first, second = spec
            if type(first) is int:
                return f"LT({outs[first]}, {code.const(second)})"
            return f"{code.const(first)}([" + ", ".join(result(o) for o in second) + "])"

        code.line("return " + ("[" + "".join(o + ", " for o in outs) + "]" if self.result is None
                               else result(self.result)))
        return code.function(f"{self.label}, {len(self.entries)} nodes")


def _operands(env: list, operands: tuple) -> tuple:
    """An entry's operands: value numbers read in ``env``, a variadic group as a tuple."""
    return tuple(env[i] if type(i) is int else tuple(env[j] for j in i) for i in operands)


def _key(inputs) -> tuple:
    return tuple([part for v in inputs for part in (v[0].digest, v[1])])


class _Hashed:
    """A node of a replay as far as hashing its users needs it: its digest."""

    __slots__ = ("digest",)

    def __init__(self, d: bytes):
        self.digest = d


class _Code:
    """One generated function in the making: its constants and its lines."""

    def __init__(self, header: str, **names):
        self.env = {"Node": Node, "TV": tuple.__new__, "Value": Value, "LT": LazyTensor, "REGION": RegionNode.remade,
                    **names}
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
