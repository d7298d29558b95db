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
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time

from lazycore.observe import metrics

__all__ = ["Recorder", "span", "trace"]


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

    def _event(self, name: str, cat: str, start: float, end: float, args: dict | None = None) -> None:
        ev = {
            "name": name,
            "cat": cat,
            "ph": "X",
            "ts": round((start - self.t0) * 1e6, 3),
            "dur": round((end - start) * 1e6, 3),
            "pid": self.pid,
            "tid": threading.get_ident(),
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

    def to_json(self) -> dict:
        # Parents before children at equal start times, for viewers that nest by order.
        events = sorted(self.events, key=lambda e: (e["ts"], -e["dur"]))
        meta = [{"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0, "args": {"name": "lazycore"}}]
        for tid in sorted({e["tid"] for e in events}):
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
def trace(path: str | os.PathLike):
    """Record spans inside the block; write them to ``path`` (Chrome trace-event JSON) at its end."""
    rec = Recorder(path, metrics._recorder)
    metrics._recorder = rec
    try:
        yield rec
    finally:
        metrics._recorder = rec.parent
        rec.write()


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
