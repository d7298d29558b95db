"""Loops and branches in the graph: ``fori_loop``, ``while_loop``, ``cond``, ``scan``.

The semantics are ``jax.lax``'s. Carries are pytrees (tuples, lists, dicts,
named tuples, None) of lazy values: core handles or any frontend's arrays
(:mod:`lazycore.trace.protocol`), and Python numbers. A body is called once,
on placeholder values, and what it records becomes a sub-graph of one
:class:`~lazycore.ir.regions.RegionNode`: a loop of a thousand iterations is
one loop in the program. A body's output of another structure, shape or
dtype than its input raises TypeError at the call, as in jax.

Every value a body reads that it did not make (an outer value it closes
over, a Python number it turned into a program parameter) becomes an
operand of the region node: a loop carries it through unchanged, a branch
takes it as an operand. So a body is a closed graph and its node's digest
covers it: the compile cache keys a program with a loop as any other, and a
new trip count or a new closed-over number does not recompile.

While a body is traced its values live in an arena of their own: a barrier
meanwhile does not try to compute them, and a value that escapes the body
(kept in an outer variable) fails when read, naming this, as jax's leaked
tracers do.
"""

from __future__ import annotations

import functools
import sys

from typing import Any, Callable

import numpy as np

from lazycore.dialect.types import TensorType, to_numpy_dtype
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.failure import Failure
from lazycore.ir.graph import LOG, Data, Value, constant_only, operand_values
from lazycore.ir.memo import Memo
from lazycore.ir.regions import Arg, Body, RegionNode
from lazycore.ir.sourceloc import caller as _user_frame
from lazycore.ir.tensor import Arena, LazyTensor
from lazycore.runtime import device as _device
from lazycore.runtime import failures as _failures

from . import core
from . import eager_core as _eager_core
from .protocol import handle_of, is_lazy, wrap_like

__all__ = ["cond", "fori_loop", "scan", "while_loop"]


# --- pytrees ---------------------------------------------------------------------


class _Tree:
    """The structure of a pytree: its container kinds and keys, leaves left out."""

    __slots__ = ("kind", "meta", "children")

    def __init__(self, kind, meta, children):
        self.kind, self.meta, self.children = kind, meta, children

    def __eq__(self, other):
        return (isinstance(other, _Tree) and self.kind == other.kind and self.meta == other.meta
                and self.children == other.children)

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(map(repr, self.children))
        if self.kind == "dict":
            inner = ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.meta, self.children))
            return "{" + inner + "}"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        return f"({inner}{',' if len(self.children) == 1 else ''})"


def _locked(fn):
    """``fn`` under :data:`lazycore.ir.context.LOCK`: a loop or branch is one
    step of the shared graph; tracing its bodies swaps the device's live
    registry and the trace context, which no other thread may see (docs/threads.md)."""

    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with LOCK:
            return fn(*args, **kwargs)

    return locked


