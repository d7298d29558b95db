"""What happened: counters, timed phases, graph sizes, and listeners.

Every layer reports here (tracing counts fallbacks and transfers, the runtime
times its phases and announces barriers and compiles); nothing here knows who
listens. :mod:`lazycore.observe` reads the numbers (``lazycore.metrics``) and
subscribes to events (guards, ``LAZYCORE_DEBUG`` lines, profiles, IR dumps)
with :func:`listen`, so the layers below it never name it.

Events (``emit(name, *args)``; a listener's return value reaches the caller,
see :func:`emit`):

- ``"phase"`` ``(phase, start, end)``: a timed phase ended (perf_counter seconds)
- ``"graph"`` ``(nodes, outputs, params)``: a barrier's graph size
- ``"barrier_start"`` ``(device)``: a barrier is about to collect live tensors
- ``"transfer"`` ``(direction, type, nbytes)``: a host <-> device copy is
  about to happen (``"host-to-device"`` or ``"device-to-host"``; ``nbytes``
  None when not known yet)
- ``"implicit_barrier"`` ``(type)``: reading a pending value of that type is
  about to run a barrier
- ``"read_apart"`` ``(type, nodes)``: reading a pending mask or index of that
  type is about to run its graph of ``nodes`` nodes alone, not a barrier
- ``"compile"`` ``(nodes, walk)``: a barrier needs a program its compile cache
  lacks for the graph ``walk`` walked; it is about to compile it, or to load
  it from the persistent cache (:mod:`lazycore.runtime.diskcache`), which a
  guard cannot know in advance
- ``"lowering"`` ``(walk, module, device, donate, pipeline)``: a module is
  about to be lowered; a listener may return an object with
  ``after_pass(name, op)`` and ``finish(module)`` to see every stage
- ``"program"`` ``(executable, device, walk, loaded)``: a barrier has a
  program its compile cache lacked, compiled or (``loaded``) read from the
  persistent cache
- ``"barrier"`` ``(walk, device, hit, donate, pipeline, loaded)``: a barrier ran
  (``walk`` is None when the step's walk was recalled; ``hit``: the program
  was in the compile cache; ``loaded``: it came from the persistent cache)
- ``"scalar_promoted"`` ``(first, now, location)``: the learned scalar policy
  made the number at a place a program parameter (it took ``first``, then
  ``now``; ``location``: the user's ``file:line``)
- ``"auto_barrier"`` ``(what, location)``: an automatic step barrier learned
  where a step ends, cut a graph at the size bound, or stood down
- ``"buckets"`` ``(device, what)``: a shape-bucket decision
  (:mod:`lazycore.runtime.buckets`: a dimension marked by the learned policy,
  a graph its padding rules leave at its own sizes)
- ``"failure"`` ``(device, failed, outputs, first_message)``: a barrier's
  program failed; ``failed`` of its ``outputs`` now hold the error
"""

from __future__ import annotations

import contextlib
import time
from collections import deque

from lazycore.ir.context import LOCK

COUNTERS = (
    "compiles",
    # programs that stack rows for a rolled loop or slice one out of its stack
    # (lazycore.runtime.stacks), not the user's graphs
    "stack_compiles",
    "cache_hits",
    # programs the compile cache dropped before its bound, the process nearing
    # its limit on memory mappings (lazycore.runtime.cache.MAPPINGS_SHARE)
    "programs_given_back",
    # bytes of freed host memory handed back to the kernel after compiles and
    # dropped programs (lazycore.runtime.hostmem.give_back_freed)
    "host_memory_given_back",
    "executions",
    "stack_executions",  # runs of those programs
    "fallbacks",  # ops a frontend ran outside lazycore (it bumps this itself)
    "transfers_to_device",
    "transfers_to_host",
    "bytes_to_device",
    "bytes_to_host",
    "donated_buffers",
    "failed_outputs",  # program outputs that hold an error (lazycore.runtime.failures)
    # the persistent compile cache (lazycore.runtime.diskcache): programs loaded
    # instead of compiled, programs written, entries unreadable or unwritable
    "disk_cache_hits",
    "disk_cache_writes",
    "disk_cache_errors",
    # model calls of transformers' generate() on a lazy device, one per new
    # token (frontends/torch/generation.py): compiles per generated token
    "generated_tokens",
    # reads answered from a small upload's host copy, without a program or a
    # device read (lazycore.runtime.hostreads)
    "host_reads",
    # lowerings recorded (lazycore.trace.recipes.record_call), and recordings
    # another process made, loaded from the persistent cache instead
    "recordings",
    "recordings_loaded",
)
PHASES = ("trace", "lowering", "compile", "execute")
# disk_load: reading a program from the persistent cache (instead of lowering and compiling)
REPORT_PHASES = PHASES + ("transfer", "disk_load")
TIMINGS_KEPT = 10_000
PROGRAMS_KEPT = 16
"""Mesh programs described for the report (:mod:`lazycore.observe.placement`)."""


