"""Value checks: eager's errors that only the values can tell, raised at the barrier.

Eager torch raises at the call when an integer is divided by zero; a lazy
program learns its values only when it runs. A frontend records such a test
as a ``lazy.check`` node (:func:`lazycore.trace.core.check`): its result is
the checked value, its ``failed`` operand an i1 scalar, its ``message``
eager's error text. How a check reaches the user:

1. The barrier's program returns, after its outputs, the ``failed`` flag of
   every check node of its walk, in walk order (:func:`nodes`;
   ``compiler.build_module`` adds them before any pass runs, and the op
   itself lowers to its operand): as few i1 arrays as that order allows
   (a rolled loop's checks, :mod:`lazycore.passes.rolled_chains`, as the
   array of its copies' flags it returns; the others' as one vector), which
   flattened one after the other are one flag per check. A recalled walk
   runs the program of an identical graph, so its flags line up the same way.
2. When the program has finished (``launches.Launch``, ``standalone.run_alone``),
   :func:`failed` reads the flags. For each true one, every output computed
   from that check's result fails as a failing program's outputs do
   (:mod:`lazycore.runtime.failures`): its leaf holds a ``Failure`` of stage
   ``"check"``, and every read raises :class:`lazycore.BarrierError` with
   the message and the line that recorded the check, as do values computed
   from it later; the error is also an instance of the builtin exception the
   check's ``error`` names (eager's type: ``except ValueError`` catches
   NumPy's negative integer power). The other outputs keep their values.
3. A program with checks is waited for before any read returns a value.
   The next barrier starts its program meanwhile, and waits for this one
   after: the outputs of that program computed from values a check failed
   fail too, with the check's error (``launches.Launch.poison``), as if it
   had started after the wait.

The frontends record checks for torch's integer division by zero, NumPy's
negative integer powers and floating-point errors under ``np.errstate``, and
every index held on the device (``x[i]``, gather, scatter, index_select,
embedding, nll_loss's targets, one_hot, NumPy's fancy indexing and take, ...:
eager's range, eager's exception type; ``settings.index_checks`` off records
none of those, and an out-of-range index is clamped or its update dropped).

An index check's message holds ``{index}`` where eager names the offending
index (``index {index} is out of bounds for dimension 0 with size 5``): the
program computes only the flag, and once it is true :func:`text` runs the
check's index and mask as a program of their own (``failed``'s ``run``) and
names the first offending entry; without a runner, the placeholder goes.

A check whose ``error`` is ``RuntimeWarning`` (NumPy's floating-point
warnings under ``np.errstate``) fails nothing: when its flag is true the
warning is emitted, attributed to the line that recorded the check, and the
values stand.

A captured step replayed as one ``call`` node (:mod:`lazycore.trace.capture`)
keeps its checks in its body and yields their flags after its results: each
such flag counts as the check's, and a true one fails every result of the
call (eager would have raised inside the step, before any of it was done).

Nothing else is special: check nodes hash, replay, capture and cache like any
other node, and a check whose result nothing live uses is not computed,
as it is no part of any output.

**Step checks** fail the whole step rather than a value: eager raises at the
call (torch.distributions' argument validation, ``torch.linalg``'s error
checks), and nothing after it happens. The trace layer registers one
(:func:`lazycore.trace.stepchecks.step_check`, here :func:`add_step`) with
its i1 flag, a ``raiser`` that makes eager's exception from values once they
are known, the user's line, and which value each live handle of the device
held at that moment. The barrier of that device then (:func:`gate_step`,
before it collects the step):

1. gives each live handle that held another value when a check was recorded
   the value ``select(flag, then, now)`` (the flags of checks in a row that
   saw the same value or-ed), so a failed step leaves every handle as it was
   at the first failing check, inside the program: parameters and optimizer
   state are not half updated even when their buffers are donated;
2. returns the flags, stacked, as one more output, and waits for the program.

After it (:func:`settle_step`) a true flag makes the barrier raise the first
failing check's error: eager's exception (``raiser``'s, its message computed
from the values the step had there), also a
:class:`lazycore.BarrierError` naming the user's line. The values computed
by handles made after that check (which eager never made) fail with it.
A step without a failing check costs one select per handle it changed (fused
into the program) and one read of the flags.
"""

from __future__ import annotations

import warnings

import numpy as np

from lazycore.ir.failure import EAGER_ERRORS, BarrierError, Failure, barrier_error_type
from lazycore.ir.graph import LOG, Data, Node, Value
from lazycore.ir.memo import Memo
from lazycore.ir.sourceloc import format_location, resolve
from lazycore.ir.walk import Walk
from lazycore.runtime import failures

