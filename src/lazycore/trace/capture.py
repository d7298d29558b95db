"""Whole-step capture: what one call of a step function did to the lazy graph,
recorded so later calls can redo it without running the function.

Per-op tracing pays Python for every op of every step (the frontend's
dispatch, autograd, the optimizer's loop), which a jitted step pays once.
A frontend's capture wrapper (``lazycore.torch.capture``) runs the step
function traced while this module watches (:func:`begin`, :func:`finish`),
and the result, a :class:`Recording`, says in plain data:

* which values the step read: each either the value an argument's handle
  held, or the value a live handle held when the call began (a parameter, a
  gradient, optimizer state, the RNG state; held by weak reference);
* the nodes it made, in the order made, with their attributes and source
  lines, as a :class:`~lazycore.trace.fragment.Fragment` over the values
  read; values made of constants and scalar parameters alone, made in the
  step or left by an earlier one, are its constants, which its key holds by
  value (:func:`_value_digest`);
* which live handles it updated in place, and the values of the new handles
  the frontend keeps (results, gradients).

:meth:`Recording.replay` checks that the world still looks the same (the
handles alive, their values of the recorded types, no argument aliasing
that was not there) and only then redoes the step on the current input
values and makes the same updates, and it fails before changing anything.
The step is redone as one ``call`` region node holding the recorded graph
as its body (:class:`_Call`): a replay makes one node, not one per op, and
the barrier walks, hashes and recalls one node (the GPT step of benchmark 7:
replay 4-6 ms to 1.2 ms, the barrier's walk 1.2 to 0.15 ms). The compiler
emits the body inline, so the program is the step's own, and rolls the
layers a trace of the step would roll (it looks for them with the body in
place: :func:`lazycore.runtime.rolling.inlined`). The traced call
that made the recording has its results rebound to such a node too, so its
program is the one its replays run (a trace of the same function outside
``capture`` compiles its own). A step with value checks, or
any step with ``LAZYCORE_CAPTURE_CALLS=0``, makes every node again instead
(:class:`~lazycore.trace.fragment.Fragment`): it hashes as a trace of it
would, and compiles nothing a trace would not.

What a recording refuses (:class:`Refused`, with the reason): a step that
runs a barrier (it looked at a value), uploads host data, falls back to eager
kernels, keeps a handle it made somewhere other than where the frontend
looks, or reads a value no live handle held. Python values the step reads
are baked in, as in ``jax.jit``; the frontend compares two traced calls
before it trusts a recording, and guards the Python state it knows about.
"""

from __future__ import annotations

import gc
import warnings
import weakref
from collections import Counter

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.graph import (LOG, Data, Node, Scalar, Value, constant_only, digest, operand_bytes,
                               operand_values)
from lazycore.ir.regions import Arg, Body, region_prefix
from lazycore.ir import remake
from lazycore.ir.remake import node_again
from lazycore.ir.sourceloc import caller as caller_location
from lazycore.ir.sourceloc import forget as forget_frame
from lazycore.ir.sourceloc import format_location
from lazycore.ir.sourceloc import resolve as resolve_location
from lazycore.ir.tensor import LazyTensor
from lazycore.runtime import closures as _closures
from lazycore.runtime import device as _device
from lazycore.trace.fragment import Fragment

_new_value = tuple.__new__


class Refused(Exception):
    """A traced call that cannot be replayed; the message says why."""


class CaptureWarning(UserWarning):
    """A captured function stopped recording its calls: it is refused for one reason again and again."""


REFUSALS_BEFORE_BACKOFF = 3
"""Recordings in a row refused for one reason before a captured function stops recording."""
LONGEST_WAIT = 64
"""The most calls traced plainly between two recording attempts once stopped."""


