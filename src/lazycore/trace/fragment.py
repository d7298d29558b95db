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
Python generated at its first replay (one line per node, its op, attributes
and types constants of the function: :class:`lazycore.ir.remake.Source`);
interpreting the entries at every call cost more than the nodes it made
(benchmark 1: 13.0 us an op interpreted, 10.8 us generated; the example
frontend 5.9 against 4.0). Fragments of one shape share their compiled code,
so generating costs a first replay little more than interpreting it did. A
fragment made once and never replayed (a captured step's call body) is made
by interpreting its entries (:func:`lazycore.ir.remake.made`,
:meth:`Fragment.made_once`), which also hashes a large fragment's entries on
inputs of a new kind:
each form is the slower one where the other is used (docs/dev/replay.md
measures both: interpreting every replay made traced steps 13-37% slower in
Python; generating a 132-node call body cost ~20 times walking it).
The nodes get the digests :func:`~lazycore.ir.graph.make_node` would give
them: hashed once per kind of inputs (their digests) and then looked up, so a
replayed step hashes exactly as a traced one and compiles nothing new. Source locations are the call's
(one for every node of a lowering) or each entry's own (a captured step).
"""

from __future__ import annotations

from lazycore.ir.graph import digest, index_bytes
from lazycore.ir.remake import Source, made
from lazycore.ir.tensor import LazyTensor

_DIGESTS_KEPT = 64
"""Kinds of inputs a fragment keeps node digests for: one signature may serve
a few places in a step (two ReLUs of one shape, a chain of 25 scalings)."""

_HASHED_IN_LINES = 64
"""Entries up to which a fragment's generated replay hashes inputs of a new
kind in lines of its own (:meth:`Fragment._hashing`); a larger fragment's (a
captured step's: a GPT step's 2,300 nodes, its inputs of one kind at every
call) calls :func:`lazycore.ir.remake.made` (hashing only), as the lines
would double its compile."""


class Fragment:
    """Nodes to make again on new input values (see the module docs).

    ``n_handles``: how many of the inputs :meth:`replay` takes as handles (it
    reads their values), before the ones it takes as values. ``result``: what
    :meth:`replay` returns: None for the list of output values, else the
    outputs as tensors, ``(output index, device)``, nested in ``(sequence
    type, results)``."""

    __slots__ = ("entries", "n_inputs", "consts", "outputs", "locs", "n_handles", "result", "label", "_digests",
                 "fast")

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
        at the first :meth:`replay` (a caller on the per-op path calls it
        directly once made); it hashes inputs of a kind it has not met."""

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
            fast = self.fast = self._generate()
        return fast(handles, values, loc)

    def made_once(self, values, loc=None) -> list:
        """The output values made on ``values`` (all inputs as values), hashed
        as :func:`~lazycore.ir.graph.make_node` hashes, for a fragment made
        once rather than replayed (a captured step's call body, on
        placeholders): generating code for one use cost a GPT step's
        recording ~0.4 s of compiling for 2,300 nodes."""
        inputs = list(values)
        env = inputs + list(self.consts)
        self.remember(inputs, made(self.entries, env, None, self.locs, loc))
        return [env[p] for p in self.outputs]

    def _generate(self):
        code = Source("def fast(handles, values, loc):", DIGESTS=self._digests, LT=LazyTensor, DIGEST=digest,
                      IB=index_bytes, HASH=made)
        names = [f"v{i}" for i in range(self.n_inputs)] + [code.const(c) for c in self.consts]
        for i in range(self.n_inputs):
            code.line(f"v{i} = handles[{i}]._value" if i < self.n_handles else f"v{i} = values[{i - self.n_handles}]")
        key = "".join(f"v{i}[0].digest, v{i}[1], " for i in range(self.n_inputs))
        code.line(f"key = ({key})")
        code.line("ds = DIGESTS.get(key)")
        code.line("if ds is None:")
        if len(self.entries) <= _HASHED_IN_LINES:
            self._hashing(code)
        else:
            code.line(f"    ds = HASH({code.const(self.entries)}, ["
                      + "".join(f"v{i}, " for i in range(self.n_inputs)) + f"*{code.const(self.consts)}], make=False)")
        code.line(f"    if len(DIGESTS) >= {_DIGESTS_KEPT}:")
        code.line("        DIGESTS.clear()")
        code.line("    DIGESTS[key] = ds")
        code.entries(self.entries, names, "ds", "loc", self.locs)
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

    def _hashing(self, code: Source) -> None:
        """The lines (the miss branch of :meth:`_generate`'s function) that
        hash the entries on inputs of a new kind into ``ds``, remembered under
        ``key``. Each node's digest input is :func:`~lazycore.ir.graph.make_node`'s:
        its prefix, then each operand value's digest and index
        (:func:`~lazycore.ir.graph.operand_bytes`), the parts not read from
        the inputs made while generating. Returning for the inputs to be
        hashed by an interpreted walk and running the function again cost a
        replay on new inputs (a chain on a fresh batch, a recipe serving more
        than :data:`_DIGESTS_KEPT` places of a step) the walk and two more runs
        of the function."""
        parts = []  # value number -> the expression of its digest bytes
        for i in range(self.n_inputs):
            code.line(f"    b{i} = v{i}[0].digest + IB(v{i}[1])")
            parts.append(f"b{i}")
        for node, index in self.consts:
            parts.append(code.const(node.digest + index_bytes(index)))
        for k, (_, operands, _, types, prefix) in enumerate(self.entries):
            joined = [code.const(prefix)]
            for o in operands:
                if type(o) is int:
                    joined.append(parts[o])
                else:  # a variadic group: a marker and its size first
                    joined.append(code.const(b"G" + index_bytes(len(o))))
                    joined += [parts[j] for j in o]
            code.line(f"    d{k} = DIGEST(b''.join(({', '.join(joined)}, )))")
            parts += [f"d{k} + {code.const(index_bytes(r))}" for r in range(len(types))]
        code.line("    ds = (" + "".join(f"d{k}, " for k in range(len(self.entries))) + ")")


def _key(inputs) -> tuple:
    return tuple([part for v in inputs for part in (v[0].digest, v[1])])

