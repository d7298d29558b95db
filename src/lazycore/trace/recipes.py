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
inputs (by handle identity, or another handle on an input's value), a node
made during the recording, or constants (made during it or before). A
lowering that reads another handle (the RNG state, a cached device array),
uploads host data, observes a value (an implicit barrier) or assigns to a
handle it did not make is run again at every call. The frontend's key must cover
everything else the lowering may look at; the contract for lowerings is that
they are functions of their arguments' types and Python values.

Float arguments (:func:`record_call`): a learning rate that changes every
step, or Adam's step size, would otherwise make a new recording per value.
While recording, each top-level float argument is a :class:`_Param`, a float
that notices being looked at. If the lowering only hands it to
:func:`lazycore.core.scalar` (it becomes a program parameter), and no
comparison, arithmetic or conversion touched it and its value was not baked
into a constant, the recipe is *parametric*: it replays for other values of
that float (:attr:`Recipe.parametric`), making that value's scalar parameter
(and the broadcasts made from it alone) once per value, as a recording of
that value would have. What goes unnoticed: a lowering testing
``type(x) is float`` (it sees the subclass), and a read in C (a ``math``
function) that branches between two values of one :func:`value_class`;
none of the built-in lowerings does either.

Scalar parameters are shared across recordings (:func:`shared`): every
recording and replay holding a scalar parameter of one value and dtype holds
the same node, so two recordings of one lowering do not each bring their own
parameter of one value (issue 39). The nodes made of them are still one set
per recording, so a frontend keeps serving a call from the same recording
once warm (the torch frontend's lookup for another aliasing of the inputs).
Int parameters are not shared: an int is part of its call's key, so its
recording alone serves it, and sharing only merged distinct arguments that
were equal by chance (a moving offset and a window's size: a program with
one parameter fewer, compiled once more).

Int arguments: a top-level int that reaches ``core.scalar`` has a scalar
policy place by its argument (:meth:`Recorder.int_place`), and where it
becomes a parameter, the recording's replays at each user's instruction make
their own (:attr:`Recipe.fresh`), instead of one node for every call of
that signature in the step.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.memo import Memo
from lazycore.ir.remake import maker, node_again
from lazycore.trace.fragment import Fragment
from lazycore.trace.replayer import GUARDED, Replayer
from lazycore.dialect.types import to_numpy_dtype
from lazycore.dialect.spec import spec_of
from lazycore.ir.graph import LOG, Node, Scalar, Value, constant_only, map_operands, node_prefix, operand_values
from lazycore.ir.regions import Arg, RegionNode, region_prefix
from lazycore.ir.sourceloc import INTERPOSERS, caller, known_library, user_frame
from lazycore.ir.tensor import LazyTensor
from lazycore.ir.walk import encode
from lazycore.runtime import autostep  # noqa: F401  (gives TRACE its cutter, read per replay)

_INPUT, _STEP, _FROZEN, _GROUP, _PARAM = 0, 1, 2, 3, 4
_VALUES_KEPT = 64
_PLACES_KEPT = 1024  # (per fresh recipe: the instructions it serves; emptied, a program's parameters change)


class _Unreplayable(Exception):
    pass


_NO_MARK = object()


class Recorder:
    """Watches the core API while a lowering runs (installed with ``TRACE.recording``).

    A lowering made of other ops (a decomposition) records its own pieces'
    work too: a piece replayed, or recorded by a recording of its own inside
    this one, makes its nodes without this recorder seeing each. They are in
    the step log, though: the first time the recording meets a value it does
    not know, it takes every node logged since it last looked
    (:meth:`_catch_up`), its operands matched by value. So a recording holds
    the very nodes the pieces make when nothing records them, shared as they
    share them (a piece's constants by all its replays), and replays cost
    nothing more for being watchable."""

    __slots__ = ("inputs", "handles", "steps", "made", "kept", "frozen", "ok", "params", "pmade", "psteps", "pnodes",
                 "specific", "consts", "start", "seen", "making", "place", "marks", "fn", "ints", "where")

    def __init__(self, inputs):
        self.inputs = {}
        for i, h in enumerate(inputs):
            self.inputs.setdefault(id(h), i)
        self.handles = inputs
        self.steps: list = []
        self.made: dict[int, int] = {}  # id(node) -> step index
        self.kept: list[Node] = []  # the nodes of ``made``, alive so no other node takes their id
        self.frozen: dict[int, Node] = {}  # id(node) -> node made of constants only
        self.ok = True
        self.params: list[_Param] = []  # the float arguments, in order
        self.psteps: list = []  # nodes made of float parameters (and constants) only
        self.pmade: dict[int, int] = {}  # id(node) -> psteps index
        self.pnodes: list[Node] = []  # the nodes of ``pmade``
        self.specific = False
        """A float argument was looked at: the recording holds for its value only."""
        self.consts: dict[int, bool] = {}  # id(node) -> made of constants alone (older nodes)
        self.start = LOG.start if LOG.on else None  # the step whose log holds the recording's nodes
        self.seen = len(LOG.nodes)  # the log's nodes before this position are known
        self.making = None  # the node on_node is taking (logged already, not known yet)
        self.place = None
        """The lowering and the kind of call recorded (:func:`_call_place`): with
        a float argument's index, the scalar policy's place for that argument."""
        self.fn = None  # the lowering recorded and the op it lowers (int_place)
        self.where = None  # the user's instruction of an int argument's place (int_place)
        self.ints: dict = {}
        """A top-level int argument's value -> its position among the call's
        arguments (-1: two arguments hold that value), for :meth:`int_place`."""
        self.marks = {}
        """id(device) -> the newest handle's key in the device's arena when the
        recording began (None: there was none), per device of the inputs:
        the handles after it were made during the recording (:meth:`_made_here`)."""
        for h in inputs:
            if id(h.device) not in self.marks:
                try:
                    self.marks[id(h.device)] = next(reversed(h.device.arena._live), None)
                except RuntimeError:  # (another thread changed the arena meanwhile: no mark, the node decides)
                    pass

    def param(self, x: float) -> _Param:
        p = _Param(x)
        p.recorder, p.index = self, len(self.params)
        self.params.append(p)
        return p

    def plain(self, value):
        """``(value, argument index)`` for a number reaching ``core.scalar``:
        a float argument of this recording as a plain float, with its index
        (else the value as it is, and None)."""
        if type(value) is _Param and value.recorder is self:
            return _PLAIN(value), value.index
        return value, None

    def int_place(self, value: int):
        """The scalar policy's place of an int argument of the recorded call
        reaching ``core.scalar``: the lowering, the op it lowers (a frontend's
        call context: ``ctx.func``), the argument's position and the user's
        instruction; None for another int (or one two arguments hold), and
        for a call the user's code did not make itself (:func:`_user_call`).
        An int is part of its recording's key, so a new value records again
        and asks the policy at a new step-log position (another graph puts
        it after other ops): by position alone a moving offset
        (transformers' sliding-window mask ``arange(n) + kv_offset``) was
        baked at the first value of each graph and promoted, with a compile,
        a token later; at this place the value it had in an earlier graph
        promotes it at once. The position tells the call's ints apart
        (``arange(start, end, step)``'s stay baked while each repeats), the
        op one lowering's ops (``_compare`` serves ``x >= 1`` and ``x < 4``,
        which one instruction makes in a loop over conditions: two ints of
        one step at one place, the first baked in the first step and a
        parameter in the next recording's, a compile). An int the
        lowering computed that equals an argument by chance takes that
        argument's place: a false promotion trades a fold for a parameter,
        the values stay exact."""
        k = self.ints.get(value)
        if k is None or k < 0:
            return None
        where = self.where = _user_call()
        if where is None:
            return None
        return ("int", self.fn, k, where)

    # hooks called by lazycore.core / lazycore.tensor
    def on_node(self, spec, handles, node, kwargs):
        """Takes the node an op made; returns the node the op's result is to
        hold (that node)."""
        if not self.ok:
            return node
        self.making = node
        try:
            refs = tuple(self._ref(h) for h in handles)
        except _Unreplayable:
            self.ok = False
            return node
        finally:
            self.making = None
        return self._take(spec, refs, node, kwargs)

    def _take(self, spec, refs, node, kwargs, region=False):
        """``region``: ``node`` is a loop or branch, its entry holding its
        bodies in place of the attributes (as a captured step's,
        :mod:`.fragment`), ``spec`` its op's name."""
        if all(r[0] == _FROZEN for r in refs):
            self.frozen[id(node)] = node
            return node
        name, attrs = (spec, node.bodies) if region else (spec.name, node.attrs)
        if all(r[0] == _FROZEN or r[0] == _PARAM for r in refs):
            # made of parameters and constants: once per value, like constants once
            self.pmade[id(node)] = len(self.psteps)
            self.pnodes.append(node)
            self.psteps.append((name, refs, attrs, node.types, node.digest))
            return node
        prefix = region_prefix(node.op, node.bodies, node.types) if region else node_prefix(spec, kwargs, node.types)[1]
        self.made[id(node)] = len(self.steps)
        self.kept.append(node)
        self.steps.append((name, refs, attrs, node.types, prefix))
        return node

    def _known(self, node) -> bool:
        i = id(node)
        return i in self.made or i in self.pmade or i in self.frozen

    def _catch_up(self) -> bool:
        """Take the nodes logged since the last look that the core API did
        not show (a replay's, a nested recording's), as if it had; False
        when there were none."""
        if self.start is None or not LOG.on or LOG.start != self.start:
            raise _Unreplayable  # the log does not tell which nodes they were
        nodes = LOG.nodes
        end = len(nodes)
        if end == self.seen:
            return False
        by_value = self._inputs_by_value()
        batch = nodes[self.seen:end]
        inner = _inner_nodes(batch)
        for node in batch:
            if node is self.making or self._known(node) or id(node) in inner:
                continue
            if not node.operands:
                self.frozen[id(node)] = node  # a constant, a scalar parameter
                continue
            if any(type(v[0]) is Arg or id(v[0]) in inner for v in operand_values(node)):
                # a body traced and dropped (scan's first trace, for its output types)
                inner.add(id(node))
                continue
            refs = tuple(self._vref(o, by_value, False) for o in node.operands)
            if type(node) is RegionNode:
                # its bodies may bake a float argument in unnoticed (a constant
                # inside): the recording holds for the values it was made with
                self.specific = True
                self._take(node.op, refs, node, None, region=True)
            else:
                self._take(spec_of(node.op), refs, node, node.attrs)
        self.seen = end
        return True

    def _inputs_by_value(self) -> dict[tuple, int]:
        """``(id(node), index)`` of each input's value -> its position (-1:
        two inputs hold that value, so which one a node read cannot be told)."""
        by_value: dict[tuple, int] = {}
        for i, h in enumerate(self.handles):
            k = (id(h._value[0]), h._value[1])
            if by_value.setdefault(k, i) != i and self.handles[by_value[k]] is not h:
                by_value[k] = -1
        return by_value

    def _vref(self, v, by_value=None, catch_up: bool = True):
        """A reference to value ``v``; ``by_value``: :meth:`_inputs_by_value`
        (made when needed: a value is matched to an input by identity first)."""
        if type(v) is not Value:
            return (_GROUP, tuple(self._vref(x, by_value, catch_up) for x in v), None)
        node, index = v
        k = self.made.get(id(node))
        if k is not None:
            return (_STEP, k, index)
        k = self.pmade.get(id(node))
        if k is not None:
            return (_PARAM, k, index)
        if id(node) in self.frozen:
            return (_FROZEN, v, None)
        if catch_up and self._catch_up():  # made by a replay: known now
            return self._vref(v, by_value, False)
        # another handle on an input's value (an op that returned its input
        # as a new tensor), or an older constant
        if by_value is None:
            by_value = self._inputs_by_value()
        i = by_value.get((id(node), index))
        if i is not None:
            if i < 0:
                raise _Unreplayable
            return (_INPUT, i, None)
        if constant_only(node, self.consts):  # a replayed piece's constants, shared by its replays
            self.frozen[id(node)] = node
            return (_FROZEN, v, None)
        raise _Unreplayable

    def on_leaf(self, node, source: int | tuple | None = None):
        """A leaf ``core.scalar`` made; ``source``: the float argument it holds
        (its index), or ``(value,)`` for an int argument's parameter.
        Returns the node the scalar is to be: the shared one of its value
        (:func:`shared`)."""
        node = shared(node)
        if source is not None and type(node) is Scalar:
            self.pmade[id(node)] = len(self.psteps)
            self.pnodes.append(node)
            self.psteps.append((None, source, None, node.types, node.digest))
            return node
        self.frozen[id(node)] = node
        return node

    def on_assign(self, handle) -> None:
        """An in-place update of ``handle``. One the lowering made (a
        ``zeros`` it then fills in) is no side effect: replayed, its users
        read the update's value, as they did here. Any other handle (an
        input, a buffer, the RNG state) is a side effect a replay would not
        make. A handle made here holds a node made here, or one made before:
        a replayed piece's result is a new handle on the constant its own
        recording made (a factory's zeros, shared by its replays), which an
        outside handle read here may hold too; the handle's age tells them
        apart (:meth:`_made_here`), and where it cannot be told, the node's."""
        node = handle._value[0]
        if id(handle) in self.inputs:
            self.ok = False
            return
        if id(node) in self.made:
            return  # (a handle on a node made here was made here, or assigned here before)
        made_here = self._made_here(handle)
        if made_here is not None:
            if not made_here:
                self.ok = False
            return
        if not self._known(node):
            try:
                known = self._catch_up() and self._known(node)  # a replayed piece's node
            except _Unreplayable:
                known = False
            if not known:
                self.ok = False

    def _made_here(self, handle) -> bool | None:
        """Whether ``handle`` was made during the recording: it comes after the
        newest handle of its device's arena when the recording began. None
        where that cannot be told: no mark for its device (no input there),
        or the marked handle gone, its place in the order with it."""
        mark = self.marks.get(id(handle.device), _NO_MARK)
        if mark is _NO_MARK:
            return None
        live = handle.device.arena._live
        try:
            if mark is not None and mark not in live:
                return None
            for ref in reversed(live):
                if ref is mark:
                    return False
                if ref() is handle:
                    return True
        except RuntimeError:  # (another thread made or dropped a handle meanwhile)
            return None
        return False

    def taint(self) -> None:
        if TRACE.recorder is None:
            # a loop's or branch's body about to be traced (lazycore.trace.control
            # hides the recording first): its nodes are the body's, and the
            # region node made of it is taken, bodies and all, when met in
            # the log (_catch_up); a value it reads from outside that the
            # recording does not know refuses the recording there
            return
        self.ok = False

    def _ref(self, h):
        if isinstance(h, (list, tuple)):
            return (_GROUP, tuple(self._ref(x) for x in h), None)
        i = self.inputs.get(id(h))
        if i is not None:
            return (_INPUT, i, None)
        return self._vref(h._value)

    def _out(self, result):
        if result is None:
            return None
        if isinstance(result, LazyTensor):
            return (self._ref(result), result.device)
        if isinstance(result, (list, tuple)):
            return (type(result), tuple(self._out(r) for r in result))
        raise _Unreplayable


def _user_call(_getframe=sys._getframe):
    """The user's instruction that made the op being recorded, where the user's
    own code called it (every frame between is lazycore's), else None: an op
    a library made (the autograd engine's backward pass under the user's
    ``backward()``, ``torch.nn.functional``'s or a decomposition's body) shares
    that instruction with every other op of the library call, whose ints would
    promote each other at one place (embedding's backward compares its indices
    with 0, -1 and the table's size: the 0 baked in the first step was a
    parameter in the next, a compile); those keep their step-log places alone.
    Asked while recording only (a frame walk with a dict lookup each)."""
    f = _getframe(1)
    while f is not None and f.f_globals.get("__name__", "").startswith(_OWN):
        f = f.f_back
    if f is None or not user_frame(f):
        return None
    return (f.f_code, f.f_lasti)


_OWN = "lazycore."  # (lazycore's modules, its frontends' too: lazycore.frontends.*)


class Recipe:
    """A recorded lowering: a :class:`~lazycore.trace.fragment.Fragment` over the
    call's inputs (then the float arguments' values it uses), and where the
    results come from."""

    __slots__ = ("fragment", "aliased", "psteps", "prefs", "parametric", "fresh", "_values", "_plan")

    def __init__(self, fragment, aliased, psteps=(), prefs=(), parametric=False):
        self.fragment = fragment
        self.aliased = aliased
        """The inputs' identity pattern when some were one handle (``x * x``):
        the recipe then only fits calls with the same pattern."""
        self.psteps = psteps
        """The float parameters' scalars and the nodes made of them alone."""
        self.prefs = prefs
        """``(psteps index, result index)`` of the values of ``psteps`` the
        fragment reads, its inputs after the call's."""
        self.parametric = parametric
        """The recording holds for any value of the float arguments (else
        only for the values it was recorded with)."""
        self._values: dict = {}
        """Float argument values (:func:`float_key` each) -> the values of
        ``psteps``' nodes made for them that the fragment reads (``prefs``):
        one value's scalar and broadcasts are shared by every replay, as a
        constant's are."""
        self._plan = None  # psteps as entries (:class:`_ParamPlan`), at the first new value
        self.fresh = any(name is None and type(refs) is tuple for name, refs, _, _, _ in psteps) and bool(prefs)
        """It holds an int argument's parameter (:meth:`Recorder.int_place`):
        the replays at each user's instruction make their own (kept in
        :attr:`_values` under :func:`_at`'s key). Shared by all
        replays, as a constant is, the parameter of one int argument was the
        parameter of every call of the signature in the step: transformers'
        sliding-window mask ``arange(4) + kv_offset`` at ``kv_offset = 1``
        and the cache's ``roll(-1)`` (its ``arange(4) + 1``) held one node, a
        program with one parameter fewer than the next token's, compiled
        once more. One per replay instead (as tracing makes them) made a
        chain ``y = y + 5`` of 200 calls a program of 200 parameters, and
        each replay ~2x slower."""

    def fits(self, inputs) -> bool:
        return self.aliased is None or alias_pattern(inputs) == self.aliased

    def attempt(self, inputs, floats=()):
        """:meth:`replay` where the inputs alias as recorded, else
        :data:`~lazycore.trace.replayer.GUARDED` (a
        :class:`~lazycore.trace.replayer.Replayable`)."""
        if self.aliased is not None and alias_pattern(inputs) != self.aliased:
            return GUARDED
        return self.replay(inputs, floats)

    def replay(self, inputs, floats=(), start=None, key=None):
        """The lowering's result for ``inputs`` (handles in the recorded order)
        and ``floats`` (the float arguments, for a recording that has them).
        Every result handle is new, even where the lowering returned an input.
        ``start``: the frame that called into the frontend, where the search
        for the user's line starts (:func:`~lazycore.ir.sourceloc.caller`);
        by default the caller of this method. ``key``: the floats'
        :func:`float_key` each, as a tuple, where the caller has it already.
        The replay is one step of the shared graph
        (:data:`lazycore.ir.context.LOCK`, docs/threads.md).

        The lock is taken only where the caller does not hold it already (the
        torch frontend's dispatch does): re-entering it with ``with`` cost
        ~0.3 us of the per-op path, asking whether it is held ~0.05 us."""
        held = _held()
        if not held:
            LOCK.acquire()
        try:
            cutter = TRACE.cutter
            if cutter.due or len(LOG.nodes) >= settings.auto_barrier_nodes:
                cutter.cut(inputs)  # a step ended: before the inputs are read (lazycore.runtime.autostep)
            code = None if start is None else start.f_code
            if code is not None and known_library(code.co_filename) is False and code.co_name not in INTERPOSERS:
                # (sourceloc.known_user_frame, inline: the per-op path) the caller's answer for a
                # user's frame, without the call
                loc = (code, start.f_lasti)
            else:
                loc = caller(start=start)
            if self.fresh:
                # (_at, inline for a call without floats)
                values = self._values.get((id(loc[0]), loc[1]) if not floats and loc is not None else _at(loc, floats))
                if values is None:
                    values = self._new_values(_at(loc, floats), floats, loc)
            elif self.prefs:
                if key is not None:
                    values = self._values.get(key)
                elif len(floats) == 1:  # (x * 0.9: float_key, inline)
                    f = floats[0]
                    values = self._values.get((f if f != 0.0 and f == f else repr(f),))
                else:
                    values = self._values.get(tuple([float_key(f) for f in floats]))
                if values is None:
                    values = self._new_values(tuple([float_key(f) for f in floats]), floats, loc)
            else:
                values = ()
            fast = self.fragment.fast
            if fast is not None:
                return fast(inputs, values, loc)
            return self.fragment.replay(inputs, values, loc)
        finally:
            if not held:
                LOCK.release()

    def _new_values(self, key, floats, loc) -> list:
        """The fragment's parameter values for float arguments ``floats`` met
        for the first time (a fresh recipe's: at a new user's instruction
        ``loc``, :attr:`fresh`): their nodes made (:class:`_ParamPlan`) and
        remembered under ``key`` (the floats' :func:`float_key`, or
        :func:`_at`'s)."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _ParamPlan(self.psteps)
        nodes = plan.make(floats, loc)
        return self.remember(key, nodes)

    def remember(self, key: tuple, nodes: list) -> list:
        """Keeps the values of ``nodes`` (``psteps``' nodes for the float
        argument values of ``key``, :func:`float_key` each) that the fragment
        reads, as its replays for those values take them: built once per
        value, not per replay (~1 us of a ``x * 0.9``). Returns them."""
        if len(self._values) >= (_PLACES_KEPT if self.fresh else _VALUES_KEPT):
            self._values.clear()
        values = self._values[key] = [_value(nodes[k], i) for k, i in self.prefs]
        return values


def _at(loc, floats):
    """A fresh recipe's key of its values (:attr:`Recipe.fresh`) for the user's
    instruction ``loc`` and the float arguments: the code object by its id
    (hashing one walks its bytecode and constants, ~0.3-1 us a replay). An
    id taken again by another code object after the first was freed only
    shares the nodes of two instructions, whose int is the recipe's one
    value: the answers stay exact."""
    k = None if loc is None else (id(loc[0]), loc[1])
    return (k, *[float_key(f) for f in floats]) if floats else k


def _value(node, index: int, _new=tuple.__new__) -> Value:
    """``Value(node, index)`` without the named tuple's Python-level constructor."""
    return _new(Value, (node, index))


_held = LOCK._is_owned  # whether this thread holds the graph lock (a C call)


_SHARED = Memo("trace.shared_scalars", 4096)
"""(dtype, exact bits) -> the one scalar parameter node of that value (see :func:`shared`)."""


def shared(node):
    """The one scalar parameter (:class:`~lazycore.ir.graph.Scalar`) equal to
    ``node`` among those recordings and replays made, keyed by its dtype and
    exact bits (-0.0 and 0.0, NaNs, stay apart): ``node`` itself the first
    time; any other node as it is.

    A recording (and each of its replays) shares one node per value; two
    recordings of one lowering for two call signatures would otherwise hold
    two scalar parameters of one value, and which of them a call takes (which
    signature recorded first, which recording a later call finds) would
    decide how many parameters the step's program has: a recompile when it
    changes after warm-up (issue 39). Shared across recordings, the count
    depends on the values only. (Nodes made of such parameters, and baked
    constants, are still one per recording: sharing them too made a captured
    optimizer step take a shared node for a live handle's value and its traced
    calls differ, tests/torch/test_optimizer_replay.py's adam.)"""
    if type(node) is not Scalar:
        return node
    v = node.value
    if v.dtype.kind in "biu":  # (an int's recording serves its value alone: see the module's notes)
        return node
    key = (node.types[0].dtype, v.dtype.str, v.tobytes())
    got = _SHARED.get(key)
    if got is None:
        _SHARED.put(key, node)
        return node
    # the shared node takes the new one's place in the step log, as if made
    # here: an outer recording catching up finds it there
    LOG.put_instead(node, got)
    return got


class _ParamPlan:
    """A recipe's ``psteps`` as entries made by :func:`lazycore.ir.remake.maker`:
    the values are the constants they read, then each float argument's
    scalar, then the nodes' results in order (a scalar depends on its float
    alone, so making them first changes no node)."""

    __slots__ = ("consts", "leaves", "digests", "at", "make_nodes")

    def __init__(self, psteps):
        self.consts: list = []
        where: dict[tuple, int] = {}
        for name, refs, _, _, _ in psteps:
            if name is not None:
                for r in _flat(refs):
                    if r[0] == _FROZEN and (id(r[1][0]), r[1][1]) not in where:
                        where[(id(r[1][0]), r[1][1])] = len(self.consts)
                        self.consts.append(r[1])
        self.at = [0] * len(psteps)  # psteps index -> its first value's number
        self.leaves = []  # (float argument index, dtype) of each scalar
        pos = len(self.consts)
        for k, (name, refs, _, types, _) in enumerate(psteps):
            if name is None:
                self.at[k] = pos
                self.leaves.append((refs, types[0].dtype))
                pos += 1

        def number(ref):
            kind, a, b = ref
            if kind == _FROZEN:
                return where[(id(a[0]), a[1])]
            if kind == _PARAM:
                return self.at[a] + b
            return tuple(number(r) for r in a)  # a variadic group

        entries, self.digests = [], []
        for k, (name, refs, attrs, types, d) in enumerate(psteps):
            if name is not None:
                self.at[k] = pos
                entries.append((name, tuple(number(r) for r in refs), attrs, types, None))
                self.digests.append(d)
                pos += len(types)
        self.make_nodes = maker(entries, len(self.consts) + len(self.leaves), label="a float parameter")

    def make(self, floats, loc) -> list[Node]:
        """Each of ``psteps``' nodes for these float argument values."""
        env = list(self.consts)
        for i, dtype in self.leaves:  # as core.scalar makes it (an int argument's: its value, fresh)
            x = i[0] if type(i) is tuple else floats[i]
            env.append(_value(shared(Scalar(np.asarray(x, dtype=to_numpy_dtype(dtype)), dtype)), 0))
        self.make_nodes(env, self.digests, loc)
        return [env[p][0] for p in self.at]


def _fragment(rec: Recorder, n_inputs: int, out):
    """The recording as a fragment returning the lowering's result, and the
    references to ``psteps`` it reads. Its inputs are the call's, then the values
    of ``psteps`` the steps use; its constants the frozen values."""
    prefs: dict[tuple, int] = {}
    consts: dict[tuple, int] = {}
    frozen: list = []
    returned: list = []
    _numbered(out, returned.append)
    for ref in [r for step in rec.steps for r in _flat(step[1])] + returned:
        if ref[0] == _PARAM:
            prefs.setdefault((ref[1], ref[2]), len(prefs))
        elif ref[0] == _FROZEN and (id(ref[1][0]), ref[1][1]) not in consts:
            consts[(id(ref[1][0]), ref[1][1])] = len(frozen)
            frozen.append(ref[1])
    n = n_inputs + len(prefs)
    starts, pos = [], n + len(frozen)
    for step in rec.steps:
        starts.append(pos)
        pos += len(step[3])

    def number(ref) -> int:
        kind, a, b = ref
        if kind == _INPUT:
            return a
        if kind == _PARAM:
            return n_inputs + prefs[(a, b)]
        if kind == _FROZEN:
            return n + consts[(id(a[0]), a[1])]
        return starts[a] + b

    entries = [(name, tuple(number(r) if r[0] != _GROUP else tuple(number(x) for x in r[1]) for r in refs), attrs,
                types, prefix) for name, refs, attrs, types, prefix in rec.steps]
    outputs: list[int] = []

    def place(ref) -> int:
        outputs.append(number(ref))
        return len(outputs) - 1

    result = _numbered(out, place)
    return Fragment(entries, n, frozen, outputs, label="a lowering", n_handles=n_inputs, result=result), tuple(prefs)


def _inner_nodes(nodes) -> set[int]:
    """``id`` of every node inside the bodies of the region nodes among
    ``nodes`` (a stretch of the step log, where a body's nodes come before
    its loop's), nested bodies' too: nodes a replay makes only as part of
    the bodies its region entry shares."""
    inner: set[int] = set()
    stack = [n for n in nodes if type(n) is RegionNode]
    while stack:
        for body in stack.pop().bodies:
            for n in body.order:
                if id(n) not in inner:
                    inner.add(id(n))
                    if type(n) is RegionNode:
                        stack.append(n)
    return inner


def _flat(refs):
    for r in refs:
        if r[0] == _GROUP:
            yield from r[1]
        else:
            yield r


def _numbered(out, number):
    """``out`` (from :meth:`Recorder._out`) with each reference replaced by ``number(ref)``."""
    if out is None:
        return None
    first, second = out
    if type(first) is type:
        return (first, tuple(_numbered(o, number) for o in second))
    return (number(first), second)


_ANY_VALUE = object()  # in keys of recordings that hold for any value of a class


def value_class(floats) -> tuple | None:
    """The key part under which a parametric recording serves these floats
    (see :func:`record_call`), or None where none may: 0, 1 and other whole
    numbers (the scalar policy and lowerings treat them apart, unnoticed:
    ``alpha == 1``), infinities and NaN. Otherwise one class per sign and
    order of the values, distinctions a lowering could draw without being
    noticed (``np.sign``, ``x < 0``). None as well for no floats at all:
    the values' key is the whole key then."""
    if not floats:
        return None
    for f in floats:
        if not math.isfinite(f) or f == math.floor(f):
            return None
    n = len(floats)
    order = tuple(sorted(range(n), key=floats.__getitem__)) if n > 1 else ()
    return (_ANY_VALUE, tuple([f > 0 for f in floats]), order)


def value_class_parts(key) -> tuple | None:
    """The parts of a :func:`value_class` key as plain data (another
    process's :func:`value_class_of` makes the key again); None for a key
    that is no value class."""
    if type(key) is tuple and len(key) == 3 and key[0] is _ANY_VALUE:
        return key[1:]
    return None


def value_class_of(parts: tuple) -> tuple:
    """The :func:`value_class` key of :func:`value_class_parts`' ``parts``."""
    return (_ANY_VALUE, *parts)


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
    returned NotImplemented). A recording inside another one (a piece of a
    decomposition) records for itself, and the outer recording then takes
    its nodes as its own (:meth:`Recorder._catch_up`); inside a traced loop
    body nothing is recorded."""
    return record_call(fn, inputs, args, kwargs, floats=False)


def record_call(fn, inputs, args, kwargs, floats: bool = True):
    """:func:`record` with the arguments as a tuple and a dict. ``floats``:
    the top-level float arguments (positional first, then keywords, in order)
    are watched, and the recipe is :attr:`~Recipe.parametric` when the
    lowering passed them to ``core.scalar`` and did nothing else with them.
    Its :meth:`~Recipe.replay` then takes the call's floats in that order."""
    outer = TRACE.recorder
    if outer is not None and type(outer) is not Recorder:  # a loop body being traced: its own watch
        return fn(*args, **kwargs), None
    rec = Recorder(inputs)
    op = getattr(args[0], "func", None) if args else None  # (a frontend's call context: the op lowered)
    try:
        hash(op)
    except TypeError:
        op = None
    rec.fn = (fn, op)
    for k, a in enumerate((*args, *kwargs.values()) if kwargs else args):
        if type(a) is int:
            rec.ints[a] = k if rec.ints.setdefault(a, k) == k else -1
    if floats:
        rec.place = _call_place(fn, args, kwargs)
        args = tuple(rec.param(x) if type(x) is float else x for x in args)
        if kwargs:
            kwargs = {k: rec.param(v) if type(v) is float else v for k, v in kwargs.items()}
    try:
        with TRACE.recording(rec):
            result = fn(*args, **kwargs)
    finally:
        for p in rec.params:
            p.recorder = None  # a float kept by the lowering is a float from now on
        if outer is not None and not rec.ok:  # inside another recording (which takes the nodes when it meets them)
            outer.taint()
    if not rec.ok or result is NotImplemented:
        return result, None
    try:
        out = rec._out(result)
    except _Unreplayable:
        return result, None
    aliased = alias_pattern(inputs)
    if aliased == tuple(range(len(aliased))):
        aliased = None
    parametric = floats and not rec.specific and not _baked(rec)
    fragment, prefs = _fragment(rec, len(inputs), out)
    recipe = Recipe(fragment, aliased, tuple(rec.psteps), prefs, parametric)
    events.bump("recordings")
    if rec.psteps:
        fl = [_PLAIN(p) for p in rec.params]
        recipe.remember(_at(rec.where, fl) if recipe.fresh else tuple([float_key(f) for f in fl]), rec.pnodes)
    recorded = [h._value for h in inputs] + [Value(rec.pnodes[k], i) for k, i in prefs]
    fragment.remember(recorded, [node.digest for node in rec.kept])
    return result, recipe


def _call_place(fn, args, kwargs) -> tuple:
    """What a recording's float arguments are told apart by in the scalar
    policy: the lowering and its arguments' kinds (a lazy value's type, a
    float's position, a plain value itself, another object's class), not the
    step-log position. Two recordings of one lowering for two values of a
    float argument (a schedule's lr = 0.0 after 0.1: a whole number is
    recorded for itself) meet at this place wherever their calls fall in the
    step, so the second value makes the argument a parameter; by position
    alone the first step (which holds more: the model's initialization) and
    a later one put the two recordings at two places, and 0.0 was baked in
    (a recompile after warm-up, issue 39)."""
    parts = [fn]
    for a in (*args, *kwargs, *kwargs.values()) if kwargs else args:  # (keywords: their names, then kinds)
        if isinstance(a, LazyTensor):
            parts.append(a.type)
        elif type(a) is float:
            parts.append(float)
        elif a is None or type(a) in (int, bool, str):
            parts.append(a)
        else:
            parts.append(type(a))
    return tuple(parts)


def _baked(rec: Recorder) -> bool:
    """Whether a float argument's value may sit in a node of the recording
    other than its own scalar: read without noticing (``np.asarray``, a C
    function) and made a constant, an attribute or another scalar."""
    values = [_PLAIN(p) for p in rec.params]
    if not values:
        return False
    nodes = list(rec.kept) + list(rec.frozen.values())
    nodes += [n for n, ps in zip(rec.pnodes, rec.psteps) if ps[0] is not None]
    for node in nodes:
        if type(node) is Scalar and _holds(node.value, values):
            return True
        for v in node.attrs.values():
            if _holds(v, values):
                return True
    return False


def _holds(v, values) -> bool:
    """``v`` (an attribute or a leaf's value) contains one of ``values``,
    as itself or rounded to ``v``'s float type."""
    if isinstance(v, (list, tuple)):
        return any(_holds(x, values) for x in v)
    if isinstance(v, float):
        return v in values
    if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind in "fcV":
        try:
            with np.errstate(all="ignore"):
                wanted = np.asarray(values).astype(v.dtype)
            return bool(np.isin(np.asarray(v).ravel(), wanted).any())
        except (TypeError, ValueError):
            return True  # cannot tell: assume it does
    return False


class _Param(float):
    """A float argument while its lowering is recorded: the recorder notices
    any use but ``core.scalar``'s (see :class:`Recorder`)."""

    __slots__ = ("recorder", "index")


_PLAIN = float.__float__  # the plain float of a _Param, without noticing


def _noticing(name: str):
    base = getattr(float, name)

    def method(self, *args):
        if self.recorder is not None:
            self.recorder.specific = True
        return base(self, *args)

    method.__name__ = name
    return method


def _comparing(name: str, decided):
    """A comparison that goes unnoticed when its answer is the same for every
    value a parametric recipe serves (see the frontends' value classes: no
    whole numbers, one sign): ``alpha == 1`` for the scalar policy, ``x < 0``."""
    base = getattr(float, name)

    def method(self, other):
        if self.recorder is not None and not (type(other) in (int, float, bool) and decided(other)):
            self.recorder.specific = True
        return base(self, other)

    method.__name__ = name
    return method


def _whole(x) -> bool:
    return x == x and x not in (float("inf"), float("-inf")) and x == int(x)


_COMPARISONS = {
    "__eq__": _whole, "__ne__": _whole,  # never equal to a whole number
    "__lt__": lambda x: x == 0, "__le__": lambda x: x == 0, "__gt__": lambda x: x == 0, "__ge__": lambda x: x == 0,
}


for _name in (
    "__abs__", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__divmod__", "__rdivmod__",
    "__pow__", "__rpow__", "__neg__", "__pos__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__bool__", "__hash__", "__int__", "__float__", "__round__", "__trunc__", "__floor__", "__ceil__",
    "__repr__", "__str__", "__format__", "is_integer", "as_integer_ratio", "hex", "conjugate",
    "__getnewargs__", "__reduce__", "__reduce_ex__",
):
    if _name in _COMPARISONS:
        setattr(_Param, _name, _comparing(_name, _COMPARISONS[_name]))
    elif hasattr(float, _name):
        setattr(_Param, _name, _noticing(_name))


def _imag(self) -> float:
    if self.recorder is not None:
        self.recorder.specific = True
    return 0.0


_Param.real = property(_noticing("conjugate"))
_Param.imag = property(_imag)


STORED_FORMAT = 1
"""The layout of :func:`dump`'s data (a store keys its entries by it)."""


def dump(recipe: Recipe, device) -> tuple:
    """``recipe`` as plain data (tuples, numbers, strings, bytes, NumPy
    arrays, types, attributes) that :func:`load` makes into the same
    recording in another process: a frontend keeps recordings on disk this
    way (``lazycore.frontends.torch.recipe_store``), so a new process replays
    its first step instead of recording it. ``device``: the device of the
    call's results. Raises ValueError for a recording that cannot be kept: one
    holding a loop or a branch (their bodies are graphs of their own), a node
    other than a constant, a scalar or one made of them among its constants
    (an upload), or a result on another device.

    Kept: the entries with their digest prefixes, the constants as the
    nodes they are made of (with their digests; scalars by value, shared
    again when loaded as :func:`shared` shares them), the outputs, the float
    parameters' nodes. Not kept: the digests remembered per kind of inputs
    (hashed again at the first replay)."""
    number: dict[int, int] = {}

    def value(v) -> tuple:
        return (number[id(v[0])], v[1])

    def pref(ref) -> tuple:
        kind, a, b = ref
        if kind == _FROZEN:
            return (kind, value(a), b)
        if kind == _GROUP:
            return (kind, tuple(pref(r) for r in a), b)
        return ref

    def frozen(ref, put) -> None:
        kind, a, _ = ref
        if kind == _FROZEN:
            put(a)
        elif kind == _GROUP:
            for r in a:
                frozen(r, put)

    def result(spec):
        if spec is None:
            return None
        first, second = spec
        if type(first) is int:
            if second is not device:
                raise ValueError("a result on another device than the call's")
            return (first, None)
        if first is not tuple and first is not list:
            raise ValueError(f"a result of type {first.__name__}")
        return ("l" if first is list else "t", tuple(result(o) for o in second))

    f = recipe.fragment
    for entry in f.entries:
        if type(entry[2]) is not dict:
            raise ValueError("a loop or branch")
    values: list = []  # the constants' values, as the items below number them
    for name, refs, attrs, _, _ in recipe.psteps:
        if name is not None:
            if type(attrs) is not dict:
                raise ValueError("a loop or branch made of float parameters")
            for r in refs:
                frozen(r, values.append)
    values += f.consts
    # the graph behind them in the walk's post-order (operands first, a
    # shared node once): each node's operands are numbered before it
    nodes: list = []
    for node in encode(values)[0]:
        t = type(node)
        if t is Scalar:
            item = ("s", node.value, node.types[0].dtype)
        elif t is Node:
            item = ("n", node.op, map_operands(node.operands, value), node.attrs, node.types, node.digest)
        else:
            raise ValueError(f"a constant made of a {t.__name__} node")
        number[id(node)] = len(nodes)
        nodes.append(item)
    psteps = [(name, refs if name is None else tuple(pref(r) for r in refs), attrs, types, d)
              for name, refs, attrs, types, d in recipe.psteps]
    consts = tuple(value(v) for v in f.consts)
    return (STORED_FORMAT, tuple(nodes), consts, f.entries, f.n_inputs, f.outputs, f.n_handles, result(f.result),
            recipe.aliased, tuple(psteps), recipe.prefs, recipe.parametric)


def load(data: tuple, device) -> Recipe:
    """The recording :func:`dump` made ``data`` of, its results on
    ``device``; its constants are made now (in the step log, as a recording
    makes them). Raises ValueError (or what malformed data makes the
    constructors raise) for data that is not such a recording."""
    (fmt, nodes, consts, entries, n_inputs, outputs, n_handles, spec, aliased, psteps, prefs,
     parametric) = data
    if fmt != STORED_FORMAT:
        raise ValueError(f"a recording of format {fmt}")
    made: list = []

    def value(v) -> Value:
        return Value(made[v[0]], v[1])

    for item in nodes:
        if item[0] == "s":
            made.append(shared(Scalar(item[1], item[2])))
        else:
            _, op, ops, attrs, types, d = item
            made.append(node_again(op, tuple(value(o) if o and type(o[0]) is int else tuple(value(v) for v in o)
                                             for o in ops), attrs, types, d))

    def pref(ref) -> tuple:
        kind, a, b = ref
        if kind == _FROZEN:
            return (kind, value(a), b)
        if kind == _GROUP:
            return (kind, tuple(pref(r) for r in a), b)
        return ref

    def result(spec):
        if spec is None:
            return None
        first, second = spec
        if type(first) is int:
            return (first, device)
        return (list if first == "l" else tuple, tuple(result(o) for o in second))

    steps = tuple((name, refs if name is None else tuple(pref(r) for r in refs), attrs, types, d)
                  for name, refs, attrs, types, d in psteps)
    fragment = Fragment(entries, n_inputs, [value(v) for v in consts], outputs, label="a lowering",
                        n_handles=n_handles, result=result(spec))
    events.bump("recordings_loaded")
    return Recipe(fragment, aliased, steps, tuple(prefs), parametric)


def recording() -> bool:
    """True while a lowering is being recorded."""
    return TRACE.recorder is not None


_REPLAYED = Replayer("trace.replayed", 4096)
"""(wrapper, call signature) -> :class:`Recipe`, for :func:`replayed` functions."""


_getframe = sys._getframe


def replayed(fn):
    """``fn`` (a frontend's lowering of one op: lazy values and Python values
    in, a lazy value or a tuple of them out) recorded once per call signature
    and replayed afterwards, as the built-in frontends' ops are: the per-op
    fast path, for any frontend through the core API.

    The signature is each argument's type and device for lazy values, its
    value for anything else (which must be hashable); a Python float may be
    a program parameter of the recording (:func:`record_call`), so a new
    learning rate replays too. ``fn`` must be a function of its arguments'
    types and Python values (what it reads elsewhere is not in the key); a
    call it makes that cannot be replayed (an upload, a read, an assignment)
    just runs it every time. ``LAZYCORE_REPLAY=0`` turns replay off."""
    token = object()

    def call(*args, **kwargs):
        if not settings.replay or TRACE.recorder is not None:
            return fn(*args, **kwargs)
        parts = [token]
        handles, floats = [], []
        for a in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(a, LazyTensor):
                handles.append(a)
                parts.append((a.type, a.device))
            elif type(a) is float:
                floats.append(a)
                parts.append((float, float_key(a)))
            else:
                parts.append(a)
        if kwargs:
            parts.append(tuple(kwargs))
        key = tuple(parts)
        try:
            kept = _REPLAYED.get(key, ())
        except TypeError:  # an unhashable argument: no signature, no recording
            return fn(*args, **kwargs)
        for recipe in kept:  # (Replayer.replay and Recipe.attempt, inline: the per-op path)
            if recipe.aliased is None or alias_pattern(handles) == recipe.aliased:
                # the frame that called the lowering, where it is a user's (known
                # already): the replay's location without a caller() walk, which
                # finds that frame (with the attempt's frame, ~10% of benchmark 1's op)
                f = _getframe(1)
                code = f.f_code  # (sourceloc.known_user_frame, inline)
                user = known_library(code.co_filename) is False and code.co_name not in INTERPOSERS
                return recipe.replay(handles, floats, f if user else None)
        vkey = None
        if floats and not kept:
            vclass = value_class(floats)
            if vclass is not None:
                vkey = tuple(p[0] if type(p) is tuple and p[0] is float else p for p in parts) + (vclass,)
                out = _REPLAYED.replay(vkey, handles, floats)
                if out is not GUARDED:
                    return out
        result, recipe = record_call(fn, handles, args, kwargs)
        if recipe is not None:
            _REPLAYED.add(key, recipe)
            if recipe.parametric and vkey is not None:
                _REPLAYED.add(vkey, recipe)
        return result

    return functools.update_wrapper(call, fn)