def _flatten(tree, leaves: list) -> _Tree:
    if tree is None:
        return _Tree("none", None, ())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return _Tree("namedtuple", type(tree), tuple(_flatten(c, leaves) for c in tree))
    if type(tree) is tuple:
        return _Tree("tuple", None, tuple(_flatten(c, leaves) for c in tree))
    if type(tree) is list:
        return _Tree("list", None, tuple(_flatten(c, leaves) for c in tree))
    if type(tree) is dict:
        keys = tuple(sorted(tree))  # jax's order
        return _Tree("dict", keys, tuple(_flatten(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return _Tree("leaf", None, ())


def flatten(tree) -> tuple[list, _Tree]:
    leaves: list = []
    return leaves, _flatten(tree, leaves)


def unflatten(tree: _Tree, leaves) -> Any:
    return _build(tree, iter(leaves))


def _build(t: _Tree, it) -> Any:
    # a module function, not a closure calling itself: that would be a
    # reference cycle keeping the leaves (pending values: program outputs) alive
    if t.kind == "leaf":
        return next(it)
    if t.kind == "none":
        return None
    kids = [_build(c, it) for c in t.children]
    if t.kind == "tuple":
        return tuple(kids)
    if t.kind == "list":
        return kids
    if t.kind == "namedtuple":
        return t.meta(*kids)
    return dict(zip(t.meta, kids))


# --- leaves ----------------------------------------------------------------------


class _Leaves:
    """A flattened pytree of lazy values: the handles, and how to give each
    back in its own frontend's type."""

    def __init__(self, what: str, leaves: list, device=None):
        self.examples: list = []
        self.handles: list[LazyTensor] = []
        numbers = []
        for i, x in enumerate(leaves):
            if is_lazy(x):
                h = handle_of(x)
                if device is None:
                    device = h.device
                elif h.device is not device:
                    raise ValueError(f"{what}: leaf {i} is on {h.device.name}, the others on {device.name}")
                self.examples.append(x)
                self.handles.append(h)
            elif isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
                numbers.append(i)
                self.examples.append(None)
                self.handles.append(None)
            else:
                raise TypeError(f"{what}: leaf {i} is a {type(x).__name__}, not a lazy value or a Python number")
        self.device = device = _device.get(device)
        frontend = next((x for x in self.examples if x is not None), None)
        for i in numbers:
            # a number joins as a program parameter (jax makes it an array):
            # a new value runs the same program
            self.handles[i] = core.scalar(leaves[i], device=device, fold=False)
            self.examples[i] = frontend
        self.types = [h.type for h in self.handles]

    def wrap(self, handles) -> list:
        return [h if ex is None else wrap_like(ex, h) for ex, h in zip(self.examples, handles)]


def _types_text(tree: _Tree, types) -> str:
    return f"{tree!r} with {', '.join(map(str, types)) or 'no leaves'}"


# --- tracing a body ---------------------------------------------------------------


class _BodyRecorder:
    """Sees every node the core API makes while a body is traced."""

    __slots__ = ("made",)

    def __init__(self):
        self.made: dict[int, Any] = {}

    def plain(self, value):
        return value, None

    def int_place(self, value) -> None:
        return None  # (a body's numbers: the step-log places alone)

    def on_node(self, spec, handles, node, kwargs) -> None:
        self.made[id(node)] = node

    def on_leaf(self, node, source=None) -> None:
        # a baked number (lazy.constant) stays in the body; a parameter leaf
        # is read from outside it, as an operand
        if not node.is_leaf:
            self.made[id(node)] = node

    def taint(self) -> None:
        pass  # a read inside a body fails at its barrier (Arg has no value)

    def on_assign(self, handle) -> None:
        pass


class _Traced:
    """A body traced over placeholders: its outputs, the outer values it reads
    and its value checks."""

    def __init__(self, args: list[Arg], outs: list[Value], out_tree: _Tree, out_examples: list, made: dict,
                 since: int | None):
        self.args = args
        self.outs = outs
        self.out_tree = out_tree
        self.out_examples = out_examples
        self.out_types = [v.type for v in outs]
        self.made, self.since = made, since
        self.flags: list[Value] = []
        """What the body yields after ``outs``: each check's flag (see :func:`_flags`)."""
        self.captured, self.checks = _captured(args, outs, made, since)

    def extend(self, args: list[Arg], flags: list[Value]) -> None:
        """Placeholders and flag outputs added after tracing: what the body reads is found again."""
        self.args = self.args + args
        self.flags = flags
        self.captured, _ = _captured(self.args, self.outs + flags, self.made, self.since)

    @property
    def results(self) -> list[Value]:
        return self.outs + self.flags


def _captured(args: list[Arg], outs: list[Value], made: dict, since: int | None) -> tuple[list[Value], list]:
    """The outer values a body reads, and its value checks (``lazy.check``
    nodes the outputs depend on). Inside the body are the placeholders,
    the nodes the core API made while it was traced (constants too), and any
    node made meanwhile that depends on a placeholder (a frontend's replayed
    recording makes nodes without the core API); everything else the body's
    nodes use is outer. ``since``: the step-log number of the first node made
    while tracing (nodes numbered lower are outer without looking further);
    None when the log was off (then dependence decides)."""
    inner: dict[int, bool] = {id(a): True for a in args}

    def operand_nodes(node):
        return [v[0] for v in operand_values(node)]

    stack = [v[0] for v in outs]
    while stack:  # post-order: a node's inner-ness once its operands' is known
        node = stack[-1]
        if id(node) in inner:
            stack.pop()
            continue
        if node.is_leaf or (since is not None and node.seq < since and id(node) not in made):
            inner[id(node)] = False
            stack.pop()
            continue
        todo = [n for n in operand_nodes(node) if id(n) not in inner]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        inner[id(node)] = id(node) in made or any(inner[id(n)] for n in operand_nodes(node))
    captured: dict[tuple[int, int], Value] = {}
    seen: set[int] = set()
    checks = []
    stack = list(outs)
    while stack:
        v = stack.pop()
        node = v[0]
        if not inner[id(node)]:
            captured.setdefault((id(node), v[1]), v)
            continue
        if id(node) in seen or node.is_leaf:
            continue
        seen.add(id(node))
        if node.op == "check":
            checks.append(node)
        stack.extend(operand_values(node))
    checks.sort(key=lambda n: n.seq)  # the order they were recorded in: one loop, one program
    return list(captured.values()), checks


# A value check inside a body (torch's integer division by zero) cannot raise
# from inside the loop: the program learns its values as it runs. Each check
# becomes an i1 flag the region node yields (a loop carries it, OR-ed each
# iteration; a branch yields its own checks' flags and false for the other
# branch's), and outside the node the same check, with the same message,
# error and line, guards every result on that flag (lazycore.runtime.checks).


def _in_body(traced: _Traced, device, make: Callable):
    """``make()`` run as if in the traced body: its nodes belong to it, its handles to no live arena."""
    outer, TRACE.recorder = TRACE.recorder, _BodyRecorder()
    TRACE.recorder.made = traced.made
    arena, device.arena = device.arena, Arena()
    try:
        return make()
    finally:
        TRACE.recorder = outer
        device.arena = arena


def _false(device) -> LazyTensor:
    return core.apply("constant", value=np.zeros((), np.bool_), device=device)


def _guarded(results: list, checks: list, flags: list) -> list:
    """``results`` (handles) each checked on every flag, as the body's checks say."""
    out = []
    for h in results:
        for node, flag in zip(checks, flags):
            h = core.apply("check", h, flag, message=node.attrs["message"], error=node.attrs["error"])
            h._value[0].loc = node.loc  # the user's line in the body, where eager raises
        out.append(h)
    return out


BODIES = Memo("trace.loop_bodies", 256)
"""``(key, what, placeholder types, device)`` -> a body traced for a caller
that named its body function with ``key`` (:func:`scan`'s, with the user's
line, which the body's nodes name): the same body for every call from that
line, instead of tracing it again (a recurrent layer's step,
traced twice a call and twice more for its backward, was most of a traced
LSTM step's time). Kept only where the body reads no outer value but
constants and scalar parameters (a weight it closed over would be the first
call's) and has no value checks; a frontend drops them all where the
lowerings they were traced through change (``lowering.when_changed``)."""


def _reusable(traced: _Traced) -> bool:
    memo: dict = {}
    return not traced.checks and all(constant_only(v[0], memo) for v in traced.captured)


def _trace(fn: Callable, what: str, arg_types: list[TensorType], device, make_args: Callable, key=None) -> _Traced:
    """Call ``fn`` on placeholders of ``arg_types``: ``make_args(handles)``
    gives its arguments. With ``key`` (what ``fn`` computes, for a pure ``fn``),
    a body traced before for that key is taken from :data:`BODIES`."""
    if key is not None:
        key = (key, what, tuple(arg_types), device.name)
        known = BODIES.get(key)
        if known is not None:
            if TRACE.recorder is not None:
                TRACE.recorder.taint()  # (as a trace would: see below)
            return known
    traced = _traced(fn, what, arg_types, device, make_args)
    if key is not None and _reusable(traced):
        BODIES.put(key, traced)
    return traced


def _traced(fn: Callable, what: str, arg_types: list[TensorType], device, make_args: Callable) -> _Traced:
    args = [Arg(i, t) for i, t in enumerate(arg_types)]
    outer, TRACE.recorder = TRACE.recorder, None
    if outer is not None:
        # (with the recording hidden: a recorded lowering's recorder then takes the
        # region node made of this body, bodies and all, when it meets it in the
        # log, and refuses only a body that reads a value it does not know:
        # lazycore.trace.recipes, Recorder.taint; a body's recorder ignores it)
        outer.taint()
    arena, device.arena = device.arena, Arena()
    rec = _BodyRecorder()
    since = LOG.start + len(LOG.nodes) if LOG.on else None
    TRACE.recorder = rec
    try:
        handles = [LazyTensor(Value(a, 0), device) for a in args]
        out = fn(*make_args(handles))
        del handles
        leaves, tree = flatten(out)
        outs, examples = [], []
        for i, x in enumerate(leaves):
            if is_lazy(x):
                h = handle_of(x)
                if h.device is not device:
                    raise ValueError(f"{what}: output leaf {i} is on {h.device.name}, the loop on {device.name}")
                examples.append(x)
            elif isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating)):
                h = core.scalar(x, device=device, fold=False)
                examples.append(None)
            else:
                raise TypeError(f"{what} returned a {type(x).__name__} (leaf {i}), not a lazy value or a number")
            outs.append(h._value)
        if not LOG.on or (since is not None and LOG.start + len(LOG.nodes) < since):
            since = None  # the log stopped (or a barrier reset it) meanwhile: numbers do not tell
        return _Traced(args, outs, tree, examples, rec.made, since)
    finally:
        TRACE.recorder = outer
        body_arena, device.arena = device.arena, arena
        _fail_escaped(body_arena, what)


def _fail_escaped(arena: Arena, what: str) -> None:
    """Handles made in a body and still held outside it have no value: reading
    one (or a value computed from it) raises, naming this."""
    for h in arena.live():
        if type(h._value[0]) is Data:
            continue  # an upload made inside the body is a value like any other
        leaf = Data(None, h.type, owned=False)
        _failures.mark(leaf, Failure(
            f"this value was made inside the body of {what} and kept outside it: it exists only while the body "
            "is traced; return it from the body instead", None, None, "trace", None))
        h._value = Value(leaf, 0)


def _merged(start: int, *traced: _Traced) -> tuple[dict[tuple[int, int], int], list[Value]]:
    """The outer values some bodies of one region node read, once each: their
    operand positions (from ``start``, after the node's own operands) and the values."""
    at: dict[tuple[int, int], int] = {}
    extra: list[Value] = []
    for t in traced:
        for v in t.captured:
            k = (id(v[0]), v[1])
            if k not in at:
                at[k] = start + len(extra)
                extra.append(v)
    return at, extra


def _body(traced: _Traced, captured_at: dict[tuple[int, int], int], results: list[Value]) -> Body:
    boundary = {(id(a), 0): i for i, a in enumerate(traced.args)}
    boundary.update(captured_at)
    return Body(traced.args, results, boundary)


def _node(kind: str, operands: tuple, bodies, types, device) -> list[LazyTensor]:
    node = RegionNode(kind, operands, tuple(bodies), tuple(types), _user_frame())
    rec = TRACE.recorder
    if type(rec) is _BodyRecorder:  # a loop inside a body is part of that body
        rec.made[id(node)] = node
    return [LazyTensor(Value(node, i), device) for i in range(len(types))]


# --- the API ------------------------------------------------------------------------


@_locked
def while_loop(cond_fun: Callable, body_fun: Callable, init_val):
    """``jax.lax.while_loop``: ``val = init_val; while cond_fun(val): val = body_fun(val)``,
    as one loop in the program."""
    leaves, tree = flatten(init_val)
    init = _Leaves("while_loop init_val", leaves)
    return unflatten(tree, _while(cond_fun, body_fun, init, tree, "while_loop"))


def _while(cond_fun, body_fun, init: _Leaves, tree: _Tree, what: str, key=None) -> list:
    device, types = init.device, init.types

    def args(handles):
        return (unflatten(tree, init.wrap(handles)),)

    cond = _trace(cond_fun, f"{what}'s cond_fun", types, device, args, key)
    if len(cond.outs) != 1 or cond.out_tree.kind != "leaf" or cond.out_types[0].shape != ():
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                        f"{_types_text(cond.out_tree, cond.out_types)}")
    if cond.out_types[0].dtype != "i1":
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) {cond.out_types[0]}")
    body = _trace(body_fun, f"{what}'s body_fun", types, device, args, key)
    if body.out_tree != tree or body.out_types != types:
        raise TypeError(
            f"body_fun output and input must have identical types, got\n  input:  {_types_text(tree, types)}\n"
            f"  output: {_types_text(body.out_tree, body.out_types)}")
    if cond.checks:
        raise NotImplementedError(
            f"a value check ({cond.checks[0].attrs['message']}) in {what}'s cond_fun: a loop's condition "
            "cannot report an error; compute it in the body or outside the loop")
    n, checks = len(types), body.checks
    if checks:  # carried flags, OR-ed each iteration
        i1 = TensorType((), "i1")
        flag_args = [Arg(n + k, i1) for k in range(len(checks))]

        def updates():
            return [core.apply("or", LazyTensor(Value(a, 0), device), LazyTensor(node.operands[1], device))._value
                    for a, node in zip(flag_args, checks)]

        body.extend(flag_args, _in_body(body, device, updates))
    captured, extra = _merged(n + len(checks), cond, body)
    starts = [_false(device)._value for _ in checks]
    carried = tuple(h._value for h in init.handles) + tuple(starts) + tuple(extra)
    carried_types = types + [v.type for v in starts] + [v.type for v in extra]
    bodies = (_body(cond, captured, cond.outs), _body(body, captured, body.results + extra))
    results = _node("while", (carried,), bodies, carried_types, device)
    return init.wrap(_guarded(results[:n], checks, results[n:n + len(checks)]))


