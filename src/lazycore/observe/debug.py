"""See what the lazy system does: ``LAZYCORE_DEBUG``, recompile reasons.

``LAZYCORE_DEBUG=1`` (or ``lazycore.config.configure(debug=1)``) writes, after
every barrier, one line to stderr (``sys.stderr`` looked up at each write, or
:data:`stream` when set; plain writes, not :mod:`logging`, so the lines show
up without any logging setup, in order with the graph text)::

    [lazycore] step 3 cpu:0: 9 nodes (2 inputs), 1 output, compile: trace 0.05 ms, lowering 3.1 ms, compile 21.4 ms, execute 0.09 ms
    [lazycore] step 3 cpu:0: recompile: input 0 shape (16, 4) vs (8, 4) in the graph compiled at step 1; first used by lazy.mul at train.py:42
    [lazycore] step 4 cpu:0: 9 nodes (2 inputs), 1 output, cache hit: trace 0.04 ms, execute 0.07 ms
    [lazycore] step 5 cpu:0: 12 nodes (2 inputs), 1 output, disk cache hit: trace 0.05 ms, disk_load 1.2 ms, execute 0.08 ms

A ``disk cache hit`` is a program another process compiled, loaded from the
persistent compile cache (:mod:`lazycore.runtime.diskcache`).

The step is the number of barriers that ran something since debugging was
switched on (all devices together). For every compile after the first on a
device, a second line gives the reason: the new graph is compared with the
nearest graph compiled before on that device (:func:`signature` keeps a compact
description of each: per node its op, attributes, result types, operand
positions and the user's ``file:line``; :func:`reason` finds the first
difference), and the first differing input shape or dtype, op, attribute,
result type or operand wiring is named with the line that recorded the op.
Locations never enter the comparison (nor the compile-cache key). When 3 of
the last 5 barriers on a device (after its first 2) compiled, a warning line
says the graph keeps changing.

``LAZYCORE_DEBUG=2`` also prints the graph of every barrier: the ``lazy``
module (:func:`lazycore.runtime.compiler.build_module`) with its source locations.

Signatures are kept only while debugging is on (the last
:data:`HISTORY_KEPT` per device); with ``debug=0`` the barrier does nothing
here.
"""

from __future__ import annotations

import sys
from collections import deque

from lazycore.ir import events
from lazycore.ir.config import settings
from lazycore.ir.graph import map_operands
from lazycore.ir.sourceloc import caller, format_location, resolve

__all__ = [
    "HISTORY_KEPT", "Signature", "on_barrier", "on_buckets", "on_capture", "on_failure", "reason", "reset", "signature", "stream",
]

stream = None
"""Where the debug lines go; None: ``sys.stderr`` at the time of each write."""

HISTORY_KEPT = 32
"""Compiled-graph signatures kept per device for recompile reasons."""
WARMUP, WINDOW, STORM = 2, 5, 3
"""Warn when ``STORM`` of the last ``WINDOW`` barriers on a device compiled,
not counting its first ``WARMUP`` barriers."""

_LEAVES = ("data", "scalar")


# --- signatures and reasons ---------------------------------------------------------


class _Shown:
    """A number compared and shown by its repr, as a node's digest reads it
    (:func:`lazycore.ir.graph.attr_key`): NaN is NaN and -0.0 is not 0.0,
    so a graph's NaN constant is never a difference between two graphs."""

    __slots__ = ("text",)

    def __init__(self, value):
        self.text = repr(value)

    def __eq__(self, other):
        return type(other) is _Shown and other.text == self.text

    def __hash__(self):
        return hash(self.text)

    def __repr__(self):
        return self.text


def _attr_key(value):
    """A comparable, printable stand-in for an attribute value, equal where
    the digest reads the attributes as equal."""
    import numpy as np

    if isinstance(value, np.ndarray):
        flat = value.reshape(-1)
        head = tuple(map(_Shown, flat[:8].tolist()))
        return ("dense", value.dtype.str, value.shape, head, flat.size, hash(value.tobytes()))
    if type(value) is float:
        return _Shown(value)
    return value


def _show_attr(value) -> str:
    if type(value) is tuple and value and value[0] == "dense" and len(value) == 6:
        _, dtype, shape, head, size, _ = value
        more = ", ..." if size > len(head) else ""
        return f"dense<{', '.join(map(repr, head))}{more}> ({dtype}, shape {shape})"
    return repr(value)