class Events:
    """The one store of counters and timings, and the listener lists."""

    def __init__(self):
        self.counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self.timings: dict[str, deque] = {p: deque(maxlen=TIMINGS_KEPT) for p in REPORT_PHASES}
        # phase -> [count, total seconds, max seconds] since the last reset
        self.totals: dict[str, list] = {p: [0, 0.0, 0.0] for p in REPORT_PHASES}
        # (nodes, outputs, parameters) per barrier, most recent last
        self.graphs: deque = deque(maxlen=TIMINGS_KEPT)
        self.graph_totals = [0, 0, 0]  # barriers, total nodes, max nodes
        self.fallback_sites: dict[str, dict[str, int]] = {}
        self.programs: deque = deque(maxlen=PROGRAMS_KEPT)  # lazycore.observe.placement
        self.listeners: dict[str, list] = {}

    def reset(self) -> None:
        for k in self.counters:
            self.counters[k] = 0
        self.fallback_sites.clear()
        for d in self.timings.values():
            d.clear()
        for tot in self.totals.values():
            tot[:] = [0, 0.0, 0.0]
        self.graphs.clear()
        self.programs.clear()
        self.graph_totals[:] = [0, 0, 0]


EVENTS = Events()
_counters = EVENTS.counters
_listeners = EVENTS.listeners


def bump(name: str, n: int = 1) -> None:
    if name not in _counters:
        raise KeyError(f"unknown counter '{name}' (known: {', '.join(COUNTERS)})")
    _counters[name] += n


def fallback(op: str, location: str) -> None:
    """Count a frontend op that ran outside lazycore, with the user line that reached it."""
    with LOCK:  # (a NumPy fallback runs outside any op's lock: no count may be lost)
        _counters["fallbacks"] += 1
        sites = EVENTS.fallback_sites.setdefault(op, {})
        sites[location] = sites.get(location, 0) + 1


def listen(event: str, fn) -> None:
    """Call ``fn(*args)`` at every ``emit(event, *args)``, after earlier listeners."""
    _listeners.setdefault(event, []).append(fn)


def unlisten(event: str, fn) -> None:
    _listeners.get(event, []).remove(fn)


def emit(event: str, *args) -> list:
    """Tell every listener of ``event``; returns their non-None answers."""
    out = []
    for fn in _listeners.get(event, ()):
        r = fn(*args)
        if r is not None:
            out.append(r)
    return out


def _tally(tot: list, x) -> None:
    """``tot`` is [count, total, max]."""
    tot[0] += 1
    tot[1] += x
    if x > tot[2]:
        tot[2] = x


def _finish(phase: str, start: float, end: float) -> None:
    seconds = end - start
    EVENTS.timings[phase].append(seconds)
    _tally(EVENTS.totals[phase], seconds)
    if "phase" in _listeners:
        emit("phase", phase, start, end)


def record(phase: str, seconds: float) -> None:
    """Add a duration measured elsewhere (it ends now)."""
    end = time.perf_counter()
    _finish(phase, end - seconds, end)


@contextlib.contextmanager
def timed(phase: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        _finish(phase, start, time.perf_counter())


def record_graph(nodes: int, outputs: int, params: int) -> None:
    """The size of the graph a barrier runs (once per barrier, before compile or execute)."""
    EVENTS.graphs.append((nodes, outputs, params))
    _tally(EVENTS.graph_totals, nodes)
    if "graph" in _listeners:
        emit("graph", nodes, outputs, params)