@_locked
def fori_loop(lower, upper, body_fun: Callable, init_val):
    """``jax.lax.fori_loop``: ``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``,
    as one loop in the program. ``i`` is a lazy scalar of the bounds' integer
    type (int64 for Python ints); a new Python bound runs the same program."""
    leaves, tree = flatten(init_val)
    init = _Leaves("fori_loop init_val", leaves)
    bounds = _Leaves("fori_loop bounds", [lower, upper], init.device)
    for t in bounds.types:
        if t.shape != () or not (t.dtype.startswith("i") or t.dtype.startswith("ui")) or t.dtype == "i1":
            raise TypeError(f"fori_loop bounds must be integer scalars, got {bounds.types[0]} and {bounds.types[1]}")
    if bounds.types[0] != bounds.types[1]:
        raise TypeError(f"lower and upper arguments to fori_loop must have equal types, got "
                        f"{bounds.types[0].dtype} and {bounds.types[1].dtype}")
    n = len(leaves)
    frontend = next((x for x in init.examples + bounds.examples if x is not None), None)
    state = _state(init.device, bounds.handles + init.handles, [frontend, frontend] + init.examples)

    def cond_fun(s):
        return _lt(s[0], s[1])

    def step(s):
        i, hi, val = s[0], s[1], s[2:]
        new_leaves, new_tree = flatten(body_fun(i, unflatten(tree, val)))
        if new_tree != tree:
            raise TypeError(f"body_fun output and input must have identical types, got\n  input:  {tree!r}\n"
                            f"  output: {new_tree!r}")
        return [_add_one(i), hi] + new_leaves

    out = _while(cond_fun, step, state, _flat_tree(n + 2), "fori_loop")
    return unflatten(tree, out[2:])


