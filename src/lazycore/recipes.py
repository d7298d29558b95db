"""Lowerings recorded once per call signature and replayed (the trace fast path).

A frontend turns one array-op call into a few ``lazy`` nodes: a scalar
parameter, a broadcast, a convert, the op itself. The Python deciding which
nodes depends only on the call's signature (shapes, dtypes, devices, the
values of Python arguments), which repeats every step of a training loop. So
the frontend records the lowering the first time (:func:`record`) and later
calls with the same signature replay the recording (:meth:`Recipe.replay`):
only the nodes that depend on the inputs are made again, with the digests the
lowering would have given them, and everything made of constants alone
(scalar parameters with their values, their broadcasts) is shared. A replayed
step hashes exactly as a traced one, so recording never changes what
compiles.

What can be replayed is decided while recording, by what the lowering does
through the core API: every operand of every op must be one of the call's
inputs (by handle identity), a node made during the recording, or a scalar
made during it. A lowering that reads another handle (the RNG state, a cached
device array), uploads host data, observes a value (an implicit barrier) or
assigns to a handle is run again at every call. The frontend's key must cover
everything else the lowering may look at; the contract for lowerings is that
they are functions of their arguments' types and Python values.
"""

from __future__ import annotations

from lazycore import core
from lazycore.graph import Node, Value, digest, node_prefix, operand_bytes
from lazycore.sourceloc import caller
from lazycore.tensor import LazyTensor

_INPUT, _STEP, _FROZEN, _GROUP = 0, 1, 2, 3
_DIGESTS_KEPT = 64
_new_value = tuple.__new__


class _Unreplayable(Exception):
    pass


class Recorder:
    """Watches the core API while a lowering runs (installed as ``core._RECORDING``)."""

    __slots__ = ("inputs", "steps", "made", "kept", "frozen", "ok")

    def __init__(self, inputs):
        self.inputs = {}
        for i, h in enumerate(inputs):
            self.inputs.setdefault(id(h), i)
        self.steps: list = []
        self.made: dict[int, int] = {}  # id(node) -> step index
        self.kept: list[Node] = []  # the nodes of ``made``, alive so no other node takes their id
        self.frozen: dict[int, Node] = {}  # id(node) -> node made of constants only
        self.ok = True

    # hooks called by lazycore.core / lazycore.tensor
    def on_node(self, spec, handles, node, kwargs) -> None:
        if not self.ok:
            return
        try:
            refs = tuple(self._ref(h) for h in handles)
        except _Unreplayable:
            self.ok = False
            return
        if all(r[0] == _FROZEN for r in refs):
            self.frozen[id(node)] = node
            return
        _, prefix = node_prefix(spec, kwargs, node.types)
        self.made[id(node)] = len(self.steps)
        self.kept.append(node)
        self.steps.append((spec.name, refs, node.attrs, node.types, prefix))

    def on_leaf(self, node) -> None:
        self.frozen[id(node)] = node

    def taint(self) -> None:
        self.ok = False

    def _ref(self, h):
        if isinstance(h, (list, tuple)):
            return (_GROUP, tuple(self._ref(x) for x in h), None)
        i = self.inputs.get(id(h))
        if i is not None:
            return (_INPUT, i, None)
        node, index = h._value
        k = self.made.get(id(node))
        if k is not None:
            return (_STEP, k, index)
        if id(node) in self.frozen:
            return (_FROZEN, h._value, None)
        raise _Unreplayable

    def _out(self, result):
        if result is None:
            return None
        if isinstance(result, LazyTensor):
            return (self._ref(result), result.device)
        if isinstance(result, (list, tuple)):
            return (type(result), tuple(self._out(r) for r in result))
        raise _Unreplayable