class Signature:
    """The structure of one barrier graph, compact and comparable.

    ``nodes``: per node in walk order ``(op, attrs, result types, operands)``,
    where operands are walk positions ``(pos, result index)`` (a tuple of
    them for a variadic group) and result types are ``(shape, dtype)``; leaves
    are ``"data"`` (a device buffer: an input of the program) and
    ``"scalar"``. ``locs``: the user's ``(file, line)`` per node, kept apart:
    never compared. ``outputs``: walk positions of the outputs.
    """

    __slots__ = ("nodes", "locs", "outputs", "donate", "pipeline", "step")

    def __init__(self, nodes, locs, outputs, donate, pipeline, step=None):
        self.nodes = nodes
        self.locs = locs
        self.outputs = outputs
        self.donate = donate
        self.pipeline = pipeline
        self.step = step

    def __len__(self) -> int:
        return len(self.nodes)

    def _same_rest(self, other) -> int:
        return (
            (self.outputs != other.outputs) + (self.donate != other.donate) + (self.pipeline != other.pipeline)
        )

    def distance(self, other: "Signature") -> tuple[int, int]:
        """(lengths differ, differing entries): smaller is nearer."""
        differing = sum(a != b for a, b in zip(self.nodes, other.nodes))
        differing += abs(len(self.nodes) - len(other.nodes)) + self._same_rest(other)
        return (len(self.nodes) != len(other.nodes), differing)


def signature(walk, donate: dict[int, int] | None = None, pipeline: str | None = None, step=None) -> Signature:
    """The :class:`Signature` of a :class:`~lazycore.runtime.barrier.Walk`."""
    pos: dict[int, int] = {}
    nodes, locs = [], []
    for i, node in enumerate(walk.order):
        pos[id(node)] = i
        operands = map_operands(node.operands, lambda o: (pos[id(o[0])], o[1]))
        attrs = tuple((k, _attr_key(v)) for k, v in node.attrs.items())
        layout = getattr(node, "sharding", None)
        if layout is not None:  # device data on a mesh: its layout is part of the program
            attrs = (("layout", _show_layout(layout)),)
        types = tuple((tuple(t.shape), t.dtype) for t in node.types)
        nodes.append((node.op, attrs, types, operands))
        locs.append(resolve(node.loc))
    outputs = tuple((pos[id(v[0])], v[1]) for v in walk.outputs)
    return Signature(nodes, locs, outputs, dict(donate or {}), pipeline, step)


def _show_layout(layout) -> str:
    """A buffer's layout over its mesh: its spec, or XLA's text when no spec says it."""
    spec = getattr(layout, "spec", None)
    return str(spec) if spec is not None else str(layout)


def nearest(new: Signature, earlier) -> Signature | None:
    """The earlier signature with the smallest difference (the latest on a tie)."""
    best, best_d = None, None
    for old in earlier:
        d = new.distance(old)
        if best_d is None or d <= best_d:
            best, best_d = old, d
    return best


def _where(sig: Signature, i: int) -> str:
    """`` at file:line`` of node ``i``; for a node without one (a leaf, a
    constant made by ``lazycore.scalar``), where its first user with a
    location was recorded."""
    loc = sig.locs[i]
    if loc is not None:
        return f" at {format_location(loc)}"
    j = _first_user(sig, i)
    return "" if j is None else f"; first used by lazy.{sig.nodes[j][0]} at {format_location(sig.locs[j])}"


def _flat_operands(entry):
    for o in entry[3]:
        if o and type(o[0]) is int:
            yield o
        else:
            yield from o


def _first_user(sig: Signature, i: int) -> int | None:
    """The first node (in walk order) with a location that uses node ``i``,
    directly or through nodes without one."""
    reach = {i}
    for j in range(i + 1, len(sig.nodes)):
        if any(p in reach for p, _ in _flat_operands(sig.nodes[j])):
            if sig.locs[j] is not None:
                return j
            reach.add(j)
    return None


def _input_number(sig: Signature, i: int) -> int:
    kind = sig.nodes[i][0]
    return sum(1 for e in sig.nodes[:i] if e[0] == kind)


def _name(sig: Signature, i: int) -> str:
    op = sig.nodes[i][0]
    if op == "data":
        return f"input {_input_number(sig, i)}"
    if op == "scalar":
        return f"scalar parameter {_input_number(sig, i)}"
    return f"lazy.{op}"