def _state(device, handles: list, examples: list) -> _Leaves:
    """A loop state the API builds itself (the bounds and counters around the user's carry)."""
    state = _Leaves.__new__(_Leaves)
    state.device = device
    state.handles = list(handles)
    state.types = [h.type for h in state.handles]
    state.examples = list(examples)
    return state


def _flat_tree(n: int) -> _Tree:
    return _Tree("list", None, tuple(_Tree("leaf", None, ()) for _ in range(n)))


def _lt(a, b):
    return wrap_like(a, core.apply("compare", handle_of(a), handle_of(b), direction="LT"))


def _one(dtype: str, device) -> LazyTensor:
    return core.apply("constant", value=np.ones((), to_numpy_dtype(dtype)), device=device)


def _add_one(i):
    h = handle_of(i)
    return wrap_like(i, core.apply("add", h, _one(h.dtype, h.device)))


@_locked
def cond(pred, true_fun: Callable, false_fun: Callable, *operands):
    """``jax.lax.cond``: ``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``,
    both traced, one taken when the program runs. ``pred`` is a scalar (a
    number's truth: nonzero is true)."""
    leaves, tree = flatten(operands)
    ops = _Leaves("cond operands", leaves)
    device = ops.device
    p = _Leaves("cond pred", [pred], device if ops.handles else None)
    if ops.handles and p.device is not device:
        raise ValueError(f"cond: pred is on {p.device.name}, the operands on {device.name}")
    device = p.device if not ops.handles else device
    ph = p.handles[0]
    if ph.shape != ():
        raise TypeError(f"Pred must be a scalar, got {ph.type}")
    index = core.convert_to(ph, "i1")
    out_tree, results = _case(index, [false_fun, true_fun], ops, tree, device, "cond")
    return unflatten(out_tree, results)