class Backoff:
    """When a captured function records a call, for one kind of arguments.

    Recording a call (watching every live tensor, Python's reads, the
    graph it made) costs 2-10x tracing it; a recording that is refused is
    thrown away, and a step refused for a reason that does not go away (a
    tensor kept in a list outside it, a number that changes every call) paid
    that at every call. After :data:`REFUSALS_BEFORE_BACKOFF` recordings in
    a row refused for the same reason, calls are traced plainly (a traced
    step's cost, the same values), and a recording is attempted again after
    1, 2, 4, ... up to :data:`LONGEST_WAIT` plain calls: a change that lifts
    the refusal (the user's fix, a scheduler that stops changing a number) is
    found within that many calls, while a step refused for good pays for a
    recording at most once in ``LONGEST_WAIT + 1`` calls. A recording that
    is not refused, or refused for another reason, starts over."""

    __slots__ = ("reason", "times", "wait", "gap")

    def __init__(self):
        self.reason: str | None = None
        self.times = 0  # recordings in a row refused for ``reason``
        self.wait = 0  # calls still to trace plainly
        self.gap = 1  # the next wait

    def records(self) -> bool:
        """Whether this call is recorded (False: trace it plainly)."""
        if self.wait:
            self.wait -= 1
            return False
        return True

    def refused(self, reason: str) -> bool:
        """Count a refused recording; True when it stops recording for this
        reason (the first time: the caller says so once)."""
        if reason != self.reason:
            self.reason, self.times, self.gap = reason, 0, 1
        self.times += 1
        if self.times < REFUSALS_BEFORE_BACKOFF:
            return False
        self.wait = self.gap
        self.gap = min(2 * self.gap, LONGEST_WAIT)
        return self.times == REFUSALS_BEFORE_BACKOFF


def stopped_message(name: str, reason: str, where: str) -> str:
    """The one-time line for a captured function that stopped recording (:class:`Backoff`)."""
    return (f"lazycore: capture of {name} stopped recording its calls at {where}: "
            f"{REFUSALS_BEFORE_BACKOFF} recordings in a row could not be replayed ({reason}); its calls are traced "
            f"(a traced step's cost and values), and recorded again after 1, 2, 4, ... up to {LONGEST_WAIT} calls "
            f"in case that changes")


def warn_stopped(fn, qualname: str, reason: str) -> None:
    """Say once, as a :class:`CaptureWarning` at the user's line that called the
    captured function ``fn``, that it stopped recording (:func:`stopped_message`)."""
    code = getattr(fn, "__code__", None)
    name = qualname + (f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else "")
    loc = resolve_location(caller_location(1))
    message = stopped_message(name, reason, format_location(loc))
    if loc is not None:
        warnings.warn_explicit(message, CaptureWarning, loc[0], loc[1])
    else:
        warnings.warn(message, CaptureWarning, stacklevel=2)


def refused(backoffs, key, reason: str, warned: set, kinds: int, fn, qualname: str, say) -> None:
    """A captured function's recording for arguments ``key`` was refused for
    ``reason``: count it in that key's :class:`Backoff` (in the memo
    ``backoffs``), and once it stops recording, say so (``say(text)``, under
    ``LAZYCORE_DEBUG``) and warn once per reason (at most ``kinds`` reasons,
    the ones in ``warned``) at the user's line (:func:`warn_stopped`). One
    routine for every frontend's capture."""
    backoff = backoffs.get(key)
    if backoff is None:
        backoff = backoffs.put(key, Backoff())
    if not backoff.refused(reason):
        return
    if settings.debug:
        say(f"stops recording: {reason}")
    if reason not in warned and len(warned) < kinds:
        warned.add(reason)
        warn_stopped(fn, qualname, reason)


class _Uploads:
    """Host data the step put in the graph, counted as it is announced (a
    ``transfer`` event from host to device: an upload of a tensor made from
    Python data or a CPU tensor, which a replay would not make again).

    Not the ``transfers_to_device`` counter: it also counts the scalar pack
    a program of the runtime's own uploads for itself, as the small program
    that computes a value of constants read in the middle of a step does
    (:mod:`lazycore.runtime.reads`; BART's all-ones mask, whose first read
    in a process refused the first call's recording, so its step replayed
    from its fifth call, not its third). A replay needs no such pack: the
    value it read is a constant of the recording."""

    __slots__ = ("count",)

    def __init__(self):
        self.count = 0

    def heard(self, direction, *_):
        if direction == "host-to-device":
            self.count += 1


UPLOADS = _Uploads()
events.listen("transfer", UPLOADS.heard)


class Watch:
    """The state of the world when a traced call began (see :func:`begin`)."""

    __slots__ = ("seq", "log_start", "before", "held", "counters", "args", "calls", "closures")

    def __init__(self, args, calls=True):
        self.args = list(args)
        self.calls = calls
        self.seq = LOG.start + len(LOG.nodes)  # nodes numbered from here on are the step's
        self.log_start = LOG.start
        self.before: dict[int, tuple] = {}  # id(handle) -> (handle, its value)
        self.held: dict[tuple, list] = {}  # (id(node), index) -> handles holding that value
        for dev in _device.known_devices():
            for h in dev.arena.live():
                v = h._value
                self.before[id(h)] = (h, v)
                self.held.setdefault((id(v[0]), v[1]), []).append(h)
        self.counters = (UPLOADS.count, events.EVENTS.counters["fallbacks"], events.EVENTS.counters["host_reads"])
        self.closures = _closures.queued()


