"""Profiling: a trace of what the lazy system did, for Perfetto or chrome://tracing.

::

    with lazycore.profile.trace("step.json"):
        for x, y in batches:
            with lazycore.profile.span("train step"):   # optional: your own spans
                train_step(x, y)
                lazycore.mark_step()

writes Chrome trace-event JSON (open it at https://ui.perfetto.dev): one span
per barrier (``barrier N``, with its graph size and whether the compile cache
hit, missed or the program came from the persistent cache: ``disk``), and
inside it the phases ``trace`` (walk, cache key), ``lowering`` (lazy module,
pass pipeline), ``compile`` (XLA) or ``disk_load``, and ``execute``; every host
<-> device copy is a ``transfer`` span. The spans come from
:mod:`lazycore.metrics`' timers, which check for an active recorder (one
``None`` test per timed phase, nothing per recorded op). Traces may nest; an
inner one is also recorded by the outer.

Per kernel, what the device did (:mod:`lazycore.observe.kernels`)::

    with lazycore.profile.kernels() as prof:
        for _ in range(10):
            train_step(x, y)
            lazycore.mark_step()
    print(prof.table())

XLA's profiler times every kernel each program runs (a fusion, a library
call, a copy); the table sums them per program and kernel: device time,
count, mean, share, the HLO ops in it and your lines they came from.
``trace(path, kernels=True)`` records them too and puts them in the trace on
a track per device, under the barrier whose program ran them; the last
profile's top kernels also appear in ``lazycore.metrics.report()``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

from lazycore.observe import kernels as _kernels
from lazycore.observe import memory as _memory
from lazycore.observe import metrics
from lazycore.runtime import pjrt
from lazycore.runtime.device import known_devices

__all__ = ["Recorder", "kernels", "span", "trace"]

_KERNEL_TRACK = 1 << 40
"""Trace-event thread ids of the kernel tracks: this plus the device's ordinal (no real thread's id)."""


class Recorder:
    """Collects spans as Chrome trace events (microseconds since the recorder started)."""

    def __init__(self, path: str | os.PathLike | None = None, parent: Recorder | None = None):
        self.path = path
        self.parent = parent
        self.t0 = time.perf_counter()
        self.pid = os.getpid()
        self.events: list[dict] = []
        self.barriers = 0
        self._barrier: dict | None = None  # the barrier whose phases are arriving

    def _event(self, name: str, cat: str, start: float, end: float, args: dict | None = None,
               tid: int | None = None) -> None:
        ev = {
            "name": name,
            "cat": cat,
            "ph": "X",
            "ts": round((start - self.t0) * 1e6, 3),
            "dur": round((end - start) * 1e6, 3),
            "pid": self.pid,
            "tid": threading.get_ident() if tid is None else tid,
        }
        if args:
            ev["args"] = args
        self.events.append(ev)

    # metrics calls these two

    def span(self, phase: str, start: float, end: float) -> None:
        """A timed phase (``trace`` opens a barrier, ``execute`` closes it)."""
        if phase == "trace":
            self.barriers += 1
            self._barrier = {"start": start, "args": {"barrier": self.barriers, "cache": "hit"}}
        elif phase == "compile" and self._barrier is not None:
            self._barrier["args"]["cache"] = "miss"
        elif phase == "disk_load" and self._barrier is not None:
            self._barrier["args"]["cache"] = "disk"  # a compile after it (the entry was unreadable) says miss
        self._event(phase, "lazycore", start, end)
        if phase == "execute" and self._barrier is not None:
            b, self._barrier = self._barrier, None
            self._event(f"barrier {b['args']['barrier']}", "barrier", b["start"], end, b["args"])
        if self.parent is not None:
            self.parent.span(phase, start, end)

    def graph(self, nodes: int, outputs: int, params: int) -> None:
        """The size of the current barrier's graph."""
        if self._barrier is not None:
            self._barrier["args"].update(nodes=nodes, outputs=outputs, parameters=params)
        if self.parent is not None:
            self.parent.graph(nodes, outputs, params)

    def user_span(self, name: str, start: float, end: float) -> None:
        self._event(name, "user", start, end)
        if self.parent is not None:
            self.parent.user_span(name, start, end)

    def kernels(self, prof: _kernels.KernelProfile) -> None:
        """The kernels of a kernel profile, each on its device's track."""
        for program, kernel, start, duration, device in prof.events:
            if start >= self.t0:
                self._event(kernel, "kernel", start, start + duration, {"program": program},
                            tid=_KERNEL_TRACK + device)
        if self.parent is not None:
            self.parent.kernels(prof)

    def to_json(self) -> dict:
        # Parents before children at equal start times, for viewers that nest by order.
        events = sorted(self.events, key=lambda e: (e["ts"], -e["dur"]))
        meta = [{"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0, "args": {"name": "lazycore"}}]
        for tid in sorted({e["tid"] for e in events}):
            if tid >= _KERNEL_TRACK:
                name = f"XLA kernels (device {tid - _KERNEL_TRACK})"
            else:
                name = "main" if tid == threading.main_thread().ident else f"thread {tid}"
            meta.append({"name": "thread_name", "ph": "M", "pid": self.pid, "tid": tid, "args": {"name": name}})
        import lazycore

        return {
            "traceEvents": meta + events,
            "displayTimeUnit": "ms",
            "otherData": {"producer": f"lazycore {lazycore.__version__}"},
        }

    def write(self, path: str | os.PathLike | None = None) -> str:
        path = os.fspath(path or self.path)
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        with open(path, "w") as f:
            json.dump(self.to_json(), f)
        return path


@contextlib.contextmanager
def trace(path: str | os.PathLike, kernels: bool = False):
    """Record spans inside the block; write them to ``path`` (Chrome trace-event
    JSON) at its end. ``kernels=True``: with every kernel the programs ran
    (:func:`kernels`), on a track per device."""
    rec = Recorder(path, metrics._recorder)
    metrics._recorder = rec
    session = _start_kernels() if kernels else None
    try:
        yield rec
    finally:
        if session is not None:
            rec.kernels(_finish_kernels(session, _kernels.KernelProfile()))
        metrics._recorder = rec.parent
        rec.write()


def _start_kernels():
    # a program launched before the block would show kernels no launch in it explains
    for d in known_devices():
        d.wait()
    made = _memory.programs()
    # a program made after the newest one now first runs inside the profile: kernels.build keeps that run apart
    return pjrt.KernelSession(), (made[-1].number if made else 0)


def _finish_kernels(started, prof: _kernels.KernelProfile) -> _kernels.KernelProfile:
    # the last program may still be running: its kernels end before the profile does
    for d in known_devices():
        d.wait()
    session, new_after = started
    found, launches = session.stop()
    built = _kernels.build(found, launches, new_after)
    prof.__dict__.update(built.__dict__)  # the object the block yielded gets every field
    _kernels.LAST.profile = prof
    return prof


@contextlib.contextmanager
def kernels():
    """Record the kernels XLA runs inside the block (XLA's profiler, as
    ``jax.profiler.trace`` runs it); yields a :class:`~lazycore.observe.kernels.KernelProfile`,
    filled when the block ends: ``prof.table()``, ``prof.rows``. Programs still
    running at its start and at its end are waited for (nothing pending is run). Not inside a
    ``jax.profiler`` trace: XLA records one profile at a time."""
    prof = _kernels.KernelProfile()
    session = _start_kernels()
    try:
        yield prof
    finally:
        _finish_kernels(session, prof)
        if metrics._recorder is not None:  # inside a trace: the kernels go in it too
            metrics._recorder.kernels(prof)


@contextlib.contextmanager
def span(name: str):
    """A span of your own (a training step, a data-loading phase) in the active trace, if any."""
    rec = metrics._recorder
    if rec is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        rec.user_span(name, start, time.perf_counter())
