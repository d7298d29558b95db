"""Runtime counters and phase timings.

Counters answer "did it recompile / transfer / donate?" in tests and in the
field; timings give one duration (seconds) per barrier for each phase:
``trace`` (walk the graph, make the cache key), ``lowering`` (build the lazy
module, run the pass pipeline), ``compile`` (XLA) and ``execute``. Only the
most recent durations are kept, so a long training loop does not grow them.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque

COUNTERS = (
    "compiles",
    "cache_hits",
    "executions",
    "fallbacks",  # ops a frontend ran outside lazycore (it bumps this itself)
    "transfers_to_device",
    "transfers_to_host",
    "bytes_to_device",
    "bytes_to_host",
    "donated_buffers",
)
PHASES = ("trace", "lowering", "compile", "execute")
TIMINGS_KEPT = 10_000

_counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
_timings: dict[str, deque] = {p: deque(maxlen=TIMINGS_KEPT) for p in PHASES}


def bump(name: str, n: int = 1) -> None:
    if name not in _counters:
        raise KeyError(f"unknown counter '{name}' (known: {', '.join(COUNTERS)})")
    _counters[name] += n


def counters() -> dict[str, int]:
    """A snapshot of every counter."""
    return dict(_counters)


def timings() -> dict[str, list[float]]:
    """Durations in seconds per phase, oldest first."""
    return {p: list(d) for p, d in _timings.items()}


def record(phase: str, seconds: float) -> None:
    _timings[phase].append(seconds)


@contextlib.contextmanager
def timed(phase: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        _timings[phase].append(time.perf_counter() - start)


def reset() -> None:
    """Zero the counters and forget the timings."""
    for k in _counters:
        _counters[k] = 0
    for d in _timings.values():
        d.clear()