WARNING = "RuntimeWarning"

_REGISTRIES: dict[str, dict] = {}
"""File name -> the warnings registry of its lines (the "default" action's
once per line, as a module's ``__warningregistry__`` gives it)."""


_CALLS = Memo("runtime.check_calls", 1024)
"""``id(body)`` -> (body, [(check node, result index of its flag)]) of a
``call`` body (the body is kept: an id is only unique while it lives)."""


def _in_call(node) -> list:
    body = node.bodies[0]
    known = _CALLS.get(id(body))
    if known is None or known[0] is not body:
        where = {(id(v[0]), v[1]): i for i, v in enumerate(body.results)}
        found = []
        for inner in body.order:
            if inner.op == "check":
                flag = inner.operands[1]
                i = where.get((id(flag[0]), flag[1]))
                if i is not None:
                    found.append((inner, i))
        known = _CALLS.put(id(body), (body, found))
    return known[1]


def entries(walk) -> list[tuple[Node, Value, Node]]:
    """Per value check of a barrier's walk, in the order of their flags:
    ``(check node, its flag's value, the node whose results it fails)`` (the
    check itself, or the ``call`` node whose body holds it)."""
    out = []
    for node in walk.order:
        op = node.op
        if op == "check":
            out.append((node, node.operands[1], node))
        elif op == "call":
            out.extend((inner, Value(node, i), node) for inner, i in _in_call(node))
    return out


def nodes(walk) -> list[Node]:
    """The check nodes of a barrier's walk, in the order of their flags."""
    return [e[0] for e in entries(walk)]


def flag_values(walk) -> list[Value]:
    """The flag of each of :func:`nodes`: the program's extra outputs. A flag
    ``m != 0`` of a scalar ``m`` is returned as ``m`` (as true, and one
    kernel fewer: the frontends' index checks reduce their mask as floats)."""
    return [_tested(e[1]) for e in entries(walk)]


def _tested(flag: Value) -> Value:
    node = flag[0]
    if node.op != "compare" or node.attrs["direction"] != "NE":
        return flag
    m, zero = node.operands
    if m[0].types[m[1]].shape != () or zero[0].op != "constant":
        return flag
    value = zero[0].attrs["value"]
    return m if value.shape == () and value == 0 else flag


def text(node: Node, run=None) -> str:
    """A failed check's message. ``{index}`` in it (an index check's) is the
    first entry of the checked value that its flag's mask holds true, as
    eager names the offending index: ``run`` computes the two (a runner of
    values as a program of their own, given by whoever ran the program), so
    an in-range program computes nothing more than its flags. Where it
    cannot be had (no runner, a loop's or captured step's carried flag, an
    input gone) the placeholder goes: ``index is out of bounds ...``."""
    message = node.attrs["message"]
    if "{index}" not in message:
        return message
    found = _first_offending(node, run)
    if found is None:
        return message.replace(" {index}", "").replace("{index}", "")
    return message.replace("{index}", str(found))


def _mask(flag: Value) -> Value | None:
    """The i1 mask a flag reduces (``any(mask)``, or ``sum(f32(mask)) != 0``:
    :func:`flag_values`); None for another flag (a body's, carried out of it)."""
    v = _tested(flag)
    if v[0].op not in ("reduce_max", "reduce_sum"):
        return None
    v = v[0].operands[0]
    if v[0].op == "convert":
        v = v[0].operands[0]
    return v if v[0].types[v[1]].dtype == "i1" else None


def _first_offending(node: Node, run) -> int | None:
    if run is None:
        return None
    index, mask = node.operands[0], _mask(node.operands[1])
    if mask is None:
        return None
    if mask[0].types[mask[1]].shape != index[0].types[index[1]].shape:
        return None
    try:
        got = run([index, mask])
    except Exception:  # noqa: BLE001 - the message loses its number, the error stands
        return None
    if any(type(g) is failures.Failure for g in got):
        return None
    entries_, bad = np.asarray(got[0]).reshape(-1), np.asarray(got[1]).reshape(-1)
    at = int(np.argmax(bad))
    return int(entries_[at]) if bad.size and bad[at] else None