def _case(index: LazyTensor, branches, ops: _Leaves, tree: _Tree, device, what: str):
    def args(handles):
        return unflatten(tree, ops.wrap(handles))

    traced = [_trace(fn, f"{what}'s {name}", ops.types, device, args)
              for fn, name in zip(branches, ("false_fun", "true_fun"))]
    first, second = traced
    if first.out_tree != second.out_tree or first.out_types != second.out_types:
        raise TypeError(
            f"true_fun and false_fun output must have identical types, got\n"
            f"  true_fun:  {_types_text(second.out_tree, second.out_types)}\n"
            f"  false_fun: {_types_text(first.out_tree, first.out_types)}")
    checks = first.checks + second.checks
    if checks:  # each branch yields its own checks' flags, false for the other's
        for t, own in ((first, set(map(id, first.checks))), (second, set(map(id, second.checks)))):
            t.extend([], _in_body(t, device, lambda own=own: [
                node.operands[1] if id(node) in own else _false(device)._value for node in checks]))
    captured, extra = _merged(len(ops.types), first, second)
    operands = tuple(h._value for h in ops.handles) + tuple(extra)
    bodies = tuple(_body(t, captured, t.results) for t in traced)
    types = first.out_types + [TensorType((), "i1")] * len(checks)
    results = _node("case", (index._value, operands), bodies, types, device)
    n = len(first.out_types)
    results = _guarded(results[:n], checks, results[n:])
    examples = [ex if ex is not None else ex2 for ex, ex2 in zip(second.out_examples, first.out_examples)]
    return first.out_tree, [h if ex is None else wrap_like(ex, h) for ex, h in zip(examples, results)]


