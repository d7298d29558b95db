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


_fallback_sites: dict[str, dict[str, int]] = {}


def fallback(op: str, location: str) -> None:
    """Count a frontend op that ran outside lazycore, with the user line that reached it."""
    _counters["fallbacks"] += 1
    sites = _fallback_sites.setdefault(op, {})
    sites[location] = sites.get(location, 0) + 1


def fallbacks() -> dict[str, dict[str, int]]:
    """Fallback counts by op name, then by user source location (``file:line``)."""
    return {op: dict(sites) for op, sites in _fallback_sites.items()}


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
    _fallback_sites.clear()
    for d in _timings.values():
        d.clear()