def failed(values: list[Value], flags: list, poisoned: dict | None = None, run=None) -> list | None:
    """Per value of a program that computed ``values`` and returned ``flags``
    after them (arrays whose elements, in order, are one flag per check), the :class:`~lazycore.runtime.failures.Failure` of a check
    that failed and that the value depends on, or None; None instead of the
    list when no check failed. Reads the flags (waits for the program).
    ``poisoned``: ids of nodes computed from inputs that failed after the
    program started (:meth:`lazycore.runtime.launches.Launch.poison`): their
    checks read garbage, and neither fail nor warn. ``run``: computes a
    list of values as a program of their own (:func:`text`), or None."""
    if not len(flags):
        return None
    # (a rolled loop returns the flags of its copies' checks as one stack)
    tripped = np.flatnonzero(np.concatenate([np.asarray(flag).reshape(-1) for flag in flags])).tolist()
    if not tripped:
        return None
    walk = Walk(values)
    checked = entries(walk)
    seeds = {}
    stopped = _step_stopped_at()
    for i in tripped:
        node, _, owner = checked[i]
        if poisoned and id(owner) in poisoned:
            continue
        if stopped is not None and node.seq >= stopped:
            continue  # recorded after a step check that failed: eager raised before it
        if node.attrs["error"] == WARNING:
            _warn(node)
            continue
        if id(owner) not in seeds:  # (a call's first failed check names it)
            message = text(node, run)
            seeds[id(owner)] = failures.node_failure(node, message, "check", None, node.attrs["error"])
    if not seeds:
        return None
    bad = failures.spread(walk, seeds)
    return [bad.get(id(v[0])) for v in values]


def _warn(node: Node) -> None:
    where = resolve(node.loc) or ("<lazycore>", 0)
    if len(_REGISTRIES) > 1024:
        _REGISTRIES.clear()
    warnings.warn_explicit(node.attrs["message"], RuntimeWarning, where[0], where[1],
                           registry=_REGISTRIES.setdefault(where[0], {}))


# --- step checks ------------------------------------------------------------------


class StepCheck:
    """One registered step check (:func:`add_step`)."""

    __slots__ = ("device", "flag", "raiser", "loc", "before", "ops", "seq")

    def __init__(self, device, flag, raiser, loc, before, ops):
        self.seq = LOG.start + len(LOG.nodes)
        """The step-log number of the next node then: value checks numbered
        from it on were recorded after it (:func:`failed` leaves them alone
        when this one fails: eager never reached them)."""
        self.device = device
        self.flag = flag
        """The i1 scalar handle: true when eager would have raised."""
        self.raiser = raiser
        """``raiser()`` returns (or raises) eager's exception, computed from values read then."""
        self.loc = loc
        self.before = before
        """The device's arena key of each live handle -> the value it held."""
        self.ops = ops
        """The trace layer's ``select(flag, then, now, shaped)``, ``any_of(flags)`` and
        ``stack(flags)`` over handles (this layer makes no nodes of its own)."""


STEP_CHECKS: list[StepCheck] = []
"""The step checks recorded since their device's last barrier, in order."""

RUNNING: list = []
"""The :class:`Gated` step whose barrier runs now (:func:`gate_step` to
:func:`settle_step`): its value checks are settled knowing its step checks'."""


def add_step(flag, raiser, loc, ops) -> None:
    """Register a step check (see the module's docstring): ``flag`` an i1
    scalar handle; the values live handles hold now are what a failed step
    leaves them holding."""
    device = flag.device
    before = {}
    for ref in list(device.arena._live):  # (the arena's keys: a handle made later is not among them)
        t = ref()
        if t is not None:
            before[ref] = t._value
    STEP_CHECKS.append(StepCheck(device, flag, raiser, loc, before, ops))


class Gated:
    """What :func:`gate_step` did to a step: its checks, the handle of their
    flags, and per check the handles made after it whose values are the
    step's work (arena keys)."""

    __slots__ = ("checks", "flags", "after", "first")

    def __init__(self, checks, flags, after):
        self.checks = checks
        self.flags = flags
        self.after = after
        self.first: int | None = None
        """The index of the first check that failed, once read (-1: none did)."""

    def failing(self) -> int | None:
        """The first failing check's index, None when none failed or the
        flags are not computed (yet, or their program failed)."""
        if self.first is None:
            leaf = self.flags._value[0]
            if type(leaf) is not Data or type(leaf.buffer) is Failure:
                return None
            tripped = np.flatnonzero(np.asarray(leaf.buffer).reshape(-1))
            self.first = int(tripped[0]) if tripped.size else -1
        return None if self.first < 0 else self.first