def begin(args, calls=True) -> Watch:
    """Start watching a call whose arguments are the handles ``args``.
    ``calls=False``: its replays make every node again, not one ``call``
    node (a piece of a step traced per op around it, which then compiles as
    that trace would)."""
    return Watch(args, calls)


def _fresh(watch: Watch) -> list[LazyTensor]:
    """Live handles made since ``watch`` began, oldest first."""
    forget_frame()  # a library frame kept for source lines holds its locals' tensors
    out = []
    for dev in _device.known_devices():
        for h in dev.arena.live():
            if watch.before.get(id(h), (None,))[0] is not h:
                out.append(h)
    return out


def check(watch: Watch) -> None:
    """Refuse a call that did what no replay can redo: ran a barrier, uploaded
    host data, fell back to an eager kernel."""
    if LOG.start != watch.log_start or events.EVENTS.counters["host_reads"] != watch.counters[2]:
        # a value read on the host (runtime/hostreads.py) decides Python as a barrier's would: no replay redoes it
        raise Refused("the step ran a barrier (it looked at a value: .item(), print, a fallback op, mark_step)")
    if not LOG.on:
        raise Refused("the step made more nodes than the step log keeps")
    if events.EVENTS.counters["fallbacks"] != watch.counters[1]:
        raise Refused("the step ran an op without a lowering (a counted fallback)")
    if _closures.queued() != watch.closures:
        # a replay runs no Python: the closure would be lost from the second replay on
        raise Refused("the step adds a step closure (add_step_closure), which a replay would not add: add it "
                      "after the step's call, with the values the step returns")
    if UPLOADS.count != watch.counters[0]:
        raise Refused("the step copied host data to the device (a tensor made from Python data or a CPU tensor)")


def contents(watch: Watch, skip=()) -> Counter | None:
    """Each node the watched call made, as it looks on its own (op, attributes,
    result types, the user's line, and the Python numbers and constants it
    takes directly), counted; None when the call ran a barrier.

    A recording bakes the Python numbers library code computed, so one traced
    call is trusted only once another agrees with it. A first call that also
    made optimizer state cannot be compared node for node with the next, but
    every node of the steady step has its twin in it: the next call's contents
    being a part of the first's says no number changed between them (a
    number that did shows up as a node with another constant). ``skip``:
    ranges of node numbers ``[start, end)`` to leave out (work whose numbers
    the frontend guards itself, an optimizer's step)."""
    if LOG.start != watch.log_start or not LOG.on:
        return None
    out = Counter()
    for node in LOG.nodes[watch.seq - LOG.start:]:
        operands = node.operands
        if not operands or any(a <= node.seq < b for a, b in skip):
            continue
        here = (node.op, node.loc, remake.prefix(node))
        out[here] += 1
        # each number by its slot: a slot that read made state in the first call reads data later
        for i, o in enumerate(operands):
            for v in ((o,) if type(o) is Value else o):
                n = v[0]
                if not n.operands and type(n) is not Data:  # made now or kept from before: the same number
                    out[(here, i, n.value.tobytes() if type(n) is Scalar else n.digest)] += 1
    return out


def finish(watch: Watch, kept) -> "Recording":
    """The recording of the call ``watch`` watched. ``kept``: the handles the
    frontend will make again at a replay (the storages of results and of new
    gradients); every other handle the call made must be dead by now.
    Raises :class:`Refused`."""
    check(watch)
    keep = {id(h) for h in kept}
    refuse_strays(lambda: sum(1 for h in _fresh(watch) if id(h) not in keep))
    return Recording(watch, kept)


def refuse_strays(count) -> None:
    """Refuse when ``count()``, the things a step made that are still alive
    but that a replay would not make again, is not 0 once nothing but the
    step's own references could hold them."""
    if count():
        forget_frame()  # a library frame kept for source lines holds its locals
        gc.collect()  # reference cycles (autograd graphs) may hold the last ones
        n = count()
        if n:
            raise Refused(
                f"the step keeps {n} tensor(s) it made where capture cannot see them (a list or attribute "
                f"outside the step, the autograd history of a result whose backward is not in the step, "
                f"optimizer state made on a first step): return them instead")


