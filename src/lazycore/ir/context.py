"""Who is watching the graph being built.

While a frontend records one call's lowering (:mod:`lazycore.trace.recipes`),
the recorder sees every leaf and node the core API makes and every side
effect (an in-place assign, a value read). It is installed and removed only
through :meth:`TraceContext.recording`; everything else asks
:attr:`TraceContext.recorder`, one attribute read on the per-op path.
"""

from __future__ import annotations

import contextlib
import functools
import threading

LOCK = threading.RLock()
"""The one lock of lazycore's shared state (docs/threads.md): the pending
graph and step log, the live-tensor registry, the trace context, the caches
and the MLIR context and dialects. Recording an op, a barrier, a read, an
upload and every MLIR build or compile hold it; it is re-entrant, so an op
that records others (a frontend op, a recorded lowering) holds it once for all
of them, and a thread that holds it sees the graph as no other thread half
built it."""


def locked(fn):
    """``fn`` under :data:`LOCK`: one step of the shared state that no other
    thread's op, barrier or compile interleaves with (docs/threads.md)."""

    @functools.wraps(fn)
    def under_lock(*args, **kwargs):
        with LOCK:
            return fn(*args, **kwargs)

    return under_lock


class TraceContext:
    __slots__ = ("recorder", "updates", "cutter", "symbolic")

    def __init__(self):
        self.recorder = None
        """The active recorder (``plain``, ``on_leaf``, ``on_node``, ``on_assign``, ``taint``), or None."""
        self.updates = None
        """Called as ``updates(handle, new_value)`` before an in-place update
        (the automatic step barriers, :mod:`lazycore.runtime.autostep`), or None."""
        self.cutter = None
        """The automatic step barriers (a :class:`lazycore.runtime.autostep.StepCutter`),
        given to the context when that module loads (this layer cannot make one:
        a cut runs a barrier). Every recorded op reads ``cutter.due`` first;
        frontends tell it where their steps begin and end, and hold it off
        while they trace a step of their own."""
        self.symbolic = False
        """True while ``lazycore.export`` traces a function for one program at every
        size of some dimensions (:meth:`symbolic_sizes`): a lowering whose graph's
        structure would change with a size takes the form that does not (torch's
        small-K products keep the dot). Lowerings are recorded per call signature,
        so a frontend's signature holds it (one attribute read per op)."""

    @contextlib.contextmanager
    def recording(self, recorder):
        """``recorder`` watches inside; a recording inside another hides it
        until it ends (the outer one then takes its nodes, see ``recipes``).
        The recording holds :data:`LOCK`: no other thread's op is seen by it."""
        with LOCK:
            outer, self.recorder = self.recorder, recorder
            try:
                yield recorder
            finally:
                self.recorder = outer

    def cuts_held(self):
        """A context inside which no automatic step cut (nor an eager-mode run
        of each op) happens: the :attr:`cutter`'s ``holding()``, or nothing
        where none is given. For a frontend tracing a step of its own (a
        capture's recording, an export's trace, a backward pass recorded)."""
        return self.cutter.holding() if self.cutter is not None else contextlib.nullcontext()

    @contextlib.contextmanager
    def symbolic_sizes(self):
        """:attr:`symbolic` inside (process-wide: another thread's ops traced
        meanwhile take the export's forms too: the same values in another
        rounding order at worst, recorded apart from their usual ones)."""
        before, self.symbolic = self.symbolic, True
        try:
            yield
        finally:
            self.symbolic = before

    def assigning(self, handle) -> None:
        """``handle`` is about to be updated in place: a side effect, unless
        the recording made the handle's value itself (see ``on_assign``)."""
        if self.recorder is not None:
            self.recorder.on_assign(handle)

    def taint(self) -> None:
        """A side effect happened: what is being recorded cannot be replayed."""
        if self.recorder is not None:
            self.recorder.taint()


TRACE = TraceContext()