def _show_type(t) -> str:
    shape, dtype = t
    return f"{shape} {dtype}"


def _show_operands(sig: Signature, entry) -> str:
    parts = []
    for o in entry[3]:
        group = [o] if o and type(o[0]) is int else list(o)
        shown = []
        for p, k in group:
            name = _name(sig, p)
            if not name.startswith(("input", "scalar")):
                name = f"%{p} ({name})"
            shown.append(name if len(sig.nodes[p][2]) == 1 else f"{name}#{k}")
        parts.append(shown[0] if o and type(o[0]) is int else "[" + ", ".join(shown) + "]")
    return "(" + ", ".join(parts) + ")"


def _describe(new: Signature, old: Signature, i: int) -> str:
    a, b = new.nodes[i], old.nodes[i]
    if a[0] != b[0]:
        return f"op {_name(new, i)} vs {_name(old, i)}{_where(new, i)}"
    if a[0] in _LEAVES:
        (sa, da), (sb, db) = a[2][0], b[2][0]
        what = _name(new, i)
        if sa != sb and da != db:
            diff = f"type {_show_type(a[2][0])} vs {_show_type(b[2][0])}"
        elif sa != sb:
            diff = f"shape {sa} vs {sb}"
        elif da != db:
            diff = f"dtype {da} vs {db}"
        else:
            diff = f"layout {dict(a[1]).get('layout', 'none')} vs {dict(b[1]).get('layout', 'none')}"
        return f"{what} {diff}{_where(new, i)}"
    if a[1] != b[1]:
        old_attrs = dict(b[1])
        for name, value in a[1]:
            if name not in old_attrs or old_attrs[name] != value:
                was = _show_attr(old_attrs[name]) if name in old_attrs else "(none)"
                return f"attribute {name} {_show_attr(value)} vs {was} of lazy.{a[0]}{_where(new, i)}"
        return f"attributes of lazy.{a[0]} {a[1]!r} vs {b[1]!r}{_where(new, i)}"
    if a[3] != b[3]:
        return (
            f"operands of lazy.{a[0]}{_where(new, i)}: {_show_operands(new, a)} vs {_show_operands(old, b)}"
        )
    shown_a = ", ".join(map(_show_type, a[2]))
    shown_b = ", ".join(map(_show_type, b[2]))
    return f"result type of lazy.{a[0]} {shown_a} vs {shown_b}{_where(new, i)}"


def reason(new: Signature, old: Signature) -> str:
    """Why ``new`` is not ``old``: the first difference, as one phrase.

    Read "X vs Y" as "this graph has X where the earlier one had Y".
    """
    differ = [i for i, (a, b) in enumerate(zip(new.nodes, old.nodes)) if a != b]
    # an input that changed is the cause; the ops made from it (a constant
    # broadcast to its shape) may come first in the walk, but only follow it
    first = next((i for i in differ if new.nodes[i][0] in _LEAVES and old.nodes[i][0] == new.nodes[i][0]),
                 differ[0] if differ else None)
    n, m = len(new.nodes), len(old.nodes)
    if n != m:
        head = f"graph has {n} nodes vs {m}"
        if first is not None:
            return f"{head}; first difference at node {first}: {_describe(new, old, first)}"
        i = min(n, m)
        if n > m:
            return f"{head}; the first extra node is {_name(new, i)}{_where(new, i)}"
        return head
    if first is not None:
        return _describe(new, old, first)
    if new.outputs != old.outputs:
        if len(new.outputs) != len(old.outputs):
            return f"{len(new.outputs)} outputs vs {len(old.outputs)} (live tensors with pending work)"
        k = next(k for k, (a, b) in enumerate(zip(new.outputs, old.outputs)) if a != b)
        p = new.outputs[k][0]
        return f"output {k} is {_name(new, p)}{_where(new, p)} vs %{old.outputs[k][0]} ({_name(old, old.outputs[k][0])})"
    if new.donate != old.donate:
        return (
            f"donated inputs (input: output) {new.donate} vs {old.donate}: an input buffer died "
            f"or stayed alive (a handle dropped or kept)"
        )
    if new.pipeline != old.pipeline:
        return f"pass pipeline {new.pipeline or 'the default'!r} vs {old.pipeline or 'the default'!r}"
    return (
        "same graph as an earlier compile: it was dropped from the compile cache "
        "(config cache_size), or registered lowerings changed"
    )


# --- the barrier hook ------------------------------------------------------------------