class Recording:
    """One traced call, as data; :meth:`replay` redoes it."""

    def __init__(self, watch: Watch, kept):
        seq0 = watch.seq
        arg_index = {}
        for i, h in enumerate(watch.args):
            arg_index.setdefault(id(h), i)
        self.aliasing = tuple(arg_index[id(h)] for h in watch.args)
        self.slots: list = []  # ("arg", i) or ("live", weakrefs of the handles holding the value)
        self.slot_types: list = []
        recorded_inputs: list = []  # the slots' values in this call
        self.baked: list = []  # values used as they are: constants and scalar parameters, of any age
        baked_keys: list = []  # what makes each baked value the same in another recording
        env: dict[tuple, int] = {}  # (id(node), index) -> position: inputs, then baked, then made
        constant_memo: dict[int, bool] = {}

        changed = []
        for h, v0 in watch.before.values():
            v = h._value
            if v[0] is not v0[0] or v[1] != v0[1]:
                changed.append((h, v))
        outputs = [v for _, v in changed] + [h._value for h in kept]

        # everything the outputs depend on, back to values from before the call
        made, old = _walk(outputs, seq0, lambda node: False)
        # A value made of constants and scalar parameters alone is baked as it is,
        # whether the step made it or an earlier step left it (a recorded lowering
        # replayed returns the constants it recorded, until lazycore.cache.clear()
        # or its bound drops them), and keyed by what it is: two traced calls that
        # baked equal constants agree whatever their age.
        const = _constants(made, seq0, watch.held, constant_memo)
        if any(const.values()):
            made, old = _walk(outputs, seq0, lambda node: const[id(node)])
        value_memo: dict[int, bytes] = {}
        for v in old:
            node, i = v
            k = (id(node), i)
            if k in env:
                continue
            holders = watch.held.get(k)
            if node.seq >= seq0 or (holders is None and constant_only(node, constant_memo)):
                env[k] = -1 - len(self.baked)
                self.baked.append(v)
                baked_keys.append((_value_digest(node, value_memo), i))
            elif holders is not None:
                a = [arg_index[id(h)] for h in holders if id(h) in arg_index]
                if a:
                    self.slots.append(("arg", a[0]))
                else:
                    self.slots.append(("live", tuple(weakref.ref(h) for h in holders)))
                self.slot_types.append(node.types[i])
                recorded_inputs.append(v)
                env[k] = len(self.slots) - 1
            else:
                raise Refused(f"the step reads a value no live tensor held when it began ({node!r})")
        n = len(self.slots)
        for k, p in env.items():
            if p < 0:
                env[k] = n - 1 - p
        made.sort(key=lambda node: node.seq)
        pos = n + len(self.baked)
        for node in made:
            for i in range(len(node.types)):
                env[(id(node), i)] = pos
                pos += 1

        def at(v):
            return env[(id(v[0]), v[1])]

        entries = remake.entries(made, at)
        # the fragment's outputs: the updated handles' new values, then the kept handles'
        self.updates = []  # per updated handle: its argument index, or a weakref of the live handle
        for h, _ in changed:
            i = arg_index.get(id(h))
            self.updates.append(i if i is not None else weakref.ref(h))
        self.kept = [h.device for h in kept]
        """The devices of the kept handles' values, in order."""
        as_call = made and watch.calls and settings.capture_calls
        outputs = [at(v) for v in outputs]
        self.fragment = Fragment(entries, n, self.baked, outputs, [node.loc for node in made], "a captured step")
        self.fragment.remember(recorded_inputs, [node.digest for node in made])
        # each node by its prefix and operand positions, not its digest, which hashes how the
        # inputs were made: a forward of another length each step gives the optimizer
        # gradients of another graph, and its two traced steps never agreed (issue 39)
        self.key = self._key(baked_keys, [(e[0], e[1], e[4]) for e in entries], outputs)
        self.call = None
        """The step as one ``call`` node's body (:meth:`_call_body`), or None: replays make its nodes."""
        if as_call:
            # the inputs that are an updated handle's old value first, in the order of
            # the updates: on a mesh XLA pairs each donated input with the first
            # result of its type, so each update then reuses its own old buffer
            rank = {}
            for r, (h, _) in enumerate(changed):
                v0 = watch.before[id(h)][1]
                rank.setdefault((id(v0[0]), v0[1]), r)
            order = sorted(range(n), key=lambda k: (rank.get((id(recorded_inputs[k][0]), recorded_inputs[k][1]),
                                                             len(changed)), k))
            self.call = self._call_body(order)
            # this call's results, made again as the replays will make them: one
            # program for the traced call and its replays
            values = self._called(recorded_inputs)
            for h, v in zip([h for h, _ in changed] + list(kept), values):
                h.take(v)

    def _call_body(self, order: list[int]) -> _Call:
        """The fragment made once on placeholders, as a body; the inputs are
        its operands in ``order``. Its constants
        stay in it, made as they were (a constant a traced call made and one
        an earlier call left are the same body); the parameter leaves under
        them (scalar parameters, device data) are operands after the inputs."""
        args = [Arg(p, self.slot_types[k]) for p, k in enumerate(order)]
        given = [None] * len(order)
        for p, k in enumerate(order):
            given[k] = Value(args[p], 0)
        log_start, first = LOG.start, LOG.start + len(LOG.nodes)
        outs = self.fragment.made_once(given)
        logged = LOG.on and LOG.start == log_start
        # the step's value checks yield their flags after its results: each is
        # the check's flag in the barrier's program (lazycore.runtime.checks)
        checks = _checks_of(outs)
        results = len(outs)
        outs = list(outs) + [c.operands[1] for c in checks]
        boundary = {(id(a), 0): i for i, a in enumerate(args)}
        leaves, seen = [], set()
        stack = list(reversed(self.baked))
        while stack:
            v = stack.pop()
            node = v[0]
            if node.is_leaf:
                if (id(node), v[1]) not in boundary:
                    boundary[(id(node), v[1])] = len(args) + len(leaves)
                    leaves.append(v)
            elif id(node) not in seen:
                seen.add(id(node))
                stack.extend(reversed(operand_values(node)))
        body = Body(args, outs, boundary)
        if logged:
            # emitted in the order the step made its nodes (a parameter read
            # before its update), the constants before them, not in the walk's:
            # on a mesh XLA's partitioned program then aliases the updates in place
            rank = {id(node): (0, i) if node.seq < first else (1, node.seq) for i, node in enumerate(body.order)}
            body.order.sort(key=lambda node: rank[id(node)])
        return _Call(body, tuple(v.type for v in outs), tuple(leaves), tuple(order), results)

    def _called(self, inputs) -> list[Value]:
        """The step's output values: one ``call`` node on ``inputs`` and the parameter leaves."""
        call = self.call
        operands = (tuple([inputs[k] for k in call.order]) + call.leaves,)
        node = node_again("call", operands, (call.body,), call.types, digest(call.prefix + operand_bytes(operands)),
                          self.fragment.locs[-1])
        return [Value(node, i) for i in range(call.results)]

    def _key(self, baked, entries, outputs) -> tuple:
        """Equal for two recordings that replay the same way."""
        slots = tuple(s if s[0] == "arg" else ("live", id(s[1][0]())) for s in self.slots)
        updates = tuple(u if type(u) is int else id(u()) for u in self.updates)
        return (self.aliasing, slots, tuple(self.slot_types), tuple(baked), tuple(entries), tuple(outputs), updates,
                tuple(id(d) for d in self.kept))

    def replay(self, args) -> list | None:
        """Redo the call on the argument handles ``args``: the values of the
        kept handles, in the order given to :func:`finish`; None (and nothing
        changed) when the world no longer matches the recording. One step of
        the shared graph (:data:`lazycore.ir.context.LOCK`, docs/threads.md)."""
        with LOCK:
            return self._replay(args)

    def _replay(self, args) -> list | None:
        if len(args) != len(self.aliasing):
            return None
        if self.aliasing:
            seen = {}
            for i, h in enumerate(args):
                if self.aliasing[i] != seen.setdefault(id(h), i):
                    return None
        env = []
        types = self.slot_types
        for j, (kind, where) in enumerate(self.slots):
            if kind == "arg":
                v = args[where]._value
            else:
                h = where[0]()
                if h is None:
                    return None
                v = h._value
                for r in where[1:]:
                    other = r()
                    if other is not None and (other._value[0] is not v[0] or other._value[1] != v[1]):
                        return None  # which of the two the step read is no longer one value
            if v[0].types[v[1]] != types[j]:
                return None
            env.append(v)
        targets = []
        for target in self.updates:
            if type(target) is int:
                targets.append(args[target])
            else:
                targets.append(target())  # a dead handle needs no update
        values = self._called(env) if self.call is not None else self.fragment.replay((), env)
        pairs = [(h, v) for h, v in zip(targets, values) if h is not None]  # (a dead handle needs no update)
        heard = TRACE.updates  # (the automatic step barrier hears in-place updates)
        if heard is not None:
            cutter = TRACE.cutter
            if cutter is not None and heard == cutter.updated:  # all at once: one point of the step
                cutter.updated_many([h for h, _ in pairs], [v for _, v in pairs])
            else:
                for h, v in pairs:
                    heard(h, v)
        for h, v in pairs:
            h.take(v)  # (Arena.pending)
        return values[len(targets):]