def _step_stopped_at() -> int | None:
    """The step-log number from which a running step's value checks are moot
    (a step check before them failed), or None."""
    for gated in RUNNING:
        k = gated.failing()
        if k is not None:
            return gated.checks[k].seq
    return None


def _same(a: Value, b: Value) -> bool:
    return a[0] is b[0] and a[1] == b[1]


def gate_step(device) -> Gated | None:
    """Before a barrier of ``device`` collects its step: each live handle that
    changed since a step check takes its value then where the check fails
    (in the program), and the checks' flags become one output. None: no step
    check was recorded on ``device``."""
    mine = [c for c in STEP_CHECKS if c.device is device]
    if not mine:
        return None
    STEP_CHECKS[:] = [c for c in STEP_CHECKS if c.device is not device]
    ops = mine[0].ops
    live = [(ref, ref()) for ref in list(device.arena._live)]
    after: list[list] = [[] for _ in mine]
    ors: dict[tuple, object] = {}
    shaped: dict = {}  # (the or-ed flags broadcast to each shape, once)
    for ref, t in live:
        if t is None:
            continue
        now = t._value
        runs: list = []  # [check indices, the value the handle held at them], first check first
        for k, c in enumerate(mine):
            then = c.before.get(ref)
            if then is None:
                if type(now[0]) is not Data:  # (an upload made after it is no work of the step)
                    after[k].append(ref)
            elif runs and _same(runs[-1][1], then):
                runs[-1][0].append(k)
            else:
                runs.append(([k], then))
        v = now
        for ks, then in reversed(runs):
            if _same(then, v):
                continue
            key = tuple(ks)
            flag = ors.get(key)
            if flag is None:
                flag = ors[key] = ops.any_of([mine[k].flag for k in ks])
            v = ops.select(flag, then, v, shaped)
        if v is not now:
            t.take(v)  # (a select: pending work, Arena.pending)
    gated = Gated(mine, ops.stack([c.flag for c in mine]), after)
    for c in mine:
        c.flag = None  # (in the stack: not an output of its own)
    RUNNING.append(gated)
    return gated


def settle_step(gated: Gated) -> None:
    """After the barrier's program ran (and was waited for): raise the first
    failing step check's error, once the handles made after it are failed."""
    if gated in RUNNING:
        RUNNING.remove(gated)
    k = gated.failing()
    if k is None:  # none failed, or the program did: its values say so on their own
        return
    check = gated.checks[k]
    try:
        exc = check.raiser()
    except Exception as e:  # noqa: BLE001 - eager's check raising is how some say it
        exc = e
    if not isinstance(exc, BaseException):
        raise TypeError(f"a step check's raiser returned {type(exc).__name__}, not an exception")
    where = resolve(check.loc) if check.loc is not None else None
    location = format_location(check.loc) if where is not None else None
    message = str(exc.args[0]) if len(exc.args) == 1 else str(exc)
    failure = Failure(message, None, location, "check", None, _eager_name(type(exc)))
    for ref in gated.after[k]:
        t = ref()
        if t is not None and type(t._value[0]) is Data and type(t._value[0].buffer) is not Failure:
            leaf = Data(None, t.type, owned=False)
            failures.mark(leaf, failure)
            t.take(Value(leaf, 0))  # (device data for device data: Arena.holds)
    error = _error_type(type(exc))(message, None, location, "check")
    error.add_note(f"lazycore: the step check recorded at {location or 'an unknown line'} failed; the step's "
                   f"handles hold the values they had there, those made after it fail")
    raise error


def _eager_name(cls: type) -> str:
    """The name in :data:`~lazycore.ir.failure.EAGER_ERRORS` of the nearest base of ``cls``."""
    for base in cls.__mro__:
        if EAGER_ERRORS.get(base.__name__) is base:
            return base.__name__
    return "RuntimeError"


_ERROR_TYPES = Memo("runtime.step_check_errors", 64)
"""Exception class -> its :class:`BarrierError` twin (a subclass of both)."""


def _error_type(cls: type) -> type:
    name = _eager_name(cls)
    if EAGER_ERRORS[name] is cls or not issubclass(cls, Exception):
        return barrier_error_type(name)
    t = _ERROR_TYPES.get(cls)
    if t is None:
        try:
            t = type(f"Barrier{cls.__name__}", (BarrierError, cls),
                     {"__module__": __name__, "__doc__": f"A :class:`BarrierError` that is a {cls.__name__}."})
        except TypeError:  # (a base whose layout cannot be combined)
            t = barrier_error_type(name)
        t = _ERROR_TYPES.put(cls, t)
    return t