class _DeviceState:
    __slots__ = ("history", "barriers", "recent", "warned_at")

    def __init__(self):
        self.history: deque[Signature] = deque(maxlen=HISTORY_KEPT)
        self.barriers = 0
        self.recent: deque[bool] = deque(maxlen=WINDOW)
        self.warned_at = -WINDOW


_step = 0
_devices: dict[str, _DeviceState] = {}


def reset() -> None:
    """Forget the step count, the kept signatures and the warning state."""
    global _step
    _step = 0
    _devices.clear()


def on_capture(name: str, what: str) -> None:
    """A line for a decision of a captured step (``lazycore.torch.capture``)."""
    _write(f"[lazycore] capture {name}: {what}")


def on_failure(device, failed: int, outputs: int, first: str) -> None:
    """A line for a barrier whose program failed (:mod:`lazycore.runtime.failures`)."""
    if not settings.debug:
        return
    _write(f"[lazycore] {device.name}: {failed} of {outputs} output{'s' * (outputs != 1)} failed "
           f"(reading one raises): {first}")


def on_buckets(device, what: str) -> None:
    """A line for a shape-bucket decision (:mod:`lazycore.runtime.buckets`):
    a dimension the learned policy marked, a graph left at its own sizes."""
    if settings.debug:
        _write(f"[lazycore] {device.name}: buckets: {what}")


def _write(line: str) -> None:
    out = stream if stream is not None else sys.stderr
    out.write(line + "\n")
    out.flush()


def _last_ms(phase: str) -> float | None:
    d = events.EVENTS.timings.get(phase)
    return d[-1] * 1e3 if d else None


def _ms(v: float | None) -> str:
    if v is None:
        return "?"
    return f"{v:.3f} ms" if v < 1 else f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"


def on_barrier(walk, device, hit: bool, donate: dict[int, int], pipeline: str, loaded: bool = False) -> None:
    """A barrier ran (the ``barrier`` event); one line, and a recompile's reason, when ``settings.debug`` is on.

    A program loaded from the persistent compile cache (``loaded``) is a new
    program for this process like a compiled one (a reason, the warning when
    graphs keep changing): only its line says ``disk cache hit``."""
    if not settings.debug:
        return
    global _step
    _step += 1
    step = _step
    st = _devices.get(device.name)
    if st is None:
        st = _devices[device.name] = _DeviceState()
    st.barriers += 1
    nodes, inputs, outputs = len(walk.order), len(walk.params), len(walk.outputs)
    if hit:
        phases, what = ("trace", "execute"), "cache hit"
    elif loaded:
        phases, what = ("trace", "disk_load", "execute"), "disk cache hit"
    else:
        phases, what = ("trace", "lowering", "compile", "execute"), "compile"
    own, _PROGRAM[:] = (_PROGRAM[0] if _PROGRAM and not hit else {}), []
    times = ", ".join(f"{p} {_ms(own[p] if p in own else _last_ms(p))}" for p in phases)
    stacking = events.EVENTS.counters["stack_compiles"] - own.get("stack_compiles", 0) if own else 0
    if stacking > 0:  # compiled after the step's own program (lazycore.runtime.stacks)
        spent = {p: (events.EVENTS.totals[p][1] - own["total " + p]) * 1e3 for p in ("lowering", "compile")}
        times += (f"; {stacking} stacking program{'s' * (stacking != 1)} compiled: lowering {_ms(spent['lowering'])}, "
                  f"compile {_ms(spent['compile'])}")
    _write(
        f"[lazycore] step {step} {device.name}: {nodes} nodes ({inputs} input{'s' * (inputs != 1)}), "
        f"{outputs} output{'s' * (outputs != 1)}, {what}: {times}"
    )
    read, _READ[:] = _READ[:], []
    if read:
        _write(f"[lazycore] step {step} {device.name}: implicit barrier: {read[0]}")
    if not hit:
        sig = signature(walk, donate, pipeline, step)
        if st.history:
            old = nearest(sig, st.history)
            _write(
                f"[lazycore] step {step} {device.name}: recompile: {reason(sig, old)} "
                f"(this graph vs the one compiled at step {old.step})"
            )
        st.history.append(sig)
    if st.barriers > WARMUP:
        st.recent.append(not hit)
        misses = sum(st.recent)
        if not hit and misses >= STORM and step - st.warned_at >= WINDOW:
            st.warned_at = step
            _write(
                f"[lazycore] warning: {misses} of the last {len(st.recent)} barriers on {device.name} compiled "
                f"a new graph (step {step}): the graph keeps changing; the recompile reasons above say what "
                f"differs (input shapes, Python numbers baked in, control flow)"
            )
    if settings.debug >= 2:
        from lazycore.runtime.compiler import build_module

        module = build_module(walk)
        with module.context:  # printing verifies, and an i64 attribute's check needs the context
            text = module.operation.get_asm(enable_debug_info=True)
        _write(f"[lazycore] step {step} {device.name}: graph:\n{text.rstrip()}")