def _walk(outputs, seq0: int, baked) -> tuple[list, list]:
    """From the values ``outputs`` back to what the step read: the nodes it
    made with operands (but those ``baked(node)`` says to take as they are),
    and the values under them it did not make that way (a value from before
    the step, a leaf it made, a node ``baked`` names), in the order met."""
    made, old = [], []
    seen: set[int] = set()
    stack = list(outputs)
    while stack:
        v = stack.pop()
        node = v[0]
        if node.seq >= seq0 and type(node) is not Data and node.operands and not baked(node):  # made in the step
            if id(node) not in seen:
                seen.add(id(node))
                made.append(node)
                stack.extend(operand_values(node))
            continue
        old.append(v)  # (met once per use: each of a node's results is a value of its own)
    return made, old


def _constants(made, seq0: int, held, memo: dict) -> dict[int, bool]:
    """``id(node)`` -> whether each node of ``made`` (the step's nodes with
    operands) is made of constants and scalar parameters alone: of leaves the
    step made, of such nodes, and of values from before it that no live handle
    holds and that are such values themselves (:func:`constant_only`). In the
    order made: no recursion down a step's depth."""
    const: dict[int, bool] = {}
    for node in sorted(made, key=lambda n: n.seq):
        ok = True
        for v in operand_values(node):
            n = v[0]
            if n.seq >= seq0 and type(n) is not Data:
                ok = not n.operands or const[id(n)]
            else:
                ok = type(n) is not Data and (id(n), v[1]) not in held and constant_only(n, memo)
            if not ok:
                break
        const[id(node)] = ok
    return const


