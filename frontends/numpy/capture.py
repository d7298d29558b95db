"""``lazycore.numpy.capture``: a NumPy step traced twice, then replayed.

    @lnp.capture
    def step(w, x, y, lr):
        err = x @ w - y
        w -= lr * (x.T @ err) / len(x)      # in place: the caller's w is updated
        return (err ** 2).mean()

    for x, y in batches:
        loss = step(w, x, y, 0.1)
        lazycore.mark_step()

Every NumPy call on a lazy array runs Python (the ufunc's dispatch, view
bookkeeping) at every step. A captured step runs the function while it is
traced; once two traced calls did the same thing (same ops on the same
arrays, same Python values), later calls with arguments of the same kind
replay the recording (:mod:`lazycore.capture`): the step's nodes are made
again on the current values as one ``call`` node, arrays it updated in place
are updated (arguments, and live arrays it read: a global's, a random
generator's state), and its result arrays come back, with no NumPy call run.
What it compiles is what the traced step compiled; its answers are NumPy's,
as the traced step's are.

Guards, checked at every call before anything changes (a failed one traces
the call again; each kind of argument keeps up to 4 recordings): lazy array
arguments by type, shape, dtype, strides, offset, writeability, the view
steps from their storage and its type and device; anything else by value,
like ``jax.jit``'s static arguments (a host ``numpy.ndarray`` argument is not
captured: its values would be baked in); ``np.errstate``'s modes and the
index checks; the Python state the step's own code read (globals, closed-over
cells, ``self`` attributes: :mod:`lazycore.trace.pyreads`): a number by value,
anything else by identity; the arrays the step read or updated still alive
and of the recorded types; the storages its results are views of still
alive.

Refused (traced, the reason in :attr:`Captured.why`): a step
that looks at a value (``float(a)``, ``print``, a counted fallback,
``lazycore.mark_step``), uploads host data (``lnp.asarray`` of a list or a
NumPy array inside the step), or keeps an array it made anywhere but in its
result (a global rebound to a new array: update it in place instead,
``w -= ...`` or ``w[...] = ...``). Recording a call costs several traced
calls: after three recordings in a row refused for one reason, the function
says so once (a :class:`~lazycore.trace.capture.CaptureWarning` at the
calling line) and traces its calls plainly, recording one again after 1, 2,
4, ... up to 64 of them (:class:`~lazycore.trace.capture.Backoff`, as
``lazycore.torch.capture``), so a fix is still found;
:attr:`Captured.recordings` counts the recorded calls.
"""

from __future__ import annotations

import functools
import weakref

import numpy as np

from lazycore.ir.config import settings
from lazycore.ir.context import LOCK, TRACE
from lazycore.ir.memo import Family, Memo
from lazycore.ir.tensor import LazyTensor
from lazycore.trace import capture as _capture
from lazycore.trace import pyreads as _pyreads
from lazycore.trace import views as _views
from lazycore.trace.replayer import GUARDED, Replayer
from lazycore.trace.views import Storage

from . import fpe
from .array import ndarray

__all__ = ["capture", "Captured"]

_KINDS_KEPT = 8
"""Kinds of arguments (shapes, dtypes, Python values) a captured function keeps recordings for."""
_PLANS_KEPT = 4
"""Confirmed recordings kept per kind of arguments."""
_PLANS = Family("numpy.capture_plans", _KINDS_KEPT)
"""Every captured function's confirmed recordings (a :class:`~lazycore.trace.replayer.Replayer` each)."""
_LAST = Family("numpy.capture_last_traces", _KINDS_KEPT)
"""Every captured function's last traced call per kind of arguments."""
_BACKOFF = Family("numpy.capture_backoff", _KINDS_KEPT)
"""Every captured function's :class:`~lazycore.trace.capture.Backoff` per kind of arguments."""


def capture(fn=None):
    """Capture the NumPy step function ``fn`` (a decorator): see the module docs."""
    if fn is None:
        return capture
    return Captured(fn)