_PROGRAM: list = []
"""The step's own program's phases (one entry), taken when it was compiled or
loaded (:func:`on_program`), before the barrier compiles the stacking programs
its arguments need: the barrier line reports these, as the slow-compile warning
does, and the stacking programs apart."""


def on_program(exe, device, walk, loaded: bool) -> None:
    """The step's program was compiled or loaded (the ``program`` event)."""
    if not settings.debug:
        return
    own = {p: _last_ms(p) for p in (("disk_load",) if loaded else ("lowering", "compile"))}
    own.update({"total " + p: events.EVENTS.totals[p][1] for p in ("lowering", "compile")},
               stack_compiles=events.EVENTS.counters["stack_compiles"])
    _PROGRAM[:] = [own]
_READ: list = []
"""What the next barrier line says ran it: a read of a pending value (set by
:func:`on_implicit_barrier`, taken by :func:`on_barrier`)."""


def _reader() -> str:
    """The user's line and function that read a pending value: the innermost
    frame outside the library, past the event handler and the reads module."""
    loc = caller()
    return f"{format_location(loc)} in {loc[0].co_name}" if loc is not None else "a library's own thread"


def on_implicit_barrier(t) -> None:
    """A pending value is being read (``bool()`` of a tensor in an ``if``,
    ``.item()``, ``.tolist()``, a print): the barrier it runs gets a line
    naming the user's line and function, the place that cut the step."""
    if not settings.debug:
        return
    _READ[:] = [f"a read of a pending {t} value at {_reader()} needs the value now, so the graph up to it "
                f"ran as a program of its own (data-dependent: bool() of a tensor, .item(), .tolist(), "
                f"a print; see docs/guides/torch.md, \"Reads inside a step\")"]


def on_read_apart(t, nodes: int) -> None:
    """A pending mask or index is read in the middle of a step and computed by
    a program of its own (:func:`lazycore.runtime.reads._read_alone`): a line
    naming the read, which waits for that program though it cuts nothing."""
    if not settings.debug:
        return
    _write(f"[lazycore] read apart: a read of a pending {t} value at {_reader()} ran its graph ({nodes} nodes) "
           f"as a program of its own and waited for it; the step's other pending work stays one graph "
           f"(see docs/guides/torch.md, \"Reads inside a step\")")


def on_read_on_host(t, nodes: int) -> None:
    """A pending value made of small uploads' host copies is read and computed
    on the host (:mod:`lazycore.runtime.hostreads`): a line naming the read,
    which runs no program."""
    if settings.debug:
        _write(f"[lazycore] read on the host: a read of a pending {t} value at {_reader()} was computed from "
               f"uploaded data's host copy ({nodes} nodes); no program ran, nothing was read from the device")


def on_scalar_promoted(first, now, where: str) -> None:
    """A line when the learned scalar policy makes a place's number a parameter
    (:mod:`lazycore.trace.scalar_policy`)."""
    if settings.debug:
        _write(f"[lazycore] scalar at {where} took {first!r} then {now!r}: a program parameter from now on "
               f"(later values compile nothing)")


def on_auto_barrier(what: str, where: str) -> None:
    """A line for an automatic step barrier's decision (:mod:`lazycore.runtime.autostep`)."""
    if settings.debug:
        _write(f"[lazycore] automatic barrier: {what} ({where})")


events.listen("barrier", on_barrier)
events.listen("program", on_program)
events.listen("failure", on_failure)
events.listen("scalar_promoted", on_scalar_promoted)
events.listen("implicit_barrier", on_implicit_barrier)
events.listen("read_apart", on_read_apart)
events.listen("read_on_host", on_read_on_host)
events.listen("auto_barrier", on_auto_barrier)
events.listen("buckets", on_buckets)

from lazycore.observe.inspect_graph import ir_text, to_dot  # noqa: E402,F401