def _value_digest(node: Node, memo: dict) -> bytes:
    """What a baked value is, for a recording's key: the node's digest, which
    says everything about it but the values of the scalar parameters under it
    (:class:`~lazycore.ir.graph.Scalar`'s is its type's), so a node with such
    parameters under it is hashed again with theirs, bottom up."""
    if node.is_leaf or not node.operands:
        return digest(b"s" + node.digest + node.value.tobytes()) if type(node) is Scalar else node.digest
    got = memo.get(id(node))
    if got is not None:
        return got
    stack = [(node, False)]
    while stack:
        n, ready = stack.pop()
        if id(n) in memo:
            continue
        operands = [v[0] for v in operand_values(n)]
        if not ready:
            stack.append((n, True))
            stack.extend((m, False) for m in operands if not (m.is_leaf or not m.operands) and id(m) not in memo)
            continue
        under = [digest(b"s" + m.digest + m.value.tobytes()) if type(m) is Scalar else memo.get(id(m), m.digest)
                 for m in operands]
        plain = all(u is m.digest for u, m in zip(under, operands))
        memo[id(n)] = n.digest if plain else digest(b"v" + n.digest + b"".join(under))
    return memo[id(node)]


def _checks_of(outs) -> list:
    """The ``check`` nodes the values ``outs`` depend on, in the order they were made."""
    found, seen = [], set()
    stack = [v[0] for v in outs]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.is_leaf:
            continue
        seen.add(id(node))
        if node.op == "check":
            found.append(node)
        stack.extend([v[0] for v in operand_values(node)])
    found.sort(key=lambda n: n.seq)
    return found


class _Call:
    """A recording's step as the body of one ``call`` region node: a replay
    makes that one node on the new inputs (its digest from the inputs'
    alone), not every node of the step, and the barrier walks, hashes and
    recalls one node. The compiler emits the body inline, so the program is
    the step's. Values ``0 .. n-1`` of the body are placeholders for the
    inputs; the parameter leaves under the recording's constants are
    operands after them."""

    __slots__ = ("body", "prefix", "types", "leaves", "order", "results")

    def __init__(self, body: Body, types: tuple, leaves: tuple, order: tuple, results: int):
        self.body = body
        self.types = types
        self.results = results
        """How many of ``types`` are the step's values; the value checks' flags follow."""
        self.order = order
        """The recording's inputs in operand order."""
        self.leaves = leaves
        """The parameter leaves the body reads besides the inputs: operands after them."""
        self.prefix = region_prefix("call", (body,), types)