class Captured:
    """A captured step function. Call it as the function itself."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._plans = Replayer("numpy.capture_plans", _KINDS_KEPT, _PLANS_KEPT, _PLANS)
        self._last = Memo("numpy.capture_last_traces", _KINDS_KEPT, _LAST)  # key -> the last traced call's plan
        self._backoff = Memo("numpy.capture_backoff", _KINDS_KEPT, _BACKOFF)  # key -> when to record again
        self._warned: set[str] = set()  # the reasons a stop was said for
        self.traces = 0
        """Calls that ran the function."""
        self.recordings = 0
        """Of those, calls that were recorded (the others were traced plainly: :class:`~lazycore.trace.capture.Backoff`)."""
        self.replays = 0
        """Calls that replayed a recording instead."""
        self.why: str | None = None
        """Why the last traced call cannot be replayed (None: it can, or no call yet)."""
        self.guard: str | None = None
        """The guard that failed last, sending a call back to tracing."""

    def __call__(self, *args, **kwargs):
        flat: list = []
        spec = _flatten((args, kwargs), flat)
        key = _arg_key(flat, spec)
        if key is not None:
            with LOCK:  # a replay's values are raw until its arrays hold them (docs/threads.md)
                out = self._plans.replay(key, flat)
            if out is not GUARDED:
                self.replays += 1
                return out
            newest = self._plans.find(key)
            if newest is not None:  # (tried first: the plan the last replayed call used)
                self.guard = newest.failed
            backoff = self._backoff.get(key)
            if backoff is not None and not backoff.records():
                self.traces += 1
                # the next recording starts afresh: it is compared with the call after it, not an old one
                self._last.pop(key, None)
                return self.fn(*args, **kwargs)
        return self._trace(args, kwargs, flat, key)

    def _trace(self, args, kwargs, flat, key):
        self.traces += 1
        if settings.debug and self._plans.get(key):
            _say(self, f"traced again: {self.guard}")
        if key is None:
            self.why = "an argument is neither a lazy array nor a hashable Python value"
            return self.fn(*args, **kwargs)
        # a recording watches the whole graph: no other thread's op may land in it (docs/threads.md)
        with LOCK:
            return self._record(args, kwargs, flat, key)

    def _record(self, args, kwargs, flat, key):
        self.recordings += 1
        previous = self._last.pop(key, None)
        # a first call makes the constants later calls reuse: the second call is
        # compared with it by contents (:func:`lazycore.capture.contents`)
        compare = previous is None or previous.first
        try:
            plan, out = _Plan.trace(self.fn, args, kwargs, flat, compare)
        except _capture.Refused as e:
            self.why = e.args[0]
            if settings.debug:
                _say(self, f"cannot replay: {self.why}")
            self._refused(key, self.why)
            return e.args[1] if len(e.args) > 1 else None
        plan.first = previous is None
        if previous is not None and (previous.key == plan.key or previous.first and _agrees(previous, plan)):
            self.why = None
            self._plans.add(key, plan)
            self._backoff.pop(key, None)
            if settings.debug:
                _say(self, f"recorded ({len(plan.rec.fragment.entries)} nodes): calls with these arguments replay")
            return out
        self.why = None if previous is None else (
            "the last two traced calls differed (the step reads a Python value that changes every call, "
            "or made state on its first call)")
        self._last.put(key, plan)
        if previous is not None:  # (a first call has nothing to agree with yet)
            self._refused(key, self.why)
        return out

    def _refused(self, key, why: str) -> None:
        _capture.refused(self._backoff, key, why, self._warned, _KINDS_KEPT, self.fn,
                         getattr(self, "__qualname__", "step"), lambda what: _say(self, what))


def _say(captured, what: str) -> None:
    from lazycore.observe.debug import on_capture

    on_capture(getattr(captured, "__qualname__", "step"), what)


# --- arguments and results as flat lists ------------------------------------------------


def _flatten(obj, out: list):
    """The structure of ``obj`` (tuples, lists and dicts of leaves), hashable; its leaves appended to ``out``."""
    t = type(obj)
    if t is tuple or t is list:
        return (t, tuple(_flatten(x, out) for x in obj))
    if t is dict:
        return (dict, tuple(obj), tuple(_flatten(v, out) for v in obj.values()))
    out.append(obj)
    return None


def _unflatten(spec, leaves):
    if spec is None:
        return next(leaves)
    if spec[0] is dict:
        return {k: _unflatten(s, leaves) for k, s in zip(spec[1], spec[2])}
    return spec[0](_unflatten(s, leaves) for s in spec[1])


def _layout(a: ndarray) -> tuple | None:
    """What a replay needs to know about a lazy array, hashable; None if it cannot be."""
    steps = a._steps
    if steps:
        steps = _views.steps_key(steps)
        if steps is None:
            return None
    st = a._storage
    return (type(a), a._shape, a._dtype, a._estrides, a._offset, a._writeable, steps, st.strides, st.handle.type,
            st.handle.device)


def _arg_key(flat, spec):
    key = [spec]
    for x in flat:
        if isinstance(x, ndarray):
            layout = _layout(x)
            if layout is None:
                return None
            key.append(layout)
        elif isinstance(x, np.ndarray):
            return None  # a host array: its values would be baked
        else:
            key.append((type(x), x))
    key = tuple(key)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _global_state() -> tuple:
    # np.errstate decides which checks a step's ufuncs record; the index checks likewise
    return (fpe.modes(), settings.index_checks)


# --- a traced call ------------------------------------------------------------------


def _agrees(first: "_Plan", second: "_Plan") -> bool:
    """Whether a first traced call and the second did the same thing, but for
    constants the first made and the second reused: the same arrays read and
    updated, the same guards and results, and every node the second made one
    the first made too, with the same numbers and constants at the same line."""
    return (first.contents is not None and second.contents is not None and second.contents <= first.contents
            and first.shape == second.shape)


class _Plan:
    """A traced call: the core recording plus what NumPy adds (guards, the results' arrays)."""

    failed: str | None = None
    first = False
    """The first traced call with its kind of arguments (it may make constants later calls reuse)."""

    @classmethod
    def trace(cls, fn, args, kwargs, flat, compare=False):
        arrays = [x for x in flat if isinstance(x, ndarray)]
        state0 = _global_state()
        # no automatic step cut and no eager-mode run inside a traced call, as torch's capture
        # (runtime/eager.py: a recording keeps its program; a run would refuse it as a barrier)
        with _pyreads.Reads(fn) as reads, TRACE.cuts_held():
            watch = _capture.begin([x._storage.handle for x in arrays])
            out = fn(*args, **kwargs)
        contents = _capture.contents(watch) if compare else None
        try:
            plan = cls(watch, reads, out, state0)
        except _capture.Refused as e:
            raise _capture.Refused(str(e), out) from None
        plan.contents = contents
        return plan, out

    def __init__(self, watch, reads, out, state0):
        _capture.check(watch)  # a barrier or an upload first: the clearest reason
        if _global_state() != state0:
            raise _capture.Refused("the step changed np.errstate or the index checks")
        try:
            self.python = _pyreads.Guards(reads.guards().checks)
        except _pyreads.Blind as e:
            raise _capture.Refused(str(e)) from None
        self.state = state0
        flat_out: list = []
        self.out_spec = _flatten(out, flat_out)
        kept, strides, made = [], [], {}  # made: id(storage made in the step) -> its index in kept

        def describe(x):
            st = x._storage
            meta = (type(x), x._steps, x._shape, x._dtype, x._estrides, x._offset, x._writeable)
            h = st.handle
            if watch.before.get(id(h), (None,))[0] is not h:  # a storage the step made
                k = made.get(id(st))
                if k is None:
                    k = made[id(st)] = len(kept)
                    kept.append(h)
                    strides.append(st.strides)
                return ("new", k, meta)
            return ("old", weakref.ref(st), meta)

        self.outs = [describe(x) if isinstance(x, ndarray) else ("value", x, None) for x in flat_out]
        self.rec = _capture.finish(watch, kept)
        self.strides = strides
        rec = self.rec
        self.shape = (rec.aliasing, tuple(s if s[0] == "arg" else ("live", id(s[1][0]())) for s in rec.slots),
                      tuple(rec.slot_types), tuple(u if type(u) is int else id(u()) for u in rec.updates),
                      tuple(id(d) for d in rec.kept), self.state, self.python.key, self.out_spec,
                      tuple(_out_key(d) for d in self.outs))
        """All but the nodes: what a first call and the next must share to agree."""
        self.key = (rec.key,) + self.shape

    def attempt(self, flat):
        """The call's result, replayed; ``GUARDED`` (nothing changed) when a guard fails
        (a :class:`~lazycore.trace.replayer.Replayable`)."""
        changed = self.python.failed()
        if changed is not None:
            return self._guarded(changed)
        if _global_state() != self.state:
            return self._guarded("np.errstate or the index checks changed")
        for kind, where, _ in self.outs:
            if kind == "old" and where() is None:
                return self._guarded("an array the step returned a view of is gone")
        values = self.rec.replay([x._storage.handle for x in flat if isinstance(x, ndarray)])
        if values is None:
            return self._guarded("an array the step read or updated is gone, holds a value of another type, "
                                 "or arguments alias differently")
        storages = [Storage(LazyTensor(v, dev), s) for v, dev, s in zip(values, self.rec.kept, self.strides)]
        outs = []
        for kind, where, meta in self.outs:
            if kind == "value":
                outs.append(where)
            else:
                outs.append(_array(storages[where] if kind == "new" else where(), meta))
        return _unflatten(self.out_spec, iter(outs))

    def _guarded(self, why: str):
        self.failed = why
        return GUARDED


def _out_key(desc) -> tuple:
    kind, where, meta = desc
    if kind == "value":
        return ("value", type(where), repr(where))
    cls, steps, *rest = meta
    return (kind, where if kind == "new" else id(where()), cls, _views.steps_key(steps), *rest)


def _array(storage: Storage, meta: tuple) -> ndarray:
    cls, steps, shape, dtype, estrides, offset, writeable = meta
    a = cls.__new__(cls)
    a._storage = storage
    a._steps = steps
    a._shape = shape
    a._dtype = dtype
    a._estrides = estrides
    a._offset = offset
    a._writeable = writeable
    a._cache = None
    return a