class Recipe:
    """A recorded lowering: the nodes to make again and where the results come from."""

    __slots__ = ("steps", "out", "aliased", "_digests")

    def __init__(self, steps, out, aliased):
        self.steps = steps
        self.out = out
        self.aliased = aliased
        """The inputs' identity pattern when some were one handle (``x * x``):
        the recipe then only fits calls with the same pattern."""
        self._digests: dict = {}
        """Input digests -> the node digests replaying on such inputs made: a
        step that repeats feeds inputs of the same structures, whose nodes
        then hash as before (no hashing). One signature may serve a few
        places in a step (two ReLUs of one shape, a chain of 25 scalings),
        hence up to ``_DIGESTS_KEPT`` entries."""

    def fits(self, inputs) -> bool:
        return self.aliased is None or alias_pattern(inputs) == self.aliased

    def replay(self, inputs):
        """The lowering's result for ``inputs`` (handles in the recorded order).
        Every result handle is new, even where the lowering returned an input."""
        loc = caller(2)
        vals = [h._value for h in inputs]
        key = tuple([(v[0].digest, v[1]) for v in vals])
        digests = self._digests.get(key)
        hit = digests is not None
        if not hit:
            digests = []
        made = []
        for i, (name, refs, attrs, types, prefix) in enumerate(self.steps):
            operands = []
            for ref in refs:
                kind, a, b = ref
                if kind == _INPUT:
                    operands.append(vals[a])
                elif kind == _STEP:
                    operands.append(_new_value(Value, (made[a], b)))
                elif kind == _FROZEN:
                    operands.append(a)
                else:
                    operands.append(_resolve(ref, inputs, made))
            if hit:
                d = digests[i]
            else:  # make_node's digest
                d = digest(prefix + operand_bytes(operands))
                digests.append(d)
            made.append(Node(name, tuple(operands), attrs, types, d, loc))
        if not hit:
            if len(self._digests) >= _DIGESTS_KEPT:
                self._digests.clear()
            self._digests[key] = digests
        return _build(self.out, inputs, made)


def _resolve(ref, inputs, made):
    kind, a, b = ref
    if kind == _INPUT:
        return inputs[a]._value
    if kind == _STEP:
        return Value(made[a], b)
    if kind == _FROZEN:
        return a
    return tuple(_resolve(r, inputs, made) for r in a)  # a variadic group


def _build(out, inputs, made):
    if out is None:
        return None
    first, second = out
    if type(first) is type:  # a list or tuple of results
        return first(_build(o, inputs, made) for o in second)
    kind, a, b = first
    if kind == _INPUT:  # a fresh handle, as every other result is
        return LazyTensor(inputs[a]._value, second)
    if kind == _STEP:
        return LazyTensor(Value(made[a], b), second)
    return LazyTensor(a, second)


def alias_pattern(inputs) -> tuple:
    """For each input, the position of its first occurrence: ``(0, 1)`` for two
    handles, ``(0, 0)`` for one handle twice (a recording's inputs pattern)."""
    seen: dict[int, int] = {}
    return tuple(seen.setdefault(id(h), i) for i, h in enumerate(inputs))


def float_key(x: float):
    """A Python float as a key part for the recording that baked it in:
    -0.0 == 0.0 and nan != nan, yet each is its own constant."""
    return x if x != 0.0 and x == x else repr(x)


def record(fn, inputs, *args, **kwargs):
    """Run ``fn(*args, **kwargs)`` watching the core API; ``inputs`` are the
    handles among the arguments, in a fixed order. Returns ``(result,
    recipe)``, the recipe None when the lowering cannot be replayed (or
    returned NotImplemented). Recording inside a recording records nothing
    of its own: the outer recording sees every node."""
    if core._RECORDING is not None:
        return fn(*args, **kwargs), None
    rec = Recorder(inputs)
    core._RECORDING = rec
    try:
        result = fn(*args, **kwargs)
    finally:
        core._RECORDING = None
    if not rec.ok or result is NotImplemented:
        return result, None
    try:
        out = rec._out(result)
    except _Unreplayable:
        return result, None
    aliased = alias_pattern(inputs)
    if aliased == tuple(range(len(aliased))):
        aliased = None
    return result, Recipe(tuple(rec.steps), out, aliased)


def recording() -> bool:
    """True while a lowering is being recorded."""
    return core._RECORDING is not None