@_locked
def scan(f: Callable, init, xs=None, length: int | None = None, reverse: bool = False, *, key=None):
    """``jax.lax.scan``: ``carry, y = f(carry, x)`` for each ``x`` along the
    leading axis of ``xs`` (a pytree), as one loop in the program; returns
    the last carry and the ``y`` stacked along a new leading axis. ``key``
    (hashable, for a frontend): ``f`` is a function of its arguments alone
    and ``key`` says which, so its traced body serves every call (:data:`BODIES`)."""
    init_leaves, carry_tree = flatten(init)
    carry = _Leaves("scan init", init_leaves)
    device = carry.device
    x_leaves, x_tree = flatten(xs)
    xs_ = _Leaves("scan xs", x_leaves, device) if x_leaves else None
    lengths = {t.shape[0] for t in xs_.types if t.shape} if xs_ else set()
    if xs_ and any(t.shape == () for t in xs_.types):
        raise ValueError("scan got value with no leading axis to scan over: " + ", ".join(map(str, xs_.types)))
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        if not lengths:
            raise ValueError("scan got no values to scan over and `length` not provided.")
        raise ValueError(f"scan got values with different leading axis sizes: {sorted(lengths)}")
    n = lengths.pop()
    x_types = [TensorType(t.shape[1:], t.dtype) for t in xs_.types] if xs_ else []
    x_examples = xs_.examples if xs_ else []

    # What f gives for one step: traced once on placeholders to learn y's
    # types (the loop carries the stacked ys, so they are needed first).
    def probe_args(handles):
        c, x = handles[:len(carry.types)], handles[len(carry.types):]
        return (unflatten(carry_tree, carry.wrap(c)),
                unflatten(x_tree, [h if ex is None else wrap_like(ex, h) for ex, h in zip(x_examples, x)]))

    def split(out):
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"scan body output must be a pair (carry, y), got {type(out).__name__}")
        return out[0], out[1]  # a plain pair: a named tuple would give another structure

    if key is not None:  # (what the traced bodies also depend on; the user's line: the one its nodes name)
        key = (key, _user_frame(), repr(carry_tree), repr(x_tree), tuple(type(ex) for ex in x_examples),
               bool(reverse))
    probe = _trace(lambda *a: split(f(*a)), "scan's f", carry.types + x_types, device, probe_args, key)
    c_leaves_n = len(carry.types)
    c_tree_out = probe.out_tree.children[0]
    y_tree = probe.out_tree.children[1]
    c_types_out = probe.out_types[:c_leaves_n] if c_tree_out == carry_tree else None
    if c_tree_out != carry_tree or c_types_out != carry.types:
        got = probe.out_types[:_count(c_tree_out)]
        raise TypeError(
            f"scan body function carry input and carry output must have equal types, got\n"
            f"  input:  {_types_text(carry_tree, carry.types)}\n  output: {_types_text(c_tree_out, got)}")
    y_types = probe.out_types[c_leaves_n:]
    y_examples = probe.out_examples[c_leaves_n:]
    del probe

    i64 = "i64"
    zero_i = core.scalar(0, "i64", device=device)
    bufs = []
    for t in y_types:
        z = core.apply("constant", value=np.zeros((), to_numpy_dtype(t.dtype)), device=device)
        bufs.append(core.apply("broadcast_in_dim", z, dims=(), shape=(n,) + t.shape))
    n_c, n_y = c_leaves_n, len(y_types)
    xs_handles = xs_.handles if xs_ else []

    limit = core.scalar(n, i64, device=device)
    handles = [zero_i, limit] + carry.handles + bufs + list(xs_handles)
    state = _state(device, handles, [None] * len(handles))
    flat = _flat_tree(len(handles))

    def cond_fun(s):
        return core.apply("compare", s[0], s[1], direction="LT")

    def body_fun(s):
        i, lim = s[0], s[1]
        c = s[2:2 + n_c]
        ys = s[2 + n_c:2 + n_c + n_y]
        xs_now = s[2 + n_c + n_y:]
        if reverse:
            at = core.apply("sub", core.apply("sub", lim, i), _one(i64, device))
        else:
            at = i
        xs_t = []
        for x, t in zip(xs_now, x_types):
            zeros = [core.apply("constant", value=np.zeros((), np.int64), device=device) for _ in t.shape]
            one = core.apply("dynamic_slice", x, [at] + zeros, sizes=(1,) + t.shape)
            xs_t.append(core.apply("reshape", one, shape=t.shape))
        carry_in = unflatten(carry_tree, carry.wrap(c))
        x_in = unflatten(x_tree, [h if ex is None else wrap_like(ex, h) for ex, h in zip(x_examples, xs_t)])
        new_c, y = split(f(carry_in, x_in))
        c_l, ct = flatten(new_c)
        y_l, yt = flatten(y)
        c_h = [_as_handle(v, device) for v in c_l]
        y_h = [_as_handle(v, device) for v in y_l]
        if ct != carry_tree or [h.type for h in c_h] != carry.types or yt != y_tree or [h.type for h in y_h] != y_types:
            raise TypeError("scan body function gave other types on its second trace: it must not depend on "
                            "Python state that changes between calls")
        new_ys = []
        for buf, yh, t in zip(ys, y_h, y_types):
            zeros = [core.apply("constant", value=np.zeros((), np.int64), device=device) for _ in t.shape]
            row = core.apply("reshape", yh, shape=(1,) + t.shape)
            new_ys.append(core.apply("dynamic_update_slice", buf, row, [at] + zeros))
        nxt = core.apply("add", i, _one(i64, device))
        return [nxt, lim] + c_h + new_ys + list(xs_now)

    out = _while(cond_fun, body_fun, state, flat, "scan", key)
    c_out = carry.wrap(out[2:2 + n_c])
    y_out = [h if ex is None else wrap_like(ex, h) for ex, h in zip(y_examples, out[2 + n_c:2 + n_c + n_y])]
    return unflatten(carry_tree, c_out), unflatten(y_tree, y_out)


def _count(tree: _Tree) -> int:
    return 1 if tree.kind == "leaf" else sum(_count(c) for c in tree.children)


def _as_handle(x, device) -> LazyTensor:
    if is_lazy(x):
        return handle_of(x)
    return core.scalar(x, device=device, fold=False)


EAGER = _eager_core.install(sys.modules[__name__], ("cond", "while_loop", "fori_loop", "scan"))
"""The loops and branches run their results when they return while the eager mode is on."""
